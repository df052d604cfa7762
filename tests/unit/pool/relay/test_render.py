"""The relay Deployment and Service as rendered (pool/relay/render.py). Pure, deterministic.

Both are named `<D>-pool-relay`, controlled by the relay, labelled with the DGD name;
the pods get the DGD's Dynamo namespace, the Kubernetes discovery backend and the cluster
ID, the DGD name/namespace and their downward-API identity in env, the DGD's discovery
ServiceAccount unless the relay names another (docs/crd.md, 'spec'), non-root /
read-only root / no privilege escalation, probes on the relay port. The render hash
changes with every input and only with inputs, so a second reconcile writes nothing.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.dgd import Pool, pool_from_object
from dynamo_pool_operator.api.relay import Relay, RelayDefaults, relay_from_object
from dynamo_pool_operator.pool import controller
from dynamo_pool_operator.pool.ladder import drift
from dynamo_pool_operator.pool.relay import kinds, render
from dynamo_pool_operator.runtime.objects.diff import needs_apply
from tests.shapes import uncovered


@pytest.fixture(autouse=True)
def _fresh_shapes() -> None:
    """`kinds.shape` is cached for the process: built afresh for each test, so a
    mutation run (which forks its mutants from a process that built it) tests it."""
    kinds.shape.cache_clear()


DEFAULTS = RelayDefaults(image="registry.example/relay:1.0", port=7000)
NS = "team"
NAME = "pool"
DGD_LABEL = "nvidia.com/dynamo-graph-deployment-name"


def make_relay(name: str = NAME, uid: str = "relay-uid", **spec: Any) -> Relay:
    return relay_from_object(
        {
            "metadata": {
                "name": name,
                "namespace": NS,
                "uid": uid,
                "generation": 2,
                "resourceVersion": "10",
            },
            "spec": spec,
        },
        DEFAULTS,
    )


def make_pool(name: str = NAME, namespace: str = NS, **meta: Any) -> Pool:
    return pool_from_object(
        {
            "apiVersion": "nvidia.com/v1beta1",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": "dgd-uid",
                "resourceVersion": "5",
                **meta,
            },
            "spec": {"components": [{"name": "w", "type": "worker"}]},
        }
    )


def container(dep: dict[str, Any]) -> dict[str, Any]:
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return c


def env(dep: dict[str, Any]) -> dict[str, dict[str, Any]]:
    entries = container(dep)["env"]
    by_name = {e["name"]: e for e in entries}
    assert len(by_name) == len(entries), "env names must be unique"
    return by_name


def render_hash(obj: dict[str, Any]) -> str:
    return obj["metadata"]["annotations"][names.RENDER_HASH]


# --------------------------------------------------------------------------- metadata


@pytest.mark.parametrize("kind", ["Deployment", "Service"])
def test_relay_objects_are_named_pool_relay_in_the_relay_namespace(kind: str) -> None:
    obj = both(make_relay(), make_pool())[kind]
    assert obj["metadata"]["name"] == "pool-pool-relay"
    assert obj["metadata"]["namespace"] == NS


def both(relay: Relay, pool: Pool) -> dict[str, dict[str, Any]]:
    return {
        "Deployment": render.deployment(relay, pool),
        "Service": render.service(relay),
    }


def test_api_versions_and_kinds() -> None:
    objs = both(make_relay(), make_pool())
    assert (objs["Deployment"]["apiVersion"], objs["Deployment"]["kind"]) == (
        "apps/v1",
        "Deployment",
    )
    assert (objs["Service"]["apiVersion"], objs["Service"]["kind"]) == ("v1", "Service")


@pytest.mark.parametrize("kind", ["Deployment", "Service"])
def test_relay_objects_carry_the_dgd_name_label(kind: str) -> None:
    obj = both(make_relay(), make_pool())[kind]
    obj_labels = obj["metadata"]["labels"]
    assert obj_labels[DGD_LABEL] == NAME
    assert obj_labels["app.kubernetes.io/managed-by"] == "dynamo-pool-operator"
    assert obj_labels["app.kubernetes.io/name"] == "dynamo-pool-relay"
    assert obj_labels["app.kubernetes.io/instance"] == NAME


@pytest.mark.parametrize("kind", ["Deployment", "Service"])
def test_relay_objects_are_controlled_by_the_relay(kind: str) -> None:
    relay = make_relay()
    obj = both(relay, make_pool())[kind]
    assert obj["metadata"]["ownerReferences"] == [relay.owner_reference()]
    (ref,) = obj["metadata"]["ownerReferences"]
    assert ref["controller"] is True
    assert ref["blockOwnerDeletion"] is True
    assert ref["uid"] == "relay-uid"
    assert ref["kind"] == "DynamoPoolRelay"


# --------------------------------------------------------------------------- pod contract


def test_env_carries_the_pool_contract() -> None:
    relay = make_relay(clusterId="east-1", port=7443)
    e = env(render.deployment(relay, make_pool()))
    assert e["DYN_NAMESPACE"] == {"name": "DYN_NAMESPACE", "value": "team-pool"}
    assert e["DYN_DISCOVERY_BACKEND"]["value"] == "kubernetes"
    assert e["DYN_CLUSTER_ID"]["value"] == "east-1"
    assert e["DYN_PARENT_DGD_K8S_NAME"]["value"] == NAME
    assert e["DYN_PARENT_DGD_K8S_NAMESPACE"]["value"] == NS
    assert e["DYN_POOL_RELAY_PORT"]["value"] == "7443"


@pytest.mark.parametrize(
    ("namespace", "dgd", "expected"),
    [
        ("team", "pool", "team-pool"),
        ("team", "qwen3-0.6b", "team-qwen3-0-6b"),
        ("a", "b.c.d", "a-b-c-d"),
    ],
)
def test_dyn_namespace_is_the_dgds_dynamo_namespace(
    namespace: str, dgd: str, expected: str
) -> None:
    dep = render.deployment(make_relay(dgd), make_pool(dgd, namespace))
    assert env(dep)["DYN_NAMESPACE"]["value"] == expected


@pytest.mark.parametrize("annotation", ["etcd", "kubernetes", None])
def test_discovery_backend_env_is_always_kubernetes(annotation: str | None) -> None:
    meta = (
        {}
        if annotation is None
        else {"annotations": {"nvidia.com/dynamo-discovery-backend": annotation}}
    )
    dep = render.deployment(make_relay(), make_pool(**meta))
    assert env(dep)["DYN_DISCOVERY_BACKEND"]["value"] == "kubernetes"


@pytest.mark.parametrize(
    ("var", "path"),
    [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
        ("POD_UID", "metadata.uid"),
    ],
)
def test_pod_identity_comes_from_the_downward_api(var: str, path: str) -> None:
    entry = env(render.deployment(make_relay(), make_pool()))[var]
    assert "value" not in entry
    assert entry["valueFrom"] == {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}


def test_a_relay_without_cluster_id_is_a_fixed_point_after_the_server_round_trip() -> None:
    desired = render.deployment(make_relay(), make_pool())
    live = copy.deepcopy(desired)
    for e in container(live)["env"]:
        if e.get("value") == "":
            del e["value"]  # what the API server returns for an empty string (omitempty)
    assert not needs_apply(live, desired)


def test_pod_template_carries_the_selector_and_dgd_labels() -> None:
    dep = render.deployment(make_relay(podLabels={"team": "ml"}), make_pool())
    tpl_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert tpl_labels[DGD_LABEL] == NAME
    assert tpl_labels["team"] == "ml"
    assert names.selector(NAME).items() <= tpl_labels.items()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, "pool-k8s-service-discovery"),
        ({"serviceAccountName": ""}, "pool-k8s-service-discovery"),
        ({"serviceAccountName": "my-relay-sa"}, "my-relay-sa"),
    ],
)
def test_service_account_defaults_to_the_dgds_discovery_account(
    spec: dict[str, Any], expected: str
) -> None:
    dep = render.deployment(make_relay(**spec), make_pool())
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == expected


def test_container_security_context_is_locked_down() -> None:
    sc = container(render.deployment(make_relay(), make_pool()))["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert "add" not in sc["capabilities"]
    assert not sc.get("privileged", False)


def test_pod_security_context_is_non_root_with_default_seccomp() -> None:
    pod = render.deployment(make_relay(), make_pool())["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not pod.get("hostNetwork", False)


@pytest.mark.parametrize(("probe", "period"), [("readinessProbe", 5), ("livenessProbe", 10)])
def test_probes_are_tcp_checks_of_the_relay_port_every_few_seconds(probe: str, period: int) -> None:
    c = container(render.deployment(make_relay(), make_pool()))
    assert c[probe] == {"tcpSocket": {"port": "relay"}, "periodSeconds": period}


@pytest.mark.parametrize("probe", ["readinessProbe", "livenessProbe"])
def test_probes_target_the_named_relay_port(probe: str) -> None:
    c = container(render.deployment(make_relay(port=8123), make_pool()))
    (port,) = c["ports"]
    assert port == {"name": "relay", "containerPort": 8123, "protocol": "TCP"}
    assert c[probe]["tcpSocket"]["port"] == port["name"]


def test_container_runs_the_relay_image_with_the_pull_policy() -> None:
    c = container(render.deployment(make_relay(image="mine/relay:2"), make_pool()))
    assert c["name"] == "relay"
    assert c["image"] == "mine/relay:2"
    assert c["imagePullPolicy"] == "IfNotPresent"


@pytest.mark.parametrize("replicas", [0, 1, 2, 7])
def test_replicas_come_from_the_relay(replicas: int) -> None:
    dep = render.deployment(make_relay(replicas=replicas), make_pool())
    assert dep["spec"]["replicas"] == replicas


def test_optional_pod_fields_are_rendered_when_set() -> None:
    relay = make_relay(
        resources={"limits": {"cpu": "500m"}},
        podAnnotations={"x/y": "z"},
        nodeSelector={"pool": "cpu"},
        tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
    )
    dep = render.deployment(relay, make_pool())
    pod = dep["spec"]["template"]["spec"]
    assert container(dep)["resources"] == {"limits": {"cpu": "500m"}}
    assert dep["spec"]["template"]["metadata"]["annotations"] == {"x/y": "z"}
    assert pod["nodeSelector"] == {"pool": "cpu"}
    assert pod["tolerations"] == [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]


def test_optional_pod_fields_are_absent_when_unset() -> None:
    # An empty value would be a field we own and fight over; absent leaves it to others.
    dep = render.deployment(make_relay(), make_pool())
    pod = dep["spec"]["template"]["spec"]
    assert "resources" not in container(dep)
    assert "annotations" not in dep["spec"]["template"]["metadata"]
    assert "nodeSelector" not in pod
    assert "tolerations" not in pod


# --------------------------------------------------------------------------- Service


def test_service_selects_exactly_the_deployments_pods() -> None:
    relay = make_relay(podLabels={"team": "ml"})
    dep = render.deployment(relay, make_pool())
    svc = render.service(relay)
    match = dep["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["selector"] == match
    assert match.items() <= dep["spec"]["template"]["metadata"]["labels"].items()


def test_service_port_targets_the_named_container_port() -> None:
    relay = make_relay(port=9100)
    svc = render.service(relay)
    assert svc["spec"]["ports"] == [
        {"name": "relay", "port": 9100, "targetPort": "relay", "protocol": "TCP"}
    ]
    (cport,) = container(render.deployment(relay, make_pool()))["ports"]
    assert svc["spec"]["ports"][0]["targetPort"] == cport["name"]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"podLabels": {"team": "ml"}}, id="pod-labels"),
        pytest.param({"image": "other:2"}, id="image"),
        pytest.param({"clusterId": "west"}, id="cluster-id"),
        pytest.param({"port": 1234}, id="port"),
        pytest.param({"replicas": 9}, id="replicas"),
    ],
)
def test_selector_does_not_depend_on_mutable_inputs(change: dict[str, Any]) -> None:
    # Deployment selectors are immutable: a spec edit must never change them.
    before = render.deployment(make_relay(), make_pool())["spec"]["selector"]
    after_dep = render.deployment(make_relay(**change), make_pool(namespace="elsewhere"))
    assert after_dep["spec"]["selector"] == before
    assert render.service(make_relay(**change))["spec"]["selector"] == before["matchLabels"]


# --------------------------------------------------------------------------- render hash


@pytest.mark.parametrize("kind", ["Deployment", "Service"])
def test_render_hash_annotation_is_present(kind: str) -> None:
    h = render_hash(both(make_relay(), make_pool())[kind])
    assert isinstance(h, str)
    assert len(h) == 16


@pytest.mark.parametrize("kind", ["Deployment", "Service"])
def test_rendering_is_deterministic(kind: str) -> None:
    a = both(make_relay(podLabels={"b": "1", "a": "2"}), make_pool())[kind]
    b = both(make_relay(podLabels={"a": "2", "b": "1"}), make_pool())[kind]
    assert a == b
    assert render_hash(a) == render_hash(b)


def test_rendering_does_not_mutate_its_inputs() -> None:
    relay = make_relay(resources={"limits": {"cpu": "1"}}, tolerations=[{"key": "k"}])
    pool = make_pool()
    snapshot = (copy.deepcopy(dataclasses.asdict(relay)), copy.deepcopy(dataclasses.asdict(pool)))
    render.deployment(relay, pool)
    render.service(relay)
    assert (dataclasses.asdict(relay), dataclasses.asdict(pool)) == snapshot


def test_rendered_objects_share_no_mutable_state_with_the_relay() -> None:
    relay = make_relay(resources={"limits": {"cpu": "1"}})
    snapshot = copy.deepcopy(dataclasses.asdict(relay))
    dep = render.deployment(relay, make_pool())
    container(dep)["resources"]["limits"]["cpu"] = "99"
    assert dataclasses.asdict(relay) == snapshot


def test_rendered_tolerations_share_no_nested_state_with_the_relay() -> None:
    relay = make_relay(tolerations=[{"key": "k", "extra": {"nested": "a"}}])
    snapshot = copy.deepcopy(dataclasses.asdict(relay))
    dep = render.deployment(relay, make_pool())
    dep["spec"]["template"]["spec"]["tolerations"][0]["extra"]["nested"] = "changed"
    assert dataclasses.asdict(relay) == snapshot


RELAY_CHANGES: list[tuple[str, Callable[[Relay], Relay], set[str]]] = [
    ("image", lambda r: dataclasses.replace(r, image="x:9"), {"Deployment"}),
    ("pull-policy", lambda r: dataclasses.replace(r, image_pull_policy="Always"), {"Deployment"}),
    ("port", lambda r: dataclasses.replace(r, port=7001), {"Deployment", "Service"}),
    ("replicas", lambda r: dataclasses.replace(r, replicas=3), {"Deployment"}),
    ("cluster-id", lambda r: dataclasses.replace(r, cluster_id="east"), {"Deployment"}),
    ("sa", lambda r: dataclasses.replace(r, service_account_name="sa2"), {"Deployment"}),
    (
        "resources",
        lambda r: dataclasses.replace(r, resources={"requests": {"cpu": "1"}}),
        {"Deployment"},
    ),
    ("pod-labels", lambda r: dataclasses.replace(r, pod_labels={"a": "b"}), {"Deployment"}),
    (
        "pod-annotations",
        lambda r: dataclasses.replace(r, pod_annotations={"a": "b"}),
        {"Deployment"},
    ),
    ("node-selector", lambda r: dataclasses.replace(r, node_selector={"a": "b"}), {"Deployment"}),
    ("tolerations", lambda r: dataclasses.replace(r, tolerations=({"key": "k"},)), {"Deployment"}),
    ("uid", lambda r: dataclasses.replace(r, uid="other-uid"), {"Deployment", "Service"}),
]


@pytest.mark.parametrize(
    ("change", "affected"),
    [(c, a) for _, c, a in RELAY_CHANGES],
    ids=[n for n, _, _ in RELAY_CHANGES],
)
def test_render_hash_changes_when_a_relay_input_changes(
    change: Callable[[Relay], Relay], affected: set[str]
) -> None:
    relay = make_relay()
    pool = make_pool()
    before = both(relay, pool)
    after = both(change(relay), pool)
    for kind in ("Deployment", "Service"):
        changed = render_hash(before[kind]) != render_hash(after[kind])
        assert changed is (kind in affected), kind
        # A changed hash is always a changed object, so needs_apply sees it.
        assert needs_apply(before[kind], after[kind]) is changed


@pytest.mark.parametrize(
    "pool",
    [
        pytest.param(make_pool(name="other"), id="dgd-name"),
        pytest.param(make_pool(namespace="elsewhere"), id="dgd-namespace"),
    ],
)
def test_render_hash_changes_when_a_pool_input_changes(pool: Pool) -> None:
    relay = make_relay()
    assert render_hash(render.deployment(relay, make_pool())) != render_hash(
        render.deployment(relay, pool)
    )


STATUS_ONLY_CHANGES: list[tuple[str, Callable[[Relay, Pool], tuple[Relay, Pool]]]] = [
    ("relay-resource-version", lambda r, p: (dataclasses.replace(r, resource_version="99"), p)),
    ("relay-generation", lambda r, p: (dataclasses.replace(r, generation=9), p)),
    ("dgd-resource-version", lambda r, p: (r, dataclasses.replace(p, resource_version="99"))),
    ("dgd-uid", lambda r, p: (r, dataclasses.replace(p, uid="recreated"))),
    ("dgd-components", lambda r, p: (r, dataclasses.replace(p, components=()))),
    ("dgd-annotations", lambda r, p: (r, dataclasses.replace(p, annotations={"a": "b"}))),
    (
        "dgd-api-version",
        lambda r, p: (r, dataclasses.replace(p, api_version="nvidia.com/v1alpha1")),
    ),
]


@pytest.mark.parametrize(
    "change", [c for _, c in STATUS_ONLY_CHANGES], ids=[n for n, _ in STATUS_ONLY_CHANGES]
)
def test_render_does_not_depend_on_fields_it_does_not_render(
    change: Callable[[Relay, Pool], tuple[Relay, Pool]],
) -> None:
    # Otherwise every status update or DGD edit would rewrite the relay objects.
    relay, pool = make_relay(), make_pool()
    assert both(*change(relay, pool)) == both(relay, pool)


def test_hash_annotation_is_the_only_annotation_on_the_objects() -> None:
    for obj in both(make_relay(), make_pool()).values():
        assert set(obj["metadata"]["annotations"]) == {names.RENDER_HASH}


@pytest.mark.parametrize("kind", ["Deployment", "Service"])
def test_a_live_object_with_server_fields_added_needs_no_apply(kind: str) -> None:
    relay = dataclasses.replace(
        make_relay(clusterId="east", resources={"limits": {"cpu": "1"}}), headless=False
    )
    desired = both(relay, make_pool())[kind]
    live = copy.deepcopy(desired)
    live["metadata"].update({"uid": "x", "resourceVersion": "3", "managedFields": []})
    live["metadata"]["labels"]["extra"] = "by-user"
    live["status"] = {"observedGeneration": 1}
    if kind == "Deployment":
        live["spec"]["strategy"] = {"type": "RollingUpdate"}
        live["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] = "/dev/x"
        live["spec"]["template"]["spec"]["containers"][0]["resources"] = {
            "limits": {"cpu": "1000m"}
        }
    else:
        live["spec"]["clusterIP"] = "10.0.0.1"
    assert not needs_apply(live, desired, quantities=render.QUANTITY_PATHS)


# --------------------------------------------------------------------------- creation body


# --------------------------------------------------------------------------- cached views
#: Relays that set every optional field, none, and each shape of Service.
VARIANTS: list[dict[str, Any]] = [
    {},
    {"clusterId": "east", "replicas": 0, "port": 9000, "image": "other:2"},
    {
        "resources": {"limits": {"cpu": "500m"}, "requests": {"memory": "1Gi"}},
        "podLabels": {"tier": "a"},
        "podAnnotations": {"x/y": "z"},
        "nodeSelector": {"pool": "cpu"},
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        "serviceAccountName": "relay-sa",
    },
    {"service": {"headless": False}},
]


@pytest.mark.parametrize("spec", VARIANTS)
@pytest.mark.parametrize("kind", ["Deployment", "Service"])
def test_every_render_is_covered_by_the_shape_the_caches_keep(
    kind: str, spec: dict[str, Any]
) -> None:
    """A render with a field that is neither in the digest nor kept verbatim would have
    its drift missed: every kind of relay renders inside the shape."""
    body = both(make_relay(**spec), make_pool())[kind]
    assert uncovered(kinds.shape(kind), body) == []


@pytest.mark.parametrize("spec", VARIANTS)
@pytest.mark.parametrize("kind", ["Deployment", "Service"])
def test_a_cached_view_decides_drift_as_the_whole_object_does(
    kind: str, spec: dict[str, Any]
) -> None:
    """The informer keeps a trimmed object (`pool.controller.trim_*`); `drift` on
    it says what `needs_apply` says on the whole object, as served and after a user's
    edit of a field we own, or of one we do not."""
    body = both(make_relay(**spec), make_pool())[kind]
    trim = controller.Trim("Deployment") if kind == "Deployment" else controller.Trim("Service")
    served = copy.deepcopy(body)
    served["metadata"] |= {"uid": "x", "resourceVersion": "3"}
    served["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = "1"
    if kind == "Deployment":
        pod = served["spec"]["template"]
        pod["metadata"].setdefault("annotations", {})["kubectl.kubernetes.io/restartedAt"] = "now"
        pod["spec"]["containers"][0] |= {"terminationMessagePath": "/dev/x"}
        pod["spec"]["containers"][0]["readinessProbe"]["timeoutSeconds"] = 1
        served["spec"]["strategy"] = {"type": "RollingUpdate"}
        limits = pod["spec"]["containers"][0].get("resources", {}).get("limits", {})
        if limits.get("cpu") == "500m":
            limits["cpu"] = "0.5"  # as the server normalizes a quantity: no drift
        owned_edit: tuple[str, ...] = ("spec", "template", "spec", "containers", 0, "image")
    else:
        served["spec"] |= {"clusterIPs": ["None"], "type": "ClusterIP"}
        owned_edit = ("spec", "ports", 0, "targetPort")
    edited = copy.deepcopy(served)
    cur: Any = edited
    for p in owned_edit[:-1]:
        cur = cur[p]
    cur[owned_edit[-1]] = "edited-by-a-user"
    for live, drifted in ((served, False), (edited, True)):
        assert needs_apply(live, body, quantities=render.QUANTITY_PATHS) is drifted
        assert drift(kinds.rule(kind), trim(copy.deepcopy(live)), body).drifted is drifted
        # uncached: whole
        assert drift(kinds.rule(kind), copy.deepcopy(live), body).drifted is drifted


RESOURCES = {
    "limits": {"cpu": "500m", "memory": "128Mi"},
    "requests": {"cpu": "100m", "memory": "64Mi"},
}


def _edited_resources(spec_resources: Any, edit: Callable[[dict[str, Any]], None]) -> bool:
    """Render a relay with `spec_resources`, serve its Deployment, let a user `edit` the
    container (`kubectl edit`): has it drifted? Asked of the cached view and of the whole
    object, which must agree."""
    body = both(make_relay(resources=spec_resources), make_pool())["Deployment"]
    live = copy.deepcopy(body)
    live["metadata"] |= {"uid": "x", "resourceVersion": "3"}
    container = live["spec"]["template"]["spec"]["containers"][0]
    container["terminationMessagePath"] = "/dev/termination-log"
    edit(container)
    rule = kinds.rule("Deployment")
    cached = drift(rule, controller.Trim("Deployment")(copy.deepcopy(live)), body).drifted
    whole = drift(rule, copy.deepcopy(live), body).drifted
    assert cached == whole, f"the cached view says {cached}, the whole object {whole}"
    return whole


def _set(section: str, name: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda c: c["resources"][section].__setitem__(name, value)


def _drop(*path: str) -> Callable[[dict[str, Any]], None]:
    def edit(c: dict[str, Any]) -> None:
        cur = c
        for p in path[:-1]:
            cur = cur[p]
        del cur[path[-1]]

    return edit


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(_set("limits", "cpu", "64"), id="limits.cpu-to-64"),
        pytest.param(_set("limits", "memory", "128M"), id="limits.memory-Mi-to-M"),
        pytest.param(_set("requests", "cpu", "101m"), id="requests.cpu-changed"),
        pytest.param(_drop("resources", "limits"), id="limits-removed"),
        pytest.param(_drop("resources", "limits", "cpu"), id="limits.cpu-removed"),
        pytest.param(_drop("resources", "requests"), id="requests-removed"),
        pytest.param(_drop("resources"), id="resources-removed"),
    ],
)
def test_a_users_edit_of_the_relay_resources_is_drift(
    edit: Callable[[dict[str, Any]], None],
) -> None:
    """`resources` is a field we apply and own: a changed or removed quantity comes back."""
    assert _edited_resources(RESOURCES, edit)


@pytest.mark.parametrize(
    ("spec_resources", "edit"),
    [
        pytest.param(RESOURCES, lambda c: None, id="as-rendered"),
        pytest.param(RESOURCES, _set("limits", "cpu", "0.5"), id="0.5-for-500m"),
        pytest.param(RESOURCES, _set("limits", "memory", "134217728"), id="bytes-for-128Mi"),
        pytest.param(RESOURCES, _set("requests", "cpu", "1e-1"), id="exponent-for-100m"),
        pytest.param(
            RESOURCES, _set("limits", "ephemeral-storage", "1Gi"), id="another-resource-added"
        ),
        pytest.param(
            {"limits": {"cpu": "1000m", "memory": "1024Mi"}},
            lambda c: c.__setitem__("resources", {"limits": {"cpu": "1", "memory": "1Gi"}}),
            id="the-servers-canonical-form",
        ),
        pytest.param(
            {"limits": {"cpu": 2}, "requests": {"cpu": "0.5"}},
            lambda c: c.__setitem__(
                "resources", {"limits": {"cpu": "2"}, "requests": {"cpu": "500m"}}
            ),
            id="an-integer-kept-as-a-string",
        ),
    ],
)
def test_an_equal_quantity_in_another_form_is_no_drift(
    spec_resources: dict[str, Any], edit: Callable[[dict[str, Any]], None]
) -> None:
    assert not _edited_resources(spec_resources, edit)


def test_the_relay_service_is_headless_unless_asked_otherwise() -> None:
    """Headless (`clusterIP: None`): an MCS implementation imports the relay pods' IPs."""
    assert render.service(make_relay())["spec"]["clusterIP"] == "None"
    clusterip = render.service(make_relay(service={"headless": False}))["spec"]
    assert "clusterIP" not in clusterip


def test_the_disruption_budget_keeps_one_relay_pod_and_selects_exactly_them() -> None:
    relay = make_relay()
    budget = render.pod_disruption_budget(relay)
    assert (budget["apiVersion"], budget["kind"]) == ("policy/v1", "PodDisruptionBudget")
    assert budget["metadata"]["name"] == f"{NAME}-pool-relay"
    assert budget["metadata"]["ownerReferences"] == [relay.owner_reference()]
    assert budget["spec"]["minAvailable"] == 1
    pods = render.deployment(relay, make_pool())["spec"]["selector"]
    assert budget["spec"]["selector"] == pods
