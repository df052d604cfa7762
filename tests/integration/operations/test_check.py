"""`dynamo-pool-operator check` against the real control plane: each check passing, and
failing (or warning) when what it looks at is broken, as the API server reports it.

The healthy scene: a ServiceAccount with exactly the rendered RBAC of rbac.py (asked
for by impersonation, as `--as` does), a relay whose clusterId matches the About API
property and whose status says Ready, and a Lease a leader renewed just now. Each
failing case breaks one thing of that scene for real. The checks that need APIs to be
missing run on a control plane of their own that starts with no CRD at all.
"""

from __future__ import annotations

import asyncio
import copy
import io
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamo_pool_operator import check, rbac
from dynamo_pool_operator.api import crd
from dynamo_pool_operator.api.mcs import serviceexports
from dynamo_pool_operator.config import API_VERSION, KIND
from dynamo_pool_operator.localcluster.assets import resolve
from dynamo_pool_operator.localcluster.controlplane import ControlPlane, free_port
from dynamo_pool_operator.localcluster.crds import (
    cluster_property_crd,
    dgd_crd,
    free_form_crd,
    mcs_crds,
)
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.leader import format_micro_time
from dynamo_pool_operator.runtime.objects.resources import LEASES, NAMESPACES
from tests.integration.support.export_fixtures import set_cluster_id
from tests.integration.support.planes import started
from tests.integration.support.race_fixtures import Grants
from tests.integration.support.relay_fixtures import DGDS, RELAYS, dgd_body, relay_body

pytestmark = pytest.mark.timeout(120)

SE = serviceexports("v1beta1")
POOL = "llama"
LEASE = "check-leader"
OPERATOR_SA = "operator"
CLUSTER = "east"


def config_file(tmp_path: Path, ns: str, implementation: str = "mcs", **more: Any) -> str:
    doc: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "multiCluster": {"mcsImplementation": implementation},
        "namespace": {"restricted": ns},
        "leaderElection": {"namespace": ns, "name": LEASE},
        **more,
    }
    path = tmp_path / f"config-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


async def run_check(
    kubeconfig: Path | str, config: str | None = None, **opts: Any
) -> tuple[int, dict[str, dict[str, Any]]]:
    """`check -o json`: the exit code and each check by name."""
    out, err = io.StringIO(), io.StringIO()
    options = check.Options(kubeconfig=str(kubeconfig), config_path=config, output="json", **opts)
    code = await check.run(options, out=out, err=err)
    doc = json.loads(out.getvalue())
    assert doc["ok"] == (code == 0), doc
    return code, {c["name"]: c for c in doc["checks"]}


def status(found: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {name: c["status"] for name, c in found.items()}


async def write_ready(client: Client, ns: str, name: str, ready: bool, reason: str) -> None:
    """What the operator writes on the relay (the check reads only this)."""
    relay = await client.get(RELAYS, name, ns)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cond = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": reason,
        "message": "" if ready else f"because {reason}",
        "lastTransitionTime": now,
    }
    body = {
        "apiVersion": RELAYS.api_version,
        "kind": RELAYS.kind,
        "metadata": {"name": name, "namespace": ns},
        "status": {"observedGeneration": relay["metadata"]["generation"], "conditions": [cond]},
    }
    await client.apply(RELAYS, body, field_manager="dpo-tests", force=True, subresource="status")


async def write_lease(client: Client, ns: str, renewed_ago: float, holder: str = "pod-a") -> None:
    now = datetime.now(UTC)
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": LEASE, "namespace": ns},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "acquireTime": format_micro_time(now - timedelta(minutes=3)),
            "renewTime": format_micro_time(now - timedelta(seconds=renewed_ago)),
        },
    }
    await client.apply(LEASES, body, field_manager="dpo-tests", force=True)


def renamed(docs: list[dict[str, Any]], suffix: str) -> list[dict[str, Any]]:
    """rbac.render's objects under names of this test (roles are cluster-scoped)."""
    out = []
    for d in copy.deepcopy(docs):
        d["metadata"]["name"] += suffix
        if "roleRef" in d:
            d["roleRef"]["name"] += suffix
        out.append(d)
    return out


