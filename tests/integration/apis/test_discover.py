"""`dynamo-pool-operator discover` against a real kube-apiserver: imported EndpointSlices
created as an MCS implementation (or Karmada) writes them, read by the command line as
a user would run it; its table and JSON, its exit codes, and a user holding nothing but
`list` on EndpointSlices (docs/exports.md, "As the Global Router sees it")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamo_pool_operator import cli
from dynamo_pool_operator.localcluster.controlplane import ControlPlane, free_port
from tests.integration.support.tenants import grant

pytestmark = pytest.mark.timeout(120)

MANAGER = "lighthouse-agent.submariner.io"


def imported(
    ns: str,
    service: str,
    cluster: str | None,
    endpoints: list[tuple[str, bool]],
    *,
    name: str | None = None,
) -> dict[str, Any]:
    """An EndpointSlice as a standard MCS implementation imports it."""
    labels = {
        "multicluster.kubernetes.io/service-name": service,
        "endpointslice.kubernetes.io/managed-by": MANAGER,
    }
    if cluster is not None:
        labels["multicluster.kubernetes.io/source-cluster"] = cluster
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name or f"{service}-{cluster}", "namespace": ns, "labels": labels},
        "addressType": "IPv4",
        "ports": [{"name": "relay", "port": 9000, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": [address], "conditions": {"ready": ready}} for address, ready in endpoints
        ],
    }


def collected(ns: str, service: str, member: str, address: str) -> dict[str, Any]:
    """An EndpointSlice as Karmada collects it onto its control plane."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{member}-{service}",
            "namespace": ns,
            "labels": {
                "kubernetes.io/service-name": f"derived-{service}",
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.karmada.io",
            },
            "annotations": {
                "work.karmada.io/namespace": f"karmada-es-{member}",
                "work.karmada.io/name": f"{service}-work",
            },
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
    }


