"""Withdrawing a pool in the order an MCS implementation can follow, and a race lost to
the implementation's own status write as a quiet retry.

An MCS implementation reacts to a vanished Service by writing the export's status
(Lighthouse: `Valid=False ServiceUnavailable`), which bumps the export's
resourceVersion. If the relay's Service went first, the operator's guarded delete of
the export then lost to that write (409). So exports are withdrawn first: they point
at the Service, and the Service and Deployment follow. A precondition conflict that
still happens (any other writer) is a lost race: retried at once from fresh state,
logged at debug, with no error, no traceback and no `Pending` line in the status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import pytest

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.pool.model import Verb
from dynamo_pool_operator.runtime.client.rest import MERGE_PATCH, Client
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.export_fixtures import SE, export_failed_about, exports_become
from tests.integration.support.race_fixtures import FRONTEND_SVC, POOL, RELAY_SVC, make_pool
from tests.integration.support.relay_fixtures import DGDS, RELAYS
from tests.integration.support.spies import Spy, WritePause

pytestmark = pytest.mark.timeout(60)


async def test_exports_are_deleted_before_the_relay_service_and_deployment(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    await make_pool(client, namespace)
    await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})
    await mcs.settle()
    since = control_plane.audit.offset()
    await client.delete(DGDS, POOL, namespace)
    await exports_become(client, namespace, set())
    await mcs.settle()
    deletes = [
        (w.resource, w.name)
        for w in await mcs.writes_since(since)
        if w.namespace == namespace and w.verb == "delete" and w.code < 300
    ]
    kinds = [resource for resource, _ in deletes]
    assert sorted(kinds) == [
        "deployments",
        "poddisruptionbudgets",
        "serviceexports",
        "serviceexports",
        "services",
    ]
    last_export = max(i for i, k in enumerate(kinds) if k == "serviceexports")
    first_relay = min(i for i, k in enumerate(kinds) if k != "serviceexports")
    assert last_export < first_relay, f"withdrawal order: {deletes}"


async def _watch_statuses(client: Client, ns: str, rv: str, seen: list[Any]) -> None:
    async for event in client.watch(RELAYS, ns, resource_version=rv):
        obj = event.get("object") or {}
        if (obj.get("metadata") or {}).get("name") == POOL:
            seen.append((obj.get("status") or {}).get("exports"))


async def test_a_lost_race_with_a_status_write_is_retried_quietly(
    client: Client,
    namespace: str,
    mcs: OperatorUnderTest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await make_pool(client, namespace)
    await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})
    await mcs.settle()
    relay = await client.get(RELAYS, POOL, namespace)
    seen: list[Any] = []
    watcher = asyncio.create_task(
        _watch_statuses(client, namespace, relay["metadata"]["resourceVersion"], seen)
    )
    spy = Spy(mcs)
    caplog.set_level(logging.DEBUG, logger="dynamo_pool_operator")
    try:
        async with WritePause(mcs, Verb.WITHDRAW, FRONTEND_SVC, namespace) as pause:
            await client.delete(DGDS, POOL, namespace)
            await pause.reached()
            # The implementation writes its verdict between our read and our delete.
            await client.request(
                "PATCH",
                SE.path(namespace, FRONTEND_SVC, "status"),
                body={
                    "status": {
                        "conditions": [
                            {
                                "type": "Valid",
                                "status": "False",
                                "reason": "ServiceUnavailable",
                                "message": "Service to be exported doesn't exist",
                                "lastTransitionTime": "2026-12-01T00:00:00Z",
                            }
                        ]
                    }
                },
                content_type=MERGE_PATCH,
            )
            await pause.release()
        await exports_become(client, namespace, set())
        await mcs.settle()
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    # The operator is cluster-wide: only what it logged about this test's namespace.
    ours = [
        r
        for r in caplog.records
        if r.name.startswith("dynamo_pool_operator")
        and (getattr(r, "namespace", None) == namespace or namespace in r.getMessage())
    ]
    loud = [(r.levelname, r.getMessage()) for r in ours if r.levelno >= logging.WARNING]
    assert loud == [], "a lost race is not a failure"
    assert not [r for r in ours if r.exc_info], "no traceback for a lost race"
    assert any("lost a race" in r.getMessage() for r in ours if r.levelno == logging.DEBUG)
    assert spy.errors_of(namespace) == []
    assert spy.emitted(namespace, "ExportFailed") == []
    pending = [lines for lines in seen if lines and any(x["state"] == "Pending" for x in lines)]
    assert pending == [], f"the status showed the lost race: {pending}"


async def test_a_refused_export_withdrawal_keeps_the_relay_objects_until_it_is_withdrawn(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    """The relay's Deployment and Service are deleted only after the exports that point at
    them: while an export's DELETE is refused, both stay, the status says why, and once
    the refusal lifts everything goes."""
    from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES
    from tests.integration.support.export_fixtures import relay_status
    from tests.integration.support.race_fixtures import deny_export_writes

    await make_pool(client, namespace)
    await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})
    await mcs.settle()
    service = await client.get(SERVICES, RELAY_SVC, namespace)
    async with deny_export_writes(control_plane, client, namespace, RELAY_SVC, "DELETE"):
        await client.delete(DGDS, POOL, namespace)

        await eventually(lambda: export_failed_about(client, namespace, RELAY_SVC))
        await mcs.settle(timeout=10, quiet=1.0)
        assert (await client.get(SERVICES, RELAY_SVC, namespace))["metadata"]["uid"] == (
            service["metadata"]["uid"]
        ), "the Service went while its export was still there"
        await client.get(DEPLOYMENTS, RELAY_SVC, namespace)
        status = await relay_status(client, namespace, POOL)
        said = str(status)
        assert RELAY_SVC in said, status
        assert "Failed" in said, status
    await exports_become(client, namespace, set())

    async def relay_objects_gone() -> bool:
        from dynamo_pool_operator.runtime.client import errors

        for res in (DEPLOYMENTS, SERVICES):
            try:
                await client.get(res, RELAY_SVC, namespace)
            except errors.NotFound:
                continue
            return False
        return True

    await eventually(relay_objects_gone)
    assert await mcs.reconcile_again((namespace, POOL)) == []