class Scene:
    def __init__(self, cp: ControlPlane, client: Client, ns: str, tmp: Path) -> None:
        self.cp, self.client, self.ns, self.tmp = cp, client, ns, tmp
        self.sa_user = f"system:serviceaccount:{ns}:{OPERATOR_SA}"
        self.cluster_scoped: list[str] = []

    async def build(self) -> None:
        self.cp.request(
            "POST",
            f"/api/v1/namespaces/{self.ns}/serviceaccounts",
            {"metadata": {"name": OPERATOR_SA}},
        )
        docs = rbac.render(self.ns, OPERATOR_SA, self.ns, self.ns, lease_name=LEASE)
        for d in renamed(docs, f"-{self.ns}"):
            await asyncio.to_thread(self.cp.apply, d)
            if "namespace" not in d["metadata"]:
                self.cluster_scoped.append(f"{d['kind'].lower()}s/{d['metadata']['name']}")
        await set_cluster_id(self.client, CLUSTER)
        await self.client.create(DGDS, dgd_body(POOL, self.ns))
        await self.client.create(RELAYS, relay_body(POOL, self.ns, clusterId=CLUSTER))
        await write_ready(self.client, self.ns, POOL, True, "Published")
        await write_lease(self.client, self.ns, renewed_ago=1)

    async def teardown(self) -> None:
        for path in self.cluster_scoped:
            self.cp.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/{path}")
        await set_cluster_id(self.client, None)

    def config(self, implementation: str = "mcs", **more: Any) -> str:
        return config_file(self.tmp, self.ns, implementation, **more)

    async def check(self, **opts: Any) -> tuple[int, dict[str, dict[str, Any]]]:
        opts.setdefault("config", self.config())
        opts.setdefault("as_user", self.sa_user)
        return await run_check(self.cp.kubeconfig, **opts)


@pytest.fixture
async def scene(
    control_plane: ControlPlane, client: Client, namespace: str, tmp_path: Path
) -> AsyncIterator[Scene]:
    s = Scene(control_plane, client, namespace, tmp_path)
    await s.build()
    try:
        yield s
    finally:
        await s.teardown()


# ====================================================================== all well
async def test_a_working_installation_passes_every_check(scene: Scene) -> None:
    code, found = await scene.check()
    assert status(found) == {
        "api-server": "ok",
        "relay-crd": "ok",
        "dgd-crd": "ok",
        "serviceexport-api": "ok",
        "export-spec": "ok",
        "cluster-id": "ok",
        "karmada-names": "skip",  # mcs
        "karmada-collection": "skip",
        "rbac": "ok",
        "leader": "ok",
        "exports-terminating": "ok",
        "confirmation": "ok",
        "foreign-exports": "ok",
        "relays-ready": "ok",
        "relay-pod-fields": "ok",
    }, found
    assert code == 0
    assert "pod-a holds" in found["leader"]["message"]
    assert scene.sa_user in found["rbac"]["message"]


async def test_the_text_output_has_a_line_per_check_and_the_fix(scene: Scene) -> None:
    await write_ready(scene.client, scene.ns, POOL, False, "DGDNotFound")
    out = io.StringIO()
    opts = check.Options(
        kubeconfig=str(scene.cp.kubeconfig), config_path=scene.config(), as_user=scene.sa_user
    )
    assert await check.run(opts, out=out, err=io.StringIO()) == 1
    text = out.getvalue()
    assert "✔ api-server" in text
    assert "- karmada-names" in text
    assert "✘ relays-ready" in text
    assert f"{scene.ns}/{POOL}: DGDNotFound: because DGDNotFound" in text
    assert "→ the reason says why" in text
    assert text.rstrip().endswith("1 check failed, 0 warning(s)")


