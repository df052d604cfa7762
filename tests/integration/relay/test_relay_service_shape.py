"""The relay Service's shape: headless by default, ClusterIP when the relay (or the
operator's `poolRelay.headless`) says so, and a change of shape replaces it.

`spec.clusterIP` is immutable, so an apply of the other shape is refused by the API
server (422). The operator withdraws the relay Service's export, deletes its own
Service as it read it (uid and resourceVersion preconditions), creates the new one
once it is gone, and exports it again `REEXPORT_AFTER` later (an MCS implementation
drops the import of the old shape meanwhile; Lighthouse calls an export of the other
type a conflict while it still imports the first). The frontends' exports stay. A
Service of the name that is not the relay's is never touched.
"""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.api import mcs
from dynamo_pool_operator.api.conditions import ExportLineReason
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.pool.exports.plan import REEXPORT_AFTER
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.meta import parse_rfc3339
from dynamo_pool_operator.runtime.objects.resources import SERVICES
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.export_fixtures import (
    config,
    events_for,
    export_failed_about,
    exports_become,
)
from tests.integration.support.relay_fixtures import (
    DGDS,
    RELAYS,
    condition,
    decision_of,
    dgd_body,
    dynamos_services,
    relay_body,
)

POOL = "llama"
OBJ = f"{POOL}-pool-relay"
FRONTEND = f"{POOL}-frontend"
SE = mcs.serviceexports("v1alpha1")


@pytest.fixture
def operator(mcs: OperatorUnderTest) -> OperatorUnderTest:
    return mcs


async def _service(client: Client, ns: str) -> dict[str, Any] | None:
    try:
        return await client.get(SERVICES, OBJ, ns)
    except errors.NotFound:
        return None


def _headless(svc: dict[str, Any]) -> bool:
    return bool(svc["spec"].get("clusterIP") == "None")


async def _shape_becomes(client: Client, ns: str, headless: bool) -> dict[str, Any]:
    async def shaped() -> dict[str, Any] | None:
        svc = await _service(client, ns)
        return svc if svc is not None and _headless(svc) == headless else None

    found: dict[str, Any] = await eventually(shaped)
    return found


async def _refused(operator: OperatorUnderTest, since: int, ns: str) -> list[tuple[Any, ...]]:
    return [
        (w.verb, w.resource, w.name, w.code)
        for w in await operator.writes_since(since)
        if w.namespace == ns and w.code >= 400
    ]


async def test_the_relay_service_is_headless_by_default_and_replaced_when_its_shape_changes(
    client: Client, control_plane: ControlPlane, namespace: str, operator: OperatorUnderTest
) -> None:
    await dynamos_services(client, await client.create(DGDS, dgd_body(POOL, namespace)))
    await client.create(RELAYS, relay_body(POOL, namespace))
    headless = await _shape_becomes(client, namespace, headless=True)
    await exports_become(client, namespace, {OBJ, FRONTEND})
    export_uid = (await client.get(SE, OBJ, namespace))["metadata"]["uid"]
    frontend_uid = (await client.get(SE, FRONTEND, namespace))["metadata"]["uid"]
    await operator.settle()

    for want in (False, True):
        since = control_plane.audit.offset()
        before = await _service(client, namespace)
        assert before is not None
        await client.merge_patch(RELAYS, POOL, {"spec": {"service": {"headless": want}}}, namespace)
        after = await _shape_becomes(client, namespace, headless=want)
        assert after["metadata"]["uid"] != before["metadata"]["uid"], "a new Service"
        if not want:
            assert after["spec"]["clusterIP"] not in ("", "None"), after["spec"]

        async def reexported(old_uid: str = export_uid) -> dict[str, Any] | None:
            try:
                found = await client.get(SE, OBJ, namespace)
            except errors.NotFound:
                return None
            return found if found["metadata"]["uid"] != old_uid else None

        exported = await eventually(reexported, timeout=30)
        export_uid = exported["metadata"]["uid"]
        made = parse_rfc3339(exported["metadata"]["creationTimestamp"])
        new_service = parse_rfc3339(after["metadata"]["creationTimestamp"])
        assert made is not None
        assert new_service is not None
        # Seconds granularity on both: at least REEXPORT_AFTER apart, give or take one.
        assert (made - new_service).total_seconds() >= REEXPORT_AFTER.total_seconds() - 1
        await operator.settle()
        assert await _refused(operator, since, namespace) == [], "no apply of the other shape"
        writes = [
            (w.verb, w.resource, w.name)
            for w in await operator.writes_since(since)
            if w.namespace == namespace
            and w.resource in ("services", "serviceexports")
            and w.verb in ("create", "delete")
        ]
        assert writes == [
            ("delete", "serviceexports", OBJ),
            ("delete", "services", OBJ),
            ("create", "services", OBJ),
            ("create", "serviceexports", OBJ),
        ], writes
        assert (await client.get(SE, FRONTEND, namespace))["metadata"]["uid"] == frontend_uid
        published = await decision_of(client, namespace, POOL)
        assert published is not None
        assert published["status"] == "True", published
        writes = await operator.reconcile_again((namespace, POOL))
        assert writes == [], [(w.verb, w.resource) for w in writes]

    deleted = await events_for(client, namespace, "ExportDeleted")
    assert sum((e.get("series") or {}).get("count", 1) for e in deleted) == 2, deleted
    replaced = await events_for(client, namespace, "RelayServiceReplaced")
    assert sum((e.get("series") or {}).get("count", 1) for e in replaced) == 2, replaced
    assert {e["regarding"]["name"] for e in replaced} == {POOL}, replaced
    final = await _service(client, namespace)
    assert final is not None
    assert final["metadata"]["uid"] != headless["metadata"]["uid"]