def discover(
    capsys: pytest.CaptureFixture[str], kubeconfig: Path | str, *args: str
) -> tuple[int, str, str]:
    code = cli.main(["discover", "--kubeconfig", str(kubeconfig), *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def scene(control_plane: ControlPlane, namespace: str) -> str:
    """east's `llama` live with its frontend, west's `qwen` not live, a slice without its
    source cluster, an unrelated import, and a local Service's slice (not an import)."""
    ns = namespace
    for obj in (
        imported(ns, "llama-pool-relay", "east", [("10.244.0.5", True), ("10.244.0.4", True)]),
        imported(ns, "llama-frontend", "east", [("10.96.234.89", True)]),
        imported(ns, "qwen-pool-relay", "west", [("10.245.0.7", False)]),
        imported(ns, "mistral-pool-relay", None, [("10.246.0.1", True)], name="nocluster"),
        imported(ns, "redis", "east", [("10.97.0.8", True)]),
    ):
        control_plane.apply(obj)
    local = imported(ns, "local-pool-relay", "east", [("10.0.0.1", True)], name="local")
    del local["metadata"]["labels"]["multicluster.kubernetes.io/service-name"]
    local["metadata"]["labels"]["kubernetes.io/service-name"] = "local-pool-relay"
    control_plane.apply(local)
    return ns


def test_json_is_every_pool_as_the_router_finds_it(
    control_plane: ControlPlane, scene: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = discover(capsys, control_plane.kubeconfig, "-n", scene, "-o", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert [(p["cluster"], p["name"], p["live"]) for p in doc["pools"]] == [
        ("east", "llama", True),
        ("west", "qwen", False),
    ]
    llama = doc["pools"][0]
    assert llama == {
        "cluster": "east",
        "namespace": scene,
        "name": "llama",
        "live": True,
        "relay": {
            "service": "llama-pool-relay",
            "endpoints": [
                {"address": "10.244.0.4", "ready": True},
                {"address": "10.244.0.5", "ready": True},
            ],
        },
        "frontends": [
            {
                "service": "llama-frontend",
                "endpoints": [{"address": "10.96.234.89", "ready": True}],
            }
        ],
        "problems": [],
    }
    skipped = {s["service"]: s["why"] for s in doc["skipped"]}
    assert set(skipped) == {"mistral-pool-relay", "qwen-pool-relay", "redis"}
    assert "no multicluster.kubernetes.io/source-cluster label" in skipped["mistral-pool-relay"]
    assert "not live" in skipped["qwen-pool-relay"]
    assert "not a pool's Service" in skipped["redis"]


def test_the_table(
    control_plane: ControlPlane, scene: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = discover(capsys, control_plane.kubeconfig, "-n", scene)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["CLUSTER", "NAMESPACE", "NAME", "LIVE", "RELAY", "FRONTENDS"]
    assert lines[1].split() == [
        "east",
        scene,
        "llama",
        "yes",
        "2/2",
        "ready",
        "llama-frontend",
        "(1/1",
        "ready)",
    ]
    assert lines[2].split() == ["west", scene, "qwen", "no", "0/1", "ready", "-"]
    assert "  relay llama-pool-relay: 10.244.0.4 ready, 10.244.0.5 ready" in lines
    assert "Not used by the router:" in lines


def test_all_namespaces_and_another_namespace(
    control_plane: ControlPlane, scene: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = discover(capsys, control_plane.kubeconfig, "-A", "-o", "json")
    assert code == 0
    assert {p["name"] for p in json.loads(out)["pools"] if p["namespace"] == scene} == {
        "llama",
        "qwen",
    }
    code, out, _ = discover(capsys, control_plane.kubeconfig, "-n", "default", "-o", "json")
    assert code == 0
    assert all(p["namespace"] == "default" for p in json.loads(out)["pools"])


def test_pool_exits_1_unless_it_is_live(
    control_plane: ControlPlane, scene: str, capsys: pytest.CaptureFixture[str]
) -> None:
    kc = control_plane.kubeconfig
    code, out, err = discover(capsys, kc, "--pool", f"east/{scene}/llama", "-o", "json")
    assert (code, err) == (0, "")
    assert [p["name"] for p in json.loads(out)["pools"]] == ["llama"]
    code, _, err = discover(capsys, kc, "--pool", f"west/{scene}/qwen")
    assert code == 1
    assert f"pool west/{scene}/qwen is not live" in err
    code, _, err = discover(capsys, kc, "--pool", f"west/{scene}/llama")
    assert code == 1
    assert "not found" in err
    # Its relay pods go unready in east: the router drops the pool.
    control_plane.apply(
        imported(scene, "llama-pool-relay", "east", [("10.244.0.5", False), ("10.244.0.4", False)])
    )
    code, out, _ = discover(capsys, kc, "--pool", f"east/{scene}/llama", "-o", "json")
    assert code == 1
    assert json.loads(out)["pools"][0]["live"] is False


def test_a_pool_not_found_names_the_pools_that_are(
    control_plane: ControlPlane, scene: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cluster part of `--pool` is the name the imports give the exporting cluster;
    a wrong one (or a pool that is not imported) must not read as "nothing is imported"
    while other pools are: the error names them, and the table does not say no pool
    was found."""
    kc = control_plane.kubeconfig
    code, out, err = discover(capsys, kc, "--pool", f"dev-cluster/{scene}/llama")
    assert code == 1
    assert err == (
        f"pool dev-cluster/{scene}/llama is not found: {scene}/llama is imported from east "
        "(a pool's cluster is the exporting cluster's name, as its imports say it): "
        f"try --pool east/{scene}/llama\n"
    )
    assert out.splitlines()[0] == f"No pool dev-cluster/{scene}/llama."
    code, out, err = discover(capsys, kc, "--pool", f"east/{scene}/gemma")
    assert code == 1
    assert err == (
        f"pool east/{scene}/gemma is not found; the pools imported in namespace {scene} are "
        f"east/{scene}/llama (live), west/{scene}/qwen (not live)\n"
    )
    code, _, err = discover(capsys, kc, "--pool", "east/nowhere/llama")
    assert code == 1
    assert err == "pool east/nowhere/llama is not found: no pool is imported in namespace nowhere\n"


def test_a_user_who_may_only_list_endpointslices(
    control_plane: ControlPlane, scene: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = [
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list"]}
    ]
    grant(control_plane, scene, rules, user="router-reader")
    kc = control_plane.user_kubeconfig("router-reader")
    code, out, err = discover(capsys, kc, "-n", scene, "-o", "json")
    assert code == 0
    assert [p["name"] for p in json.loads(out)["pools"]] == ["llama", "qwen"]
    # The ServiceImports only explain: refused, they are a note, not a failure.
    assert err.startswith(
        f"note: the ServiceImports are not read (not allowed to list ServiceImports in "
        f"namespace {scene!r}: "
    )
    assert err.endswith(
        "); an import for which the implementation writes no EndpointSlices is not pointed "
        "out (it needs list on serviceimports.multicluster.x-k8s.io)\n"
    )
    assert err.count("\n") == 1
    # ... and nothing beyond its namespace: a read RBAC refuses is a cluster that could
    # not be used, 1 as for every command (exitcodes.py).
    code, out, err = discover(capsys, kc, "-A")
    assert (code, out) == (1, "")
    assert "not allowed to list EndpointSlices in any namespace" in err


def test_karmada_reads_the_slices_karmada_collects(
    control_plane: ControlPlane, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    control_plane.apply(collected(namespace, "llama-pool-relay", "member1", "10.1.0.4"))
    control_plane.apply(collected(namespace, "llama-frontend", "member1", "10.1.0.9"))
    control_plane.apply(imported(namespace, "qwen-pool-relay", "east", [("10.2.0.1", True)]))
    code, out, err = discover(
        capsys, control_plane.kubeconfig, "--karmada", "-n", namespace, "-o", "json"
    )
    assert code == 0
    (pool,) = json.loads(out)["pools"]  # the standard MCS import is not Karmada's
    assert (pool["cluster"], pool["name"], pool["live"]) == ("member1", "llama", True)
    assert [f["service"] for f in pool["frontends"]] == ["llama-frontend"]
    # This control plane serves no Works: said once, and the pools are still shown.
    assert err.startswith("note: the Works are not read")


def legacy(ns: str, service: str, member: str, address: str) -> dict[str, Any]:
    """A slice as Karmada before v1.15.0 (v1.14.4, v1.13.7) collects it: no manager
    (karmada-io/karmada, pkg/controllers/mcs/endpointslice_controller.go at v1.14.0)."""
    s = collected(ns, service, member, address)
    del s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"]
    return s


def test_an_older_karmadas_slices_are_read_by_their_derived_name(
    control_plane: ControlPlane, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ns, kc = namespace, control_plane.kubeconfig
    # No slice at all (every pool withdrawn): nothing was read another way, nothing to say.
    code, out, err = discover(capsys, kc, "--karmada", "-n", ns, "-o", "json")
    assert (code, json.loads(out)["pools"]) == (0, [])
    assert "no EndpointSlice here" not in err
    control_plane.apply(legacy(ns, "llama-pool-relay", "member1", "10.1.0.4"))
    control_plane.apply(legacy(ns, "llama-frontend", "member1", "10.1.0.9"))
    # A slice Kubernetes' controller would make for a Service named `derived-...`.
    made = legacy(ns, "evil-pool-relay", "prod", "10.9.9.9")
    made["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] = (
        "endpointslice-controller.k8s.io"
    )
    control_plane.apply(made)
    code, out, err = discover(capsys, kc, "--karmada", "-n", ns, "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert [(p["cluster"], p["name"], p["live"]) for p in doc["pools"]] == [
        ("member1", "llama", True)
    ]
    assert doc["pools"][0]["problems"] == [
        "found by kubernetes.io/service-name=derived-<service> alone: its slices carry no "
        "endpointslice.kubernetes.io/managed-by=endpointslice-controller.karmada.io, which "
        "the router selects on (Karmada sets it from v1.15.0, v1.14.4 and v1.13.7): the "
        "router does not see this pool until Karmada is upgraded"
    ]
    assert [s["service"] for s in doc["skipped"]] == ["evil-pool-relay"]
    assert "managed by endpointslice-controller.k8s.io" in doc["skipped"][0]["why"]
    assert err.splitlines()[0] == (
        "note: no EndpointSlice here is labelled endpointslice.kubernetes.io/managed-by="
        "endpointslice-controller.karmada.io, which Karmada sets from v1.15.0, v1.14.4 and "
        "v1.13.7: read instead the slices labelled kubernetes.io/service-name=derived-"
        "<service>. The router selects on the manager: it sees these pools only once "
        "Karmada is upgraded"
    )
    # For a script, such a pool is not usable from here.
    code, _, err = discover(capsys, kc, "--karmada", "--pool", f"member1/{ns}/llama")
    assert code == 1
    assert "the router does not see it until Karmada is upgraded" in err
    # Named, Karmada's manager is required: nothing read by name.
    code, out, err = discover(capsys, kc, "--implementation", "karmada", "-n", ns, "-o", "json")
    assert (code, json.loads(out)["pools"]) == (0, [])
    assert "without --implementation karmada, --karmada reads its slices by" in err
    # Once one slice carries the manager (an upgraded Karmada), the router's path is taken.
    control_plane.apply(collected(ns, "qwen-pool-relay", "member2", "10.2.0.4"))
    code, out, err = discover(capsys, kc, "--karmada", "-n", ns, "-o", "json")
    assert [p["name"] for p in json.loads(out)["pools"]] == ["qwen"]
    assert not err.startswith("note: no EndpointSlice here")


def service_import(
    cp: ControlPlane, ns: str, name: str, slices: str, clusters: tuple[str, ...]
) -> None:
    """A ServiceImport with the status an implementation writes (mcs-api v0.5.2 CRDs)."""
    body: dict[str, Any] = {
        "apiVersion": "multicluster.x-k8s.io/v1beta1",
        "kind": "ServiceImport",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"type": "ClusterSetIP", "ports": [{"port": 8000, "protocol": "TCP"}]},
    }
    cp.apply(body)
    body["status"] = {
        "endpointSliceObjects": slices,
        "clusters": [{"cluster": c} for c in clusters],
    }
    status, answer = cp.request(
        "PATCH",
        f"/apis/multicluster.x-k8s.io/v1beta1/namespaces/{ns}/serviceimports/{name}/status"
        "?fieldManager=an-implementation&force=true",
        body,
        "application/apply-patch+yaml",
    )
    assert status == 200, answer


def test_an_import_the_implementation_writes_no_slices_for_is_a_problem_of_its_pool(
    control_plane: ControlPlane, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ns, kc = namespace, control_plane.kubeconfig
    control_plane.apply(imported(ns, "llama-pool-relay", "east", [("10.244.0.4", True)]))
    service_import(control_plane, ns, "llama-pool-relay", "Present", ("east",))
    service_import(control_plane, ns, "llama-frontend", "Absent", ("east",))
    service_import(control_plane, ns, "qwen-pool-relay", "Absent", ("west",))
    no_slices = (
        "the implementation writes no EndpointSlices for this import; the router cannot see "
        "it (its ServiceImport says status.endpointSliceObjects: Absent)"
    )
    code, out, err = discover(capsys, kc, "-n", ns, "-o", "json")
    assert (code, err) == (0, "")
    pools = json.loads(out)["pools"]
    assert [p["name"] for p in pools] == ["llama", "qwen"], "qwen's import without slices"
    llama, qwen = pools
    assert (llama["cluster"], llama["name"], llama["live"]) == ("east", "llama", True)
    assert llama["problems"] == [f"llama-frontend: {no_slices}"]
    assert (qwen["cluster"], qwen["name"], qwen["live"]) == ("west", "qwen", False)
    assert qwen["problems"] == [
        f"qwen-pool-relay: {no_slices}",
        "no qwen-frontend imported from cluster west: the router finds no frontend for this pool",
    ]
    # A reader who may list the slices and the imports sees it; one who may list only
    # the slices is told what she does not see.
    slices = {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list"]}
    imports = {
        "apiGroups": ["multicluster.x-k8s.io"],
        "resources": ["serviceimports"],
        "verbs": ["list"],
    }
    grant(control_plane, ns, [slices, imports], user="import-reader")
    code, out, err = discover(capsys, control_plane.user_kubeconfig("import-reader"), "-n", ns)
    assert (code, err) == (0, "")
    assert f"  problem: qwen-pool-relay: {no_slices}" in out.splitlines()
    grant(control_plane, ns, [slices], user="slice-reader")
    code, out, err = discover(capsys, control_plane.user_kubeconfig("slice-reader"), "-n", ns)
    assert code == 0
    assert "note: the ServiceImports are not read (not allowed to list" in err
    assert "qwen" not in out


def test_unreachable_cluster_exits_1_saying_so_as_kubectl_does(
    control_plane: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1, as `status`, `check` and `run` exit for a cluster they cannot use (2 is bad
    usage: exitcodes.py)."""
    cfg = yaml.safe_load(control_plane.kubeconfig.read_text())
    port = free_port()
    cfg["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    code, out, err = discover(capsys, path, "-n", "default")
    assert (code, out) == (1, "")
    assert err == (
        f"The connection to the server 127.0.0.1:{port} was refused - did you specify the "
        "right host or port?\n"
    )
