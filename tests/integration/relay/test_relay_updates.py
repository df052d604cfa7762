"""Changing a published relay converges: every field of its spec, added, changed or
removed, reaches the Deployment and Service, and no write is refused on the way.

A create is a POST (exclusive: it never adopts a same-named object), and a POST's
fields belong to an "Update" field manager that a later server-side apply cannot
take over. A list field set by the POST (the Service's and the container's ports)
then keeps its old entry beside the applied one: a port change became two `relay`
ports and every apply was refused with 422. These cases check the Deployment and
Service hold exactly the rendered values after each change, that the operator got
no 4xx answer meanwhile (audit log), and that a second reconcile writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.relay_fixtures import DGDS, RELAYS, decision_of, dgd_body, relay_body

POOL = "llama"
OBJ = f"{POOL}-pool-relay"

TOLERATION = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
RESOURCES = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}

Check = Callable[[dict[str, Any], dict[str, Any]], bool]


def _pod(dep: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = dep["spec"]["template"]["spec"]
    return spec


def _container(dep: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = _pod(dep)["containers"][0]
    return container


def _port_is(port: int) -> Check:
    def check(dep: dict[str, Any], svc: dict[str, Any]) -> bool:
        return bool(
            [p["containerPort"] for p in _container(dep)["ports"]] == [port]
            and [(p["name"], p["port"]) for p in svc["spec"]["ports"]] == [("relay", port)]
            and {e["name"]: e.get("value") for e in _container(dep)["env"]}["DYN_POOL_RELAY_PORT"]
            == str(port)
        )

    return check


def _replicas_are(n: int) -> Check:
    return lambda dep, _: bool(dep["spec"]["replicas"] == n)


def _tolerations_are(expected: list[dict[str, Any]]) -> Check:
    return lambda dep, _: bool(_pod(dep).get("tolerations", []) == expected)


def _node_selector_is(expected: dict[str, str]) -> Check:
    return lambda dep, _: bool(_pod(dep).get("nodeSelector", {}) == expected)


def _resources_are(expected: dict[str, Any]) -> Check:
    return lambda dep, _: bool(_container(dep).get("resources", {}) == expected)


TOLERATION_2 = {"key": "spot", "operator": "Equal", "value": "yes", "effect": "NoExecute"}
AT_A, AT_B = {"pool": "a"}, {"zone": "b"}
T, NS, R = "tolerations", "nodeSelector", "resources"

# (case, spec at creation, merge patch of the spec, check after the patch)
CASES: list[tuple[str, dict[str, Any], dict[str, Any], Check]] = [
    ("port changed", {"port": 9000}, {"port": 9100}, _port_is(9100)),
    ("port from default", {}, {"port": 9200}, _port_is(9200)),
    ("replicas changed", {"replicas": 2}, {"replicas": 5}, _replicas_are(5)),
    ("tolerations added", {}, {T: [TOLERATION]}, _tolerations_are([TOLERATION])),
    ("tolerations removed", {T: [TOLERATION]}, {T: None}, _tolerations_are([])),
    ("tolerations replaced", {T: [TOLERATION]}, {T: [TOLERATION_2]},
     _tolerations_are([TOLERATION_2])),
    ("nodeSelector added", {}, {NS: AT_A}, _node_selector_is(AT_A)),
    ("nodeSelector removed", {NS: AT_A}, {NS: None}, _node_selector_is({})),
    ("nodeSelector changed", {NS: AT_A}, {NS: {"pool": None, **AT_B}}, _node_selector_is(AT_B)),
    ("resources added", {}, {R: RESOURCES}, _resources_are(RESOURCES)),
    ("resources removed", {R: RESOURCES}, {R: None}, _resources_are({})),
    ("resources changed", {R: RESOURCES},
     {R: {"limits": None, "requests": {"cpu": "200m", "memory": None}}},
     _resources_are({"requests": {"cpu": "200m"}})),
]  # fmt: skip


async def _objects(client: Client, ns: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return await client.get(DEPLOYMENTS, OBJ, ns), await client.get(SERVICES, OBJ, ns)


@pytest.mark.parametrize(("case", "initial", "patch", "check"), CASES, ids=[c[0] for c in CASES])
async def test_a_spec_change_reaches_the_relay_objects_with_no_refused_write(
    client: Client,
    control_plane: ControlPlane,
    namespace: str,
    operator: OperatorUnderTest,
    case: str,
    initial: dict[str, Any],
    patch: dict[str, Any],
    check: Check,
) -> None:
    await client.create(DGDS, dgd_body(POOL, namespace))
    await client.create(RELAYS, relay_body(POOL, namespace, **initial))

    async def published() -> bool:
        cond = await decision_of(client, namespace, POOL)
        return bool(cond and cond["status"] == "True")

    await eventually(published)
    await operator.settle()
    since = control_plane.audit.offset()
    await client.merge_patch(RELAYS, POOL, {"spec": patch}, namespace)

    async def converged() -> bool:
        return check(*await _objects(client, namespace))

    await eventually(converged)
    await operator.settle()
    refused = [
        (w.verb, w.resource, w.name, w.code)
        for w in await operator.writes_since(since)
        if w.namespace == namespace and w.code >= 400
    ]
    assert refused == [], f"{case}: the operator's writes were refused: {refused}"
    writes = await operator.reconcile_again((namespace, POOL))
    assert writes == [], f"{case}: second pass wrote {[(w.verb, w.resource) for w in writes]}"


async def test_a_create_is_one_write_and_the_handover_waits_for_the_first_change(
    client: Client, namespace: str, operator: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    """Publishing writes each relay object once, its POST: the create's fields stay with
    the create's "Update" entry until a change needs them (decision 0003). The first
    change hands them over to the apply (a guarded merge patch of managedFields) and
    then applies, with no refused write: the port moves on a freshly created relay."""
    since = control_plane.audit.offset()
    await client.create(DGDS, dgd_body(POOL, namespace))
    await client.create(RELAYS, relay_body(POOL, namespace, port=9000))

    async def published() -> bool:
        cond = await decision_of(client, namespace, POOL)
        return bool(cond and cond["status"] == "True")

    await eventually(published)
    await operator.settle()
    written = [
        (w.verb, w.resource)
        for w in await operator.writes_since(since)
        if w.namespace == namespace and w.resource in ("deployments", "services")
    ]
    assert sorted(written) == [("create", "deployments"), ("create", "services")], written
    for obj in await _objects(client, namespace):
        assert _our_operations(obj) == ["Update"], obj["metadata"].get("managedFields")
    since = control_plane.audit.offset()
    await client.merge_patch(RELAYS, POOL, {"spec": {"port": 9100}}, namespace)
    await eventually(lambda: _converged(client, namespace, _port_is(9100)))
    await operator.settle()
    writes = [
        (w.verb, w.resource, w.code)
        for w in await operator.writes_since(since)
        if w.namespace == namespace and w.resource in ("deployments", "services")
    ]
    assert all(code < 400 for *_, code in writes), writes
    for obj in await _objects(client, namespace):
        assert _our_operations(obj) == ["Apply"], obj["metadata"].get("managedFields")
    assert await operator.reconcile_again((namespace, POOL)) == []


def _our_operations(obj: dict[str, Any]) -> list[str]:
    """How the operator's field manager wrote `obj` (Update or Apply), entry by entry."""
    return [
        m["operation"]
        for m in obj["metadata"].get("managedFields") or []
        if m["manager"] == "dynamo-pool-operator"
    ]


async def _converged(client: Client, namespace: str, check: Check) -> bool:
    return check(*await _objects(client, namespace))
