"""Races between the operator's cache read and its export write, made real.

Rules: docs/exports.md, 'Ownership, repair and withdrawal'.

The operator is held just before one export write — its plan already made from the
cache — while the test changes the export through the real API server; then the
write goes ahead. The guards (uid + resourceVersion preconditions on the delete and
on the repair's apply, an exclusive create) must make the server refuse the stale
write, and the next pass, from fresh cache, must leave what is no longer ours alone.
"""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.pool.model import Verb
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import SERVICES
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.export_fixtures import (
    SE,
    existing_export,
    export_obj,
    exports_become,
)
from tests.integration.support.objects import controller_ref
from tests.integration.support.race_fixtures import (
    export_states,
    exported_pool,
    make_pool,
    state_becomes,
    wait_event_about,
    withdrawal_held,
    writes_nothing,
)
from tests.integration.support.relay_fixtures import (
    DGDS,
    FRONTEND_SVC,
    POOL,
    RELAY_SVC,
    RELAYS,
    WORKER,
    dgd_body,
    dynamos_services,
    relay_body,
)
from tests.integration.support.spies import WritePause, export_writes, paused, verbs

pytestmark = pytest.mark.timeout(60)


async def only_refused(op: OperatorUnderTest, since: int, ns: str, export: str, verb: str) -> None:
    """Every write the operator made to `export` was a `verb` the server refused with a
    precondition Conflict (a retry from a cache that lags the change may repeat it)."""
    writes = verbs(await export_writes(op, since, ns, export))
    assert writes, f"no {verb} of {export} reached the server"
    assert set(writes) == {(verb, 409)}, writes


def refused_as_stale(pause: WritePause) -> None:
    """The held write was sent and the server refused it with a precondition Conflict."""
    assert isinstance(pause.error, errors.Conflict), f"held write ended with {pause.error!r}"


# ---------------------------------------------------------------- stale withdrawals
async def test_stale_withdrawal_is_refused_after_a_user_removed_the_controller_reference(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    async with withdrawal_held(client, mcs, namespace) as (pause, spy, since):
        checked = pause.guards
        taken = await client.merge_patch(
            SE, FRONTEND_SVC, {"metadata": {"ownerReferences": None}}, namespace
        )
        assert taken["metadata"]["uid"] == checked["uid"]
        assert taken["metadata"]["resourceVersion"] != checked["resourceVersion"]
        await pause.release()
    refused_as_stale(pause)
    # The relay's own export, still controlled, is withdrawn as usual in the same pass.
    await exports_become(client, namespace, {FRONTEND_SVC})
    await mcs.settle()
    kept = await existing_export(client, namespace, FRONTEND_SVC)
    assert kept["metadata"]["resourceVersion"] == taken["metadata"]["resourceVersion"]
    assert "ownerReferences" not in kept["metadata"]
    await only_refused(mcs, since, namespace, FRONTEND_SVC, "delete")
    # The lost race requeues the relay, so it is retried from fresh cache; no failure.
    assert spy.requeued(namespace) >= 1
    assert spy.errors_of(namespace) == []
    assert spy.emitted(namespace, "ExportFailed") == []
    await writes_nothing(mcs, namespace)
    # From now on it is foreign: with the pool back it is reported, never adopted.
    await dynamos_services(client, await client.create(DGDS, dgd_body(POOL, namespace)))
    await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})
    await state_becomes(client, namespace, FRONTEND_SVC, "Foreign")
    await writes_nothing(mcs, namespace)
    still = await existing_export(client, namespace, FRONTEND_SVC)
    assert still["metadata"]["resourceVersion"] == taken["metadata"]["resourceVersion"]
    await only_refused(mcs, since, namespace, FRONTEND_SVC, "delete")