async def test_the_configured_shape_is_the_default_and_a_restart_with_another_replaces_it(
    client: Client, control_plane: ControlPlane, namespace: str
) -> None:
    """An operator configured with `poolRelay.headless: false` makes ClusterIP Services;
    restarted with the default, it replaces each with a headless one (the upgrade path
    of relays made as ClusterIP Services)."""
    flat = config("mcs", poolRelay={"headless": False})
    await dynamos_services(client, await client.create(DGDS, dgd_body(POOL, namespace)))
    await client.create(RELAYS, relay_body(POOL, namespace))
    async with OperatorUnderTest(control_plane, flat):
        first = await _shape_becomes(client, namespace, headless=False)
    async with OperatorUnderTest(control_plane, config("mcs")) as op:
        since = control_plane.audit.offset()
        second = await _shape_becomes(client, namespace, headless=True)
        await op.settle()
        assert second["metadata"]["uid"] != first["metadata"]["uid"]
        assert await _refused(op, since, namespace) == []
        assert await op.reconcile_again((namespace, POOL)) == []


async def test_a_service_of_the_name_that_is_not_the_relays_is_never_replaced(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    foreign = await client.create(
        SERVICES,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": OBJ, "namespace": namespace},
            "spec": {"ports": [{"name": "web", "port": 80}]},
        },
    )
    await dynamos_services(client, await client.create(DGDS, dgd_body(POOL, namespace)))
    await client.create(RELAYS, relay_body(POOL, namespace))

    async def refused() -> dict[str, Any] | None:
        c = await condition(client, namespace, POOL, "Published")
        return c if c is not None and c["reason"] == "OwnershipConflict" else None

    await eventually(refused)
    await operator.settle()
    still = await client.get(SERVICES, OBJ, namespace)
    assert still["metadata"]["uid"] == foreign["metadata"]["uid"]
    assert still["metadata"]["resourceVersion"] == foreign["metadata"]["resourceVersion"]


async def test_while_the_service_is_replaced_the_relay_says_its_export_is_pending(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    """Between the old export's withdrawal and the new one's creation the status says
    why the pool is not exported: Exported=Unknown Pending, the line `ServiceReplaced`."""
    await dynamos_services(client, await client.create(DGDS, dgd_body(POOL, namespace)))
    await client.create(RELAYS, relay_body(POOL, namespace))
    await exports_become(client, namespace, {OBJ, FRONTEND})
    await operator.settle()
    await client.merge_patch(RELAYS, POOL, {"spec": {"service": {"headless": False}}}, namespace)

    async def held() -> dict[str, Any] | None:
        status = (await client.get(RELAYS, POOL, namespace)).get("status") or {}
        line = next((x for x in status.get("exports", []) if x["name"] == OBJ), {})
        return status if line.get("reason") == ExportLineReason.SERVICE_REPLACED else None

    status = await eventually(held, timeout=10, interval=0.02)
    exported = next(c for c in status["conditions"] if c["type"] == "Exported")
    assert (exported["status"], exported["reason"]) == ("Unknown", "Pending"), exported
    assert "spec.service.headless" in exported["message"], exported
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] != "True", ready
    await exports_become(client, namespace, {OBJ, FRONTEND}, timeout=30)
    await operator.settle()
    assert await operator.reconcile_again((namespace, POOL)) == []


async def test_a_refused_export_withdrawal_keeps_the_service_until_its_export_is_gone(
    client: Client, control_plane: ControlPlane, namespace: str, operator: OperatorUnderTest
) -> None:
    """No Service is replaced under a live export: while the DELETE of the relay
    Service's export is refused, the Service of the old shape stays (the same object),
    the status says what waits and why, and once the refusal lifts the export goes, the
    Service is replaced and exported again."""
    from tests.integration.support.race_fixtures import deny_export_writes

    await dynamos_services(client, await client.create(DGDS, dgd_body(POOL, namespace)))
    await client.create(RELAYS, relay_body(POOL, namespace))
    headless = await _shape_becomes(client, namespace, headless=True)
    await exports_become(client, namespace, {OBJ, FRONTEND})
    export_uid = (await client.get(SE, OBJ, namespace))["metadata"]["uid"]
    await operator.settle()
    async with deny_export_writes(control_plane, client, namespace, OBJ, "DELETE"):
        await client.merge_patch(
            RELAYS, POOL, {"spec": {"service": {"headless": False}}}, namespace
        )

        await eventually(lambda: export_failed_about(client, namespace, OBJ))
        await operator.settle(timeout=10, quiet=1.0)
        still = await _service(client, namespace)
        assert still is not None, "the Service was deleted under its live export"
        assert still["metadata"]["uid"] == headless["metadata"]["uid"]
        assert (await client.get(SE, OBJ, namespace))["metadata"]["uid"] == export_uid
        ready = await condition(client, namespace, POOL, "Ready")
        assert ready is not None
        assert ready["status"] != "True", ready
        status = (await client.get(RELAYS, POOL, namespace))["status"]
        line = next(e for e in status["exports"] if e["name"] == OBJ)
        assert line["state"] == "Failed", line
    replaced = await _shape_becomes(client, namespace, headless=False)
    assert replaced["metadata"]["uid"] != headless["metadata"]["uid"]

    async def reexported() -> bool:
        try:
            found = await client.get(SE, OBJ, namespace)
        except errors.NotFound:
            return False
        return bool(found["metadata"]["uid"] != export_uid)

    await eventually(reexported, timeout=30)
    await operator.settle()
    assert await operator.reconcile_again((namespace, POOL)) == []