# ====================================================================== each check failing
async def test_api_server_unreachable_fails_and_skips_the_rest(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    cfg = yaml.safe_load(control_plane.kubeconfig.read_text())
    cfg["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    code, found = await run_check(path)
    assert code == 1
    assert found["api-server"]["status"] == "fail"
    assert "cannot be used" in found["api-server"]["message"]
    assert {c["status"] for n, c in found.items() if n != "api-server"} == {"skip"}


async def test_api_server_refusing_the_credentials_fails(
    control_plane: ControlPlane,
) -> None:
    code, found = await run_check(control_plane.token_kubeconfig("not-a-token", user="bad"))
    assert (code, found["api-server"]["status"]) == (1, "fail")
    assert "401" in found["api-server"]["message"]


async def test_cluster_id_names_the_relays_that_disagree(scene: Scene) -> None:
    other = "other"
    await scene.client.create(DGDS, dgd_body(other, scene.ns))
    await scene.client.create(RELAYS, relay_body(other, scene.ns, clusterId="west"))
    await write_ready(scene.client, scene.ns, other, True, "Published")
    code, found = await scene.check()
    c = found["cluster-id"]
    assert (code, c["status"]) == (1, "fail")
    assert c["details"] == [f"{scene.ns}/{other}: clusterId 'west'"]
    assert c["fix"] == f"set their spec.clusterId to {CLUSTER!r}"


async def test_cluster_id_without_the_property_warns(scene: Scene) -> None:
    await set_cluster_id(scene.client, None)
    code, found = await scene.check()
    assert found["cluster-id"]["status"] == "warn"
    assert "no ClusterProperty cluster.clusterset.k8s.io" in found["cluster-id"]["message"]
    assert code == 0  # a warning does not fail the run


async def test_rbac_lists_what_the_service_account_lacks(scene: Scene) -> None:
    # Another ServiceAccount with the leader-election Role only: manager rules missing.
    lone = "lonely"
    scene.cp.request(
        "POST", f"/api/v1/namespaces/{scene.ns}/serviceaccounts", {"metadata": {"name": lone}}
    )
    grants = Grants(scene.cp, f"system:serviceaccount:{scene.ns}:{lone}")
    await grants.grant("lease-only", rbac.leader_election_rules(LEASE), scene.ns)
    code, found = await scene.check(as_user=f"system:serviceaccount:{scene.ns}:{lone}")
    c = found["rbac"]
    assert (code, c["status"]) == (1, "fail")
    # One line per resource, its verbs together.
    ns = scene.ns
    assert f"dynamopoolrelays.nvidia.com in {ns}: get, list, watch (manager)" in c["details"]
    assert f"dynamopoolrelays.nvidia.com/status in {ns}: patch (manager)" in c["details"]
    assert (
        f"deployments.apps in {ns}: get, list, watch, create, patch, delete (manager)"
        in c["details"]
    )
    assert (
        "clusterproperties.about.k8s.io cluster-wide: get, list, watch (cluster ID)"
        in (c["details"])
    )
    assert len(c["details"]) == len(set(c["details"])) == 11, c["details"]
    assert not [d for d in c["details"] if "leases" in d], "the Lease Role is granted"
    # The fix names the subject it checked, and binds that very ServiceAccount.
    assert c["fix"] == (
        f"grant them to system:serviceaccount:{ns}:{lone}: install the chart's RBAC, or "
        f"`dynamo-pool-operator manifests rbac --namespace {ns} --service-account {lone} "
        f"--restricted {ns} | kubectl apply -f -`"
    )


async def test_rbac_needs_the_right_to_impersonate(scene: Scene) -> None:
    viewer = scene.cp.user_kubeconfig(f"viewer-{scene.ns}")
    code, found = await run_check(viewer, scene.config(), as_user=scene.sa_user)
    assert (code, found["rbac"]["status"]) == (1, "fail")
    assert "cannot ask as" in found["rbac"]["message"]
    assert "impersonate" in found["rbac"]["fix"]


async def test_rbac_without_as_outside_a_pod_warns(scene: Scene) -> None:
    _, found = await scene.check(as_user=None)
    assert found["rbac"]["status"] == "warn"
    assert "--as system:serviceaccount" in found["rbac"]["message"]


@pytest.mark.parametrize(("renewed_ago", "holder"), [(60, "pod-a"), (1, "")])
async def test_leader_fails_when_the_lease_is_expired_or_released(
    scene: Scene, renewed_ago: float, holder: str
) -> None:
    await write_lease(scene.client, scene.ns, renewed_ago=renewed_ago, holder=holder)
    code, found = await scene.check()
    assert (code, found["leader"]["status"]) == (1, "fail")
    assert "no leader" in found["leader"]["message"]


async def test_leader_fails_without_a_lease(scene: Scene) -> None:
    await scene.client.delete(LEASES, LEASE, scene.ns)
    _, found = await scene.check()
    assert found["leader"]["status"] == "fail"
    assert f"no Lease {scene.ns}/{LEASE}" in found["leader"]["message"]


async def test_an_export_stuck_deleting_fails(scene: Scene) -> None:
    export = {
        "apiVersion": SE.api_version,
        "kind": SE.kind,
        "metadata": {
            "name": f"{POOL}-pool-relay",
            "namespace": scene.ns,
            "labels": {"nvidia.com/dynamo-graph-deployment-name": POOL},
            "finalizers": ["mcs.example/held"],
        },
    }
    await scene.client.create(SE, export)
    await scene.client.delete(SE, export["metadata"]["name"], scene.ns)
    try:
        _, found = await scene.check(terminating_grace=0)
        c = found["exports-terminating"]
        assert c["status"] == "fail"
        assert "finalizers mcs.example/held" in c["details"][0]
        _, found = await scene.check()  # within the grace period: normal
        assert found["exports-terminating"]["status"] == "ok"
    finally:
        patch = {"metadata": {"finalizers": None}}
        await scene.client.merge_patch(SE, export["metadata"]["name"], patch, scene.ns)


async def test_exports_with_valid_only_cannot_meet_confirmation_ready(scene: Scene) -> None:
    """What Antrea writes (Valid=True, never Ready) fails `ready` once the export has
    waited `unconfirmedAfter`, and meets `valid`."""
    name = f"{POOL}-pool-relay"
    export = {
        "apiVersion": SE.api_version,
        "kind": SE.kind,
        "metadata": {
            "name": name,
            "namespace": scene.ns,
            "labels": {"nvidia.com/dynamo-graph-deployment-name": POOL},
        },
    }
    await scene.client.create(SE, export)
    valid = {
        "type": "Valid",
        "status": "True",
        "reason": "Succeed",
        "message": "",
        "lastTransitionTime": "2026-12-01T00:00:00Z",
    }
    await scene.client.merge_patch(
        SE, name, {"status": {"conditions": [valid]}}, scene.ns, subresource="status"
    )
    multi = {"mcsImplementation": "mcs", "unconfirmedAfter": "0s"}
    _, found = await scene.check(
        config=scene.config(multiCluster={**multi, "confirmation": "ready"})
    )
    c = found["confirmation"]
    assert c["status"] == "fail", c
    assert c["details"] == [f"{scene.ns}/{name}: Valid=True (Succeed), no Ready"]
    assert "multiCluster.confirmation: valid" in c["fix"]
    _, found = await scene.check(
        config=scene.config(multiCluster={**multi, "confirmation": "valid"})
    )
    assert found["confirmation"]["status"] == "ok", found["confirmation"]


async def test_an_export_of_a_pool_someone_else_controls_warns(scene: Scene) -> None:
    name = f"{POOL}-frontend"
    await scene.client.create(
        SE, {"apiVersion": SE.api_version, "kind": SE.kind, "metadata": {"name": name}}, scene.ns
    )
    _, found = await scene.check()
    c = found["foreign-exports"]
    assert c["status"] == "warn"
    assert c["details"] == [
        f"{scene.ns}/{name}: wanted by relay {POOL}, without a controller (a user's)"
    ]


async def test_relays_not_ready_fail_with_their_reason(scene: Scene) -> None:
    fresh = "fresh"
    await scene.client.create(RELAYS, relay_body(fresh, scene.ns, clusterId=CLUSTER))
    await write_ready(scene.client, scene.ns, POOL, False, "NoWorkers")
    _, found = await scene.check()
    c = found["relays-ready"]
    assert c["status"] == "fail"
    assert c["message"] == "2 of 2 relay(s) not Ready"
    assert f"{scene.ns}/{fresh}: NotReconciled: the operator has not reported yet" in c["details"]
    assert f"{scene.ns}/{POOL}: NoWorkers: because NoWorkers" in c["details"]


async def test_relays_that_set_guarded_pod_fields_are_listed_with_who_set_them(
    scene: Scene,
) -> None:
    """A relay written before the admission policy existed was never judged: `check`
    names each guarded field it sets and the field manager the API server recorded."""
    await scene.client.create(
        RELAYS,
        relay_body("imaged", scene.ns, clusterId=CLUSTER, image="registry.example/relay:1"),
    )
    _, found = await scene.check()
    c = found["relay-pod-fields"]
    assert c["status"] == "warn", c
    assert c["message"].startswith("1 relay(s) set pod fields the admission policy guards")
    (line,) = c["details"]
    assert line.startswith(f"{scene.ns}/imaged: spec.image by "), line
    assert "(Update " in line, line
    assert "kubectl patch dpr" in c["fix"]


async def test_karmada_names_over_55_characters_fail(scene: Scene) -> None:
    long = "d" * 45  # its relay Service: 45 + "-pool-relay" = 56 characters
    await scene.client.create(DGDS, dgd_body(long, scene.ns))
    await scene.client.create(RELAYS, relay_body(long, scene.ns))
    _, found = await scene.check(config=scene.config("karmada"))
    c = found["karmada-names"]
    assert c["status"] == "fail"
    assert f"{scene.ns}/{long}: {long}-pool-relay (56 characters)" in c["details"]
    assert found["cluster-id"]["status"] == "skip"  # mcs only


def propagated_export(name: str, ns: str, member: str) -> dict[str, Any]:
    """A ServiceExport as Karmada applies one from a Work of its control plane: its
    label and the Work's annotations (pkg/util/helper/work.go, `CreateOrUpdateWork`)."""
    return {
        "apiVersion": SE.api_version,
        "kind": SE.kind,
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"karmada.io/managed": "true"},
            "annotations": {
                "work.karmada.io/namespace": f"karmada-es-{member}",
                "work.karmada.io/name": f"{name}-work",
            },
        },
    }


