"""The relay container's `resources` against a real API server: a field we apply and
own, so a user's edit of it is repaired like any other, and compared by value, so the
server's canonical form of what we wrote (`1000m` kept as `1`) is no drift.

A user's edit here is what `kubectl edit` sends: the Deployment read, the relay
container changed, written back (an Update by another field manager). Each case
then waits for the rendered values to come back, checks the operator's writes were
not refused, and that one more reconcile writes nothing (audit log).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.relay_fixtures import DGDS, RELAYS, decision_of, dgd_body, relay_body

POOL = "llama"
OBJ = f"{POOL}-pool-relay"
RESOURCES = {
    "limits": {"cpu": "500m", "memory": "128Mi"},
    "requests": {"cpu": "100m", "memory": "64Mi"},
}

Edit = Callable[[dict[str, Any]], object]


async def _publish(client: Client, namespace: str, resources: dict[str, Any]) -> None:
    await client.create(DGDS, dgd_body(POOL, namespace))
    await client.create(RELAYS, relay_body(POOL, namespace, resources=resources))

    async def published() -> bool:
        cond = await decision_of(client, namespace, POOL)
        return bool(cond and cond["status"] == "True")

    await eventually(published)


async def _resources(client: Client, namespace: str) -> dict[str, Any]:
    dep = await client.get(DEPLOYMENTS, OBJ, namespace)
    resources: dict[str, Any] = dep["spec"]["template"]["spec"]["containers"][0].get(
        "resources", {}
    )
    return resources


async def _kubectl_edit(client: Client, namespace: str, edit: Edit) -> None:
    dep = await client.get(DEPLOYMENTS, OBJ, namespace)
    edit(dep["spec"]["template"]["spec"]["containers"][0])
    await client.replace(DEPLOYMENTS, dep, field_manager="kubectl-edit")


EDITS: list[tuple[str, Edit]] = [
    ("limits.cpu set to 64", lambda c: c["resources"]["limits"].__setitem__("cpu", "64")),
    ("limits removed", lambda c: c["resources"].pop("limits")),
    ("limits.memory removed", lambda c: c["resources"]["limits"].pop("memory")),
    ("requests.cpu changed", lambda c: c["resources"]["requests"].__setitem__("cpu", "200m")),
    ("resources removed", lambda c: c.pop("resources")),
]


@pytest.mark.parametrize(("case", "edit"), EDITS, ids=[e[0] for e in EDITS])
async def test_a_users_edit_of_the_relay_resources_is_repaired(
    client: Client,
    control_plane: ControlPlane,
    namespace: str,
    operator: OperatorUnderTest,
    case: str,
    edit: Edit,
) -> None:
    await _publish(client, namespace, RESOURCES)
    await operator.settle()
    assert await _resources(client, namespace) == RESOURCES
    since = control_plane.audit.offset()
    await _kubectl_edit(client, namespace, edit)
    assert await _resources(client, namespace) != RESOURCES, "the edit did not land"

    async def repaired() -> bool:
        return await _resources(client, namespace) == RESOURCES

    await eventually(repaired)
    await operator.settle()
    writes = [
        (w.verb, w.resource, w.code)
        for w in await operator.writes_since(since)
        if w.namespace == namespace and w.resource == "deployments"
    ]
    assert writes, f"{case}: repaired with no write by the operator?"
    assert all(code < 400 for *_, code in writes), f"{case}: refused writes {writes}"
    again = await operator.reconcile_again((namespace, POOL))
    assert again == [], f"{case}: second pass wrote {[(w.verb, w.resource) for w in again]}"


async def test_the_servers_canonical_form_of_our_quantities_is_no_drift(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    """We render what the relay says; the server keeps each quantity in its canonical
    form. Compared by value, the pass after publishing has nothing to write."""
    spec = {
        "limits": {"cpu": "1000m", "memory": "1024Mi", "ephemeral-storage": "1e9"},
        "requests": {"cpu": "0.5", "memory": 67108864, "ephemeral-storage": "0.5G"},
    }
    await _publish(client, namespace, spec)
    await operator.settle()
    kept = await _resources(client, namespace)
    rewritten = {
        (section, name): value
        for section, values in kept.items()
        for name, value in values.items()
        if value != spec[section][name]
    }
    assert rewritten == {
        ("limits", "cpu"): "1",
        ("limits", "memory"): "1Gi",
        ("requests", "cpu"): "500m",
        ("requests", "memory"): "67108864",
        ("requests", "ephemeral-storage"): "500M",
    }, "the server rewrites other quantities than this case expects"
    assert await operator.reconcile_again((namespace, POOL)) == []


async def test_a_users_edit_to_the_same_quantity_in_another_form_is_left_alone(
    client: Client, control_plane: ControlPlane, namespace: str, operator: OperatorUnderTest
) -> None:
    """`128Mi` written as `134217728` bytes is the same limit: no write follows."""
    await _publish(client, namespace, RESOURCES)
    await operator.settle()
    since = control_plane.audit.offset()
    await _kubectl_edit(
        client, namespace, lambda c: c["resources"]["limits"].__setitem__("memory", "134217728")
    )
    assert (await _resources(client, namespace))["limits"]["memory"] == "134217728"
    await operator.settle()
    written = [
        (w.verb, w.resource)
        for w in await operator.writes_since(since)
        if w.namespace == namespace and w.resource == "deployments"
    ]
    assert written == [], f"the operator rewrote an equal quantity: {written}"
    assert await operator.reconcile_again((namespace, POOL)) == []