async def test_stale_withdrawal_is_refused_after_another_relay_took_the_export(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    # Pool "a-x" exports a-x-frontend; pool "a" (frontend "x-frontend") names the same
    # Service, a-x's: not its own, so not its export either.
    shared = "a-x-frontend"
    await make_pool(client, namespace, name="a-x")
    await exports_become(client, namespace, {"a-x-pool-relay", shared})
    frontend = {"name": "x-frontend", "type": "frontend"}
    dgd_a = await client.create(DGDS, dgd_body("a", namespace, [frontend, WORKER]))
    other = await client.create(RELAYS, relay_body("a", namespace))
    await exports_become(client, namespace, {"a-x-pool-relay", shared, "a-pool-relay"})
    await state_becomes(client, namespace, shared, "Skipped", name="a")
    await mcs.settle()
    async with paused(mcs, Verb.WITHDRAW, shared, namespace) as (pause, spy, since):
        # The Service passes to DGD "a": a-x withdraws its export...
        await client.merge_patch(
            SERVICES, shared, {"metadata": {"ownerReferences": [controller_ref(dgd_a)]}}, namespace
        )
        await pause.reached()
        # ...which relay "a" takes meanwhile.
        ref = {
            "apiVersion": RELAYS.api_version,
            "kind": RELAYS.kind,
            "name": "a",
            "uid": other["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        taken = await client.merge_patch(
            SE,
            shared,
            {"metadata": {"ownerReferences": [ref], "labels": {names.DGD_NAME: "a"}}},
            namespace,
        )
        await pause.release()
    refused_as_stale(pause)
    await state_becomes(client, namespace, shared, "Exported", name="a")
    await state_becomes(client, namespace, shared, "Skipped", name="a-x")
    await mcs.settle()
    kept = await existing_export(client, namespace, shared)
    assert kept["metadata"]["resourceVersion"] == taken["metadata"]["resourceVersion"]
    assert kept["metadata"]["ownerReferences"] == [ref]
    await only_refused(mcs, since, namespace, shared, "delete")
    assert spy.emitted(namespace, "ExportFailed", "a-x") == []
    assert spy.emitted(namespace, "ExportFailed", "a") == []
    await writes_nothing(mcs, namespace, "a-x")
    await writes_nothing(mcs, namespace, "a")


# ---------------------------------------------------------------- stale repairs
async def test_repair_is_refused_when_a_user_took_the_export_over_after_the_read(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    await exported_pool(client, namespace, mcs)
    async with paused(mcs, Verb.APPLY, FRONTEND_SVC, namespace) as (
        pause,
        spy,
        since,
    ):
        drifted = await client.merge_patch(
            SE, FRONTEND_SVC, {"metadata": {"labels": {names.DGD_NAME: "theirs"}}}, namespace
        )
        planned = await pause.reached()
        assert planned["metadata"]["labels"] == {names.DGD_NAME: POOL}, "restores the label"
        assert pause.guards["resourceVersion"] == drifted["metadata"]["resourceVersion"]
        taken = await client.merge_patch(
            SE, FRONTEND_SVC, {"metadata": {"ownerReferences": None}}, namespace
        )
        await pause.release()
    refused_as_stale(pause)
    await state_becomes(client, namespace, FRONTEND_SVC, "Foreign")
    await mcs.settle()
    kept = await existing_export(client, namespace, FRONTEND_SVC)
    assert kept["metadata"]["resourceVersion"] == taken["metadata"]["resourceVersion"]
    assert kept["metadata"]["labels"][names.DGD_NAME] == "theirs"
    assert "ownerReferences" not in kept["metadata"]
    await only_refused(mcs, since, namespace, FRONTEND_SVC, "patch")
    assert spy.emitted(namespace, "ExportFailed") == []
    await writes_nothing(mcs, namespace)


async def test_repair_never_creates_a_deleted_export(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    relay = await exported_pool(client, namespace, mcs)
    before = await existing_export(client, namespace, FRONTEND_SVC)
    since = control_plane.audit.offset()
    async with WritePause(mcs, Verb.APPLY, FRONTEND_SVC, namespace) as pause:
        await client.merge_patch(
            SE, FRONTEND_SVC, {"metadata": {"labels": {names.DGD_NAME: "wrong"}}}, namespace
        )
        await pause.reached()
        await client.delete(SE, FRONTEND_SVC, namespace)
        assert await export_obj(client, namespace, FRONTEND_SVC) is None
        await pause.release()
    refused_as_stale(pause)
    assert "uid" in str(pause.error), pause.error

    async def recreated() -> dict[str, Any] | None:
        e = await export_obj(client, namespace, FRONTEND_SVC)
        return e if e and e["metadata"]["uid"] != before["metadata"]["uid"] else None

    again = await eventually(recreated)
    await mcs.settle()
    # The refused repair created nothing; a later pass, from a fresh plan, created it
    # (a pass whose cache has not seen it yet may try again: AlreadyExists, no harm).
    writes = verbs(await export_writes(mcs, since, namespace, FRONTEND_SVC))
    assert writes[0] == ("patch", 409), writes
    assert [w for w in writes if w[1] < 300] == [("create", 201)], writes
    assert set(writes) <= {("patch", 409), ("create", 201), ("create", 409)}, writes
    assert again["metadata"]["labels"][names.DGD_NAME] == POOL
    assert again["metadata"]["ownerReferences"][0]["uid"] == relay["metadata"]["uid"]
    created = await wait_event_about(client, namespace, "ExportCreated", again)
    assert created["type"] == "Normal"
    await writes_nothing(mcs, namespace)


# ---------------------------------------------------------------- stale creates
async def test_already_exists_from_a_stale_cache_is_no_error(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    async with paused(mcs, Verb.CREATE, FRONTEND_SVC, namespace) as (
        pause,
        spy,
        since,
    ):
        await make_pool(client, namespace)
        await pause.reached()
        mine = await client.create(
            SE,
            {
                "apiVersion": SE.api_version,
                "kind": SE.kind,
                "metadata": {"name": FRONTEND_SVC, "namespace": namespace},
            },
        )
        await pause.release()
    # A name taken since the cache read is a lost race: retried, never a failure.
    assert isinstance(pause.error, errors.AlreadyExists), f"the create ended with {pause.error!r}"

    async def requeued() -> bool:  # the pass ends once its other writes have too
        return spy.requeued(namespace) >= 1

    await eventually(requeued)
    await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})
    await state_becomes(client, namespace, FRONTEND_SVC, "Foreign")
    await mcs.settle()
    kept = await existing_export(client, namespace, FRONTEND_SVC)
    assert kept["metadata"]["resourceVersion"] == mine["metadata"]["resourceVersion"]
    await only_refused(mcs, since, namespace, FRONTEND_SVC, "create")
    assert spy.errors_of(namespace) == [], "AlreadyExists failed a reconcile"
    assert spy.emitted(namespace, "ExportFailed") == []
    assert (await export_states(client, namespace))[RELAY_SVC] == "Exported"
    await writes_nothing(mcs, namespace)
