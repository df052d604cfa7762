"""The relay objects' caches watch by label selector (decision 0006), against a real
API server: the operator never receives other workloads' Deployments; an object of a
relay object's name that the selector hides is found by the create's 409 (ours:
repaired; anyone else's: `OwnershipConflict` until it is gone)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.pool.model import Verb
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.export_fixtures import events_for
from tests.integration.support.race_fixtures import published_pool
from tests.integration.support.relay_fixtures import (
    DGDS,
    RELAYS,
    absent,
    decided,
    decision_of,
    dgd_body,
    published,
    relay_body,
)
from tests.integration.support.spies import WritePause

POOL = "llama"
RELAY_OBJ = f"{POOL}-pool-relay"
SECRET = "s3cr3t-token-do-not-cache"
#: Labels only our relay objects carry.
RELAY_OBJECT_SELECTOR = (
    "app.kubernetes.io/managed-by=dynamo-pool-operator,app.kubernetes.io/component=pool-relay"
)


@pytest.fixture
async def operator(control_plane: ControlPlane) -> AsyncIterator[OperatorUnderTest]:
    async with OperatorUnderTest(control_plane) as op:
        # The hidden foreign object is read again after this long (30 s by default).
        op.running.reconciler.foreign_recheck = 0.5
        op.running.reconciler.foreign_recheck_max = 1.0
        yield op


def unlabelled_deployment(name: str, ns: str, **meta: Any) -> dict[str, Any]:
    """A user's Deployment (no pods: 0 replicas), with a secret in an env value."""
    app = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, **meta},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": app},
            "template": {
                "metadata": {"labels": app},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "app:1", "env": [{"name": "T", "value": SECRET}]}
                    ]
                },
            },
        },
    }


async def test_the_deployment_cache_never_receives_unrelated_deployments(
    client: Client,
    namespace: str,
    operator: OperatorUnderTest,
    control_plane: ControlPlane,
) -> None:
    other = f"{namespace}-other"
    control_plane.create_namespace(other)
    try:
        # Named like a relay object, in a namespace with no relay: the name filter
        # alone would keep it.
        await client.create(DEPLOYMENTS, unlabelled_deployment("other-pool-relay", other))
        await client.create(DEPLOYMENTS, unlabelled_deployment("web", other))
        await published_pool(client, namespace)
        caches = operator.running.reconciler.caches
        await operator.settle()
        assert caches.of_kind("Deployment").label_selector == RELAY_OBJECT_SELECTOR
        assert caches.of_kind("Service").label_selector == RELAY_OBJECT_SELECTOR  # exports off
        # (Other tests' relays, in namespaces being deleted, may still be cached.)
        held = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in _all(caches)]
        assert (namespace, RELAY_OBJ) in held
        assert [key for key in held if key[0] == other] == []
        assert SECRET not in repr(list(_all(caches)))
    finally:
        control_plane.delete_namespace(other)


def _all(caches: Any) -> list[dict[str, Any]]:
    return list(caches.of_kind("Deployment").store.list())


async def test_a_foreign_deployment_of_the_relays_name_conflicts_until_it_is_deleted(
    client: Client,
    namespace: str,
    operator: OperatorUnderTest,
    control_plane: ControlPlane,
) -> None:
    since = control_plane.audit.offset()
    foreign = await client.create(DEPLOYMENTS, unlabelled_deployment(RELAY_OBJ, namespace))
    await client.create(DGDS, dgd_body(POOL, namespace))
    await client.create(RELAYS, relay_body(POOL, namespace))

    async def conflict() -> dict[str, Any] | None:
        cond = await decision_of(client, namespace, POOL)
        if cond and cond["reason"] == "OwnershipConflict":
            return cond if await absent(client, SERVICES, namespace, RELAY_OBJ) else None
        return None

    cond: dict[str, Any] = await eventually(conflict)
    assert cond["status"] == "False"
    assert f"Deployment {RELAY_OBJ!r} has no controller" in cond["message"], cond
    warnings = await eventually(lambda: events_for(client, namespace, "OwnershipConflict"))
    assert [e["type"] for e in warnings] == ["Warning"], warnings
    still = await client.get(DEPLOYMENTS, RELAY_OBJ, namespace)
    assert still["metadata"]["resourceVersion"] == foreign["metadata"]["resourceVersion"]
    # While the conflict stands, no create is sent again: the passes decide on the
    # object as read.
    await operator.settle()
    creates = await _creates(operator, since, namespace)
    assert await operator.reconcile_again((namespace, POOL)) == []
    assert await _creates(operator, since, namespace) == creates
    # No watch sees it go: it is read again after the delay.
    await client.delete(DEPLOYMENTS, RELAY_OBJ, namespace)
    await published(client, namespace)
    made = await client.get(DEPLOYMENTS, RELAY_OBJ, namespace)
    assert made["metadata"]["labels"][names.APP_MANAGED_BY] == names.MANAGED_BY
    assert await operator.reconcile_again((namespace, POOL)) == []