async def test_karmada_collection_fails_until_karmada_propagated_an_export_here(
    scene: Scene, client: Client
) -> None:
    """Karmada collects a member's exports only while it propagated one there. The
    check (which reads with the caller's credentials) finds one in the operator's
    namespace, or in any other where it may list them; an export labelled alike
    without Karmada's Work is not one."""
    karmada = scene.config("karmada")
    _, found = await scene.check(config=karmada)
    c = found["karmada-collection"]
    assert c["status"] == "fail", c
    assert "no ServiceExport in any namespace was propagated" in c["message"], c
    assert "PropagationPolicy" in c["fix"], c

    fake = propagated_export("lookalike", scene.ns, "east")
    fake["metadata"]["annotations"] = {}
    await client.create(SE, fake)
    _, found = await scene.check(config=karmada)
    assert found["karmada-collection"]["status"] == "fail", "no Work: not Karmada's"

    # A user who may list exports in the operator's namespace only.
    reader = f"reader-{scene.ns}"
    grants = Grants(scene.cp, reader)
    rule = {"apiGroups": [SE.group], "resources": [SE.plural], "verbs": ["list"]}
    await grants.grant("se-reader", [rule], scene.ns)
    as_reader = scene.cp.user_kubeconfig(reader)
    other = f"{scene.ns}-other"
    await client.create(NAMESPACES, {"metadata": {"name": other}})
    try:
        await client.create(SE, propagated_export("sentinel", other, "east"))
        _, found = await scene.check(config=karmada)
        c = found["karmada-collection"]
        assert c["status"] == "ok", c
        assert f"{other}/sentinel here (member 'east')" in c["message"], c
        _, found = await run_check(as_reader, karmada)
        c = found["karmada-collection"]
        assert c["status"] == "fail", "the reader cannot see the other namespace"
        assert f"no ServiceExport in {scene.ns} was propagated" in c["message"], c

        await client.create(SE, propagated_export("sentinel", scene.ns, "east"))
        _, found = await run_check(as_reader, karmada)
        assert found["karmada-collection"]["status"] == "ok", found["karmada-collection"]
    finally:
        await grants.revoke_all()
        await client.delete(NAMESPACES, other)
    _, found = await scene.check()
    assert found["karmada-collection"]["status"] == "skip", "mcs: not Karmada's concern"


async def test_wait_runs_again_until_the_checks_pass(scene: Scene) -> None:
    await write_ready(scene.client, scene.ns, POOL, False, "DGDNotFound")
    err = io.StringIO()
    opts = check.Options(
        kubeconfig=str(scene.cp.kubeconfig),
        config_path=scene.config(),
        as_user=scene.sa_user,
        output="json",
        wait=60,
    )
    task = asyncio.create_task(check.run(opts, out=io.StringIO(), err=err))

    async def fix() -> None:
        # Fixed only once a round has failed: the pass must come from running again.
        while "relays-ready failing" not in err.getvalue():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        await write_ready(scene.client, scene.ns, POOL, True, "Published")

    await asyncio.wait_for(fix(), 30)
    assert await asyncio.wait_for(task, 60) == 0


async def test_wait_gives_up_with_exit_1(scene: Scene) -> None:
    await write_ready(scene.client, scene.ns, POOL, False, "DGDNotFound")
    code, found = await scene.check(wait=0.5)
    assert (code, found["relays-ready"]["status"]) == (1, "fail")


# ====================================================================== APIs missing
@pytest.fixture(scope="module")
def bare() -> Iterator[ControlPlane]:
    """No CRD at all: the tests install what they need, in order."""
    yield from started(ControlPlane(garbage_collector=False))