async def _creates(op: OperatorUnderTest, since: int, ns: str) -> int:
    return sum(
        1
        for w in await op.writes_since(since)
        if w.verb == "create" and w.resource == "deployments" and w.namespace == ns
    )


async def test_our_deployment_whose_labels_a_user_removed_is_repaired(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    await published_pool(client, namespace)
    ours = await client.get(DEPLOYMENTS, RELAY_OBJ, namespace)
    await client.merge_patch(
        DEPLOYMENTS,
        RELAY_OBJ,
        {"metadata": {"labels": {names.APP_MANAGED_BY: None, names.APP_COMPONENT: None}}},
        namespace,
    )

    async def repaired() -> dict[str, Any] | None:
        obj = await client.get(DEPLOYMENTS, RELAY_OBJ, namespace)
        have = obj["metadata"].get("labels") or {}
        return obj if have.get(names.APP_MANAGED_BY) == names.MANAGED_BY else None

    obj: dict[str, Any] = await eventually(repaired)
    assert obj["metadata"]["uid"] == ours["metadata"]["uid"]
    assert obj["metadata"]["labels"] == names.owned_object_labels(POOL)
    await operator.settle()
    caches = operator.running.reconciler.caches
    assert caches.of_kind("Deployment").store.get(namespace, RELAY_OBJ) is not None
    cond = await decision_of(client, namespace, POOL)
    assert cond is not None
    assert cond["status"] == "True", cond
    assert await operator.reconcile_again((namespace, POOL)) == []


UNLABELLED = {"metadata": {"labels": {names.APP_MANAGED_BY: None, names.APP_COMPONENT: None}}}


@pytest.mark.parametrize("kind", ["Deployment", "Service"])
async def test_our_object_unlabelled_while_the_operator_was_down_is_withdrawn_with_its_pool(
    client: Client, namespace: str, control_plane: ControlPlane, kind: str
) -> None:
    """The selector hides our object once our labels are gone, so at start no cache
    shows it: a withdrawal reads the name once, and deletes what the relay controls
    (with exports off the relay Service is watched by the selector too)."""
    res = DEPLOYMENTS if kind == "Deployment" else SERVICES
    async with OperatorUnderTest(control_plane) as op:
        await published_pool(client, namespace)
        await op.settle()
    ours = await client.get(res, RELAY_OBJ, namespace)
    await client.merge_patch(res, RELAY_OBJ, UNLABELLED, namespace)
    await client.delete(DGDS, POOL, namespace)
    async with OperatorUnderTest(control_plane) as op:
        await decided(client, namespace, POOL, "DGDNotFound")
        await eventually(lambda: absent(client, res, namespace, RELAY_OBJ))
        assert await op.reconcile_again((namespace, POOL)) == []
    assert ours["metadata"]["ownerReferences"][0]["kind"] == "DynamoPoolRelay"


async def test_our_deployment_unlabelled_during_its_withdrawal_is_withdrawn(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    """The labels go while the withdrawal's delete is on its way: the delete is refused
    (the object changed), and the next pass no longer sees it in the cache."""
    await published_pool(client, namespace)
    await operator.settle()
    async with WritePause(
        operator, Verb.WITHDRAW, RELAY_OBJ, namespace, resource=DEPLOYMENTS
    ) as pause:
        await client.delete(DGDS, POOL, namespace)
        await pause.reached()
        await client.merge_patch(DEPLOYMENTS, RELAY_OBJ, UNLABELLED, namespace)
        await pause.release()
        assert isinstance(pause.error, errors.Conflict), pause.error
    await decided(client, namespace, POOL, "DGDNotFound")
    await eventually(lambda: absent(client, DEPLOYMENTS, namespace, RELAY_OBJ))
    assert await operator.reconcile_again((namespace, POOL)) == []


async def test_a_withdrawn_relay_reads_a_hidden_name_once_not_every_pass(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    """The read by name is for an object the caches cannot show: once per withdrawal,
    not a GET on every pass of a relay that stays withdrawn."""
    await client.create(RELAYS, relay_body(POOL, namespace))  # no DGD: withdrawn from the start
    await decided(client, namespace, POOL, "DGDNotFound")
    await operator.settle()
    sent: list[tuple[str, str]] = []
    seam: Any = operator.client
    original = seam.request

    async def recording(method: str, path: str, **kw: Any) -> Any:
        sent.append((method, path))
        return await original(method, path, **kw)

    seam.request = recording
    try:
        for _ in range(3):
            operator.running.reconciler.inputs_changed()
            await operator.running.reconciler.reconcile((namespace, POOL))
    finally:
        seam.request = original
    assert [(m, p) for m, p in sent if p.endswith(f"/{RELAY_OBJ}")] == []