def gke_serviceexport_crd() -> dict[str, Any]:
    """A ServiceExport of another group, as GKE's multi-cluster Services serves it."""
    return free_form_crd("net.gke.io", "v1", "ServiceExport", "serviceexports")


def older_relay_crd() -> dict[str, Any]:
    old = copy.deepcopy(crd.crd())
    version = old["spec"]["versions"][0]
    version["additionalPrinterColumns"] = version["additionalPrinterColumns"][:2]
    return old


async def test_missing_apis_fail_and_say_what_to_install(
    bare: ControlPlane, tmp_path: Path
) -> None:
    mcs = config_file(tmp_path, "default")
    off = config_file(tmp_path, "default", implementation="")

    _, found = await run_check(bare.kubeconfig, mcs)
    assert found["relay-crd"]["status"] == "fail"
    assert "manifests crds --apply" in found["relay-crd"]["fix"]
    assert found["dgd-crd"]["status"] == "fail"
    assert "install NVIDIA Dynamo's operator" in found["dgd-crd"]["fix"]
    assert found["serviceexport-api"]["status"] == "fail"
    assert found["cluster-id"]["status"] == "warn"  # no About API: the check is off
    assert "not served" in found["cluster-id"]["message"]

    # GKE's own group is not ours: said so, and still failing with mcs.
    bare.install_crd(gke_serviceexport_crd())
    _, found = await run_check(bare.kubeconfig, mcs)
    c = found["serviceexport-api"]
    assert c["status"] == "fail"
    assert c["details"] == [
        "net.gke.io/v1 is served too: GKE's own multi-cluster Services API; "
        "this operator does not write it"
    ]
    _, found = await run_check(bare.kubeconfig, off)
    assert found["serviceexport-api"]["status"] == "warn"  # not needed, but worth saying

    # An older CRD of ours: installed, but not this binary's.
    bare.install_crd(older_relay_crd())
    bare.install_crd(dgd_crd("v1beta1"))
    for doc in mcs_crds(resolve().mcs_crd_dir):
        bare.install_crd(doc)
    bare.install_crd(cluster_property_crd())
    _, found = await run_check(bare.kubeconfig, mcs)
    assert found["relay-crd"]["status"] == "fail"
    assert "differs from the one this binary" in found["relay-crd"]["message"]
    assert "printer columns" in found["relay-crd"]["message"]
    assert found["dgd-crd"]["status"] == "ok"
    assert found["serviceexport-api"]["status"] == "ok"
    assert found["cluster-id"]["status"] == "warn"  # served now, but no property

    bare.install_crd(crd.crd())
    _, found = await run_check(bare.kubeconfig, mcs)
    assert found["relay-crd"]["status"] == "ok"
    assert found["export-spec"]["status"] == "ok"

    # Cilium serves its API here: its ClusterMesh gives a ClusterIP frontend's import
    # EndpointSlices only with its annotation, which the exports must carry.
    cilium = free_form_crd("cilium.io", "v2", "CiliumEndpoint", "ciliumendpoints")
    bare.install_crd(cilium)
    try:
        _, found = await run_check(bare.kubeconfig, mcs)
        c = found["export-spec"]
        assert c["status"] == "warn", c
        assert "Cilium runs here" in c["message"], c
        assert "service.cilium.io/global-sync-endpoint-slices" in c["fix"], c
        annotated = config_file(
            tmp_path,
            "default",
            multiCluster={
                "mcsImplementation": "mcs",
                "exportedAnnotations": {"service.cilium.io/global-sync-endpoint-slices": "true"},
            },
        )
        _, found = await run_check(bare.kubeconfig, annotated)
        assert found["export-spec"]["status"] == "ok", found["export-spec"]
    finally:
        bare.delete_crd("ciliumendpoints.cilium.io")


async def test_relay_crd_unreadable_warns(bare: ControlPlane, tmp_path: Path) -> None:
    """A caller who may not read CRDs still learns that the version is served."""
    bare.install_crd(crd.crd())
    viewer = bare.user_kubeconfig("crd-blind")
    _, found = await run_check(viewer, config_file(tmp_path, "default", implementation=""))
    assert found["relay-crd"]["status"] == "warn"
    assert "not allowed to read the CRD" in found["relay-crd"]["message"]
