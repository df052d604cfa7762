"""Guards of the export effects that the other export tests left unpinned (docs/exports.md).

The tests here come from the guard-breaking pass over the export effects (table in
docs/testing.md): a guard was broken by hand in a scratch copy, and where no
integration test failed, one was added here. Each name states the rule; the comment
above it names the guard. One test pins a bug the pass found and that is now fixed
(a status line left stale while the relay cache lagged our own status write).

As everywhere in this tier the API server is the real one; where a race must happen
at a precise moment, our own code is held (`WritePause`, a watch's delivery, or the
feature-off cleanup's per-export step) while the test changes the object through the API.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from dynamo_pool_operator.api import crd as relay_crd
from dynamo_pool_operator.api import names
from dynamo_pool_operator.localcluster.assets import resolve
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.crds import cluster_property_crd, dgd_crd, mcs_crds
from dynamo_pool_operator.pool.exports import cleanup
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import SERVICES, Resource
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.export_fixtures import (
    SE,
    config,
    events_for,
    existing_export,
    export_names,
    export_obj,
    exports_become,
    relay_status,
    wait_event,
)
from tests.integration.support.planes import scratch_namespace
from tests.integration.support.race_fixtures import (
    export_states,
    exported_pool,
    make_pool,
    refuse_service_create,
    state_becomes,
    wait_event_about,
    withdrawal_held,
    writes_nothing,
)
from tests.integration.support.relay_fixtures import (
    DGDS,
    FRONTEND,
    FRONTEND_SVC,
    POOL,
    RELAY_SVC,
    RELAYS,
    WORKER,
    absent,
)
from tests.integration.support.spies import Spy, export_writes, verbs

pytestmark = pytest.mark.timeout(120)

#: An MCS implementation's finalizer: holds an export in deletion.
HOLD = "mcs.example/hold"
CHAT = {"name": "Chat", "type": "frontend", "replicas": 1}
CHAT_SVC = f"{POOL}-chat"
API = {"name": "Api", "type": "frontend", "replicas": 1}
API_SVC = f"{POOL}-api"


def export_body(ns: str, name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": SE.api_version,
        "kind": SE.kind,
        "metadata": {"name": name, "namespace": ns, **meta},
    }


async def foreign_beside_pool(
    client: Client, namespace: str, mcs: OperatorUnderTest, name: str
) -> dict[str, Any]:
    """A user's export of `name`, then a pool that would export that name too: the
    relay makes its own exports and marks the user's Foreign. Returns the user's export."""
    mine = await client.create(SE, export_body(namespace, name))
    await make_pool(client, namespace)
    await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})
    await state_becomes(client, namespace, name, "Foreign")
    await mcs.settle()
    return mine


def controller_ref(owner: dict[str, Any]) -> dict[str, Any]:
    """A controller owner reference to `owner` (any kind), as the operator writes it."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


async def caught_up(op: OperatorUnderTest, client: Client, ns: str, name: str = POOL) -> None:
    """Settle, then wait until the relay cache holds the relay as the API server has it:
    `settle` watches only the queue, and our last status write may still be on its way
    back through the watch."""

    async def same_version() -> bool:
        await op.settle()
        live = await client.get(RELAYS, name, ns)
        cached = op.running.caches.relays.store.get(ns, name)
        rv = live["metadata"]["resourceVersion"]
        return cached is not None and cached["metadata"]["resourceVersion"] == rv

    await eventually(same_version)


async def second_pass_writes_nothing(
    op: OperatorUnderTest, client: Client, ns: str, name: str = POOL
) -> None:
    """Once caught up, one more reconcile by hand writes nothing (audit log)."""
    await caught_up(op, client, ns, name)
    await writes_nothing(op, ns, name)


async def release(client: Client, ns: str, name: str) -> None:
    """Drop every finalizer of export `name`, if it still exists."""
    with contextlib.suppress(errors.NotFound):
        await client.merge_patch(SE, name, {"metadata": {"finalizers": None}}, ns)


# ---------------------------------------------------------------- withdrawal: NotFound, terminating
# Guard: guarded `delete`, NotFound is done (the executor's `Result.GONE`).
async def test_withdrawal_of_an_export_deleted_since_the_read_is_done_not_failed(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    async with withdrawal_held(client, mcs, namespace) as (pause, spy, since):
        await client.delete(SE, FRONTEND_SVC, namespace)  # someone else was quicker
        await pause.release()
    assert isinstance(pause.error, errors.NotFound), f"the delete ended with {pause.error!r}"
    await exports_become(client, namespace, set())
    await mcs.settle()
    assert verbs(await export_writes(mcs, since, namespace, FRONTEND_SVC)) == [("delete", 404)]
    assert spy.errors_of(namespace) == [], "NotFound on a withdrawal failed the reconcile"
    assert spy.emitted(namespace, "ExportFailed") == []
    assert [e for e in spy.emitted(namespace, "ExportDeleted") if FRONTEND_SVC in e.note] == []
    assert FRONTEND_SVC not in await export_states(client, namespace)
    await second_pass_writes_nothing(mcs, client, namespace)


# Guards: execute `_one` WAIT (`Pending`/`Terminating` line) and wiring `export_changed`
# (a deletionTimestamp appearing requeues the relay).
async def test_export_being_deleted_is_shown_pending_terminating_then_created_again(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    await exported_pool(client, namespace, mcs)
    before = await existing_export(client, namespace, FRONTEND_SVC)
    await client.merge_patch(SE, FRONTEND_SVC, {"metadata": {"finalizers": [HOLD]}}, namespace)
    try:
        await client.delete(SE, FRONTEND_SVC, namespace)
        # Only the export's own update event can tell the relay: nothing else changes.
        await state_becomes(client, namespace, FRONTEND_SVC, "Pending")
        line = [
            x
            for x in (await client.get(RELAYS, POOL, namespace))["status"]["exports"]
            if x["name"] == FRONTEND_SVC
        ]
        assert line == [{"name": FRONTEND_SVC, "state": "Pending", "reason": "Terminating"}]
        await second_pass_writes_nothing(mcs, client, namespace)
    finally:
        await release(client, namespace, FRONTEND_SVC)

    async def recreated() -> dict[str, Any] | None:
        e = await export_obj(client, namespace, FRONTEND_SVC)
        return e if e and e["metadata"]["uid"] != before["metadata"]["uid"] else None

    await eventually(recreated)
    await state_becomes(client, namespace, FRONTEND_SVC, "Exported")
    await second_pass_writes_nothing(mcs, client, namespace)


# Guard: plan, an unwanted export the relay controls that is being deleted is WAIT,
# not WITHDRAW (no second delete of an export an implementation's finalizer holds).
async def test_withdrawal_leaves_an_export_already_being_deleted_alone(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    await exported_pool(client, namespace, mcs)
    await client.merge_patch(SE, FRONTEND_SVC, {"metadata": {"finalizers": [HOLD]}}, namespace)
    try:
        await client.delete(SE, FRONTEND_SVC, namespace)
        await state_becomes(client, namespace, FRONTEND_SVC, "Pending")
        await mcs.settle()
        since = control_plane.audit.offset()
        await client.delete(DGDS, POOL, namespace)
        await exports_become(client, namespace, {FRONTEND_SVC})  # ours went, held one stays
        await mcs.settle()
        await second_pass_writes_nothing(mcs, client, namespace)
        assert await export_writes(mcs, since, namespace, FRONTEND_SVC) == []
        # A withdrawn relay lists only withdrawals that failed or lost a race.
        assert await export_states(client, namespace) == {}
    finally:
        await release(client, namespace, FRONTEND_SVC)
    await exports_become(client, namespace, set())
    await second_pass_writes_nothing(mcs, client, namespace)


# Guard: plan, only exports the relay controls are withdrawn. A withdrawal while the DGD
# still exists (here: no workers left) still looks up the exports named like its
# frontends; a user's export among them must survive (with the DGD gone, it is not
# even looked up, which is all test_exports covers).
async def test_withdrawal_with_the_dgd_present_leaves_a_users_export_of_a_wanted_name(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    mine = await foreign_beside_pool(client, namespace, mcs, FRONTEND_SVC)
    since = control_plane.audit.offset()
    await client.merge_patch(DGDS, POOL, {"spec": {"components": [FRONTEND]}}, namespace)
    await exports_become(client, namespace, {FRONTEND_SVC})
    await mcs.settle()
    await second_pass_writes_nothing(mcs, client, namespace)
    kept = await existing_export(client, namespace, FRONTEND_SVC)
    assert kept["metadata"]["resourceVersion"] == mine["metadata"]["resourceVersion"]
    assert await export_writes(mcs, since, namespace, FRONTEND_SVC) == []


# ---------------------------------------------------------------- events
# Guards: execute `_one`, the `related` object of ExportRepaired and ExportDeleted is
# the export, at the uid and resourceVersion the decision was made on.
async def test_repair_and_withdrawal_events_name_the_export_at_the_version_read(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    await exported_pool(client, namespace, mcs)
    drifted = await client.merge_patch(
        SE, FRONTEND_SVC, {"metadata": {"labels": {names.DGD_NAME: "x"}}}, namespace
    )
    repaired = await wait_event(client, namespace, "ExportRepaired", name=FRONTEND_SVC)
    want = {
        "apiVersion": SE.api_version,
        "kind": "ServiceExport",
        "namespace": namespace,
        "name": FRONTEND_SVC,
        "uid": drifted["metadata"]["uid"],
        "resourceVersion": drifted["metadata"]["resourceVersion"],
    }
    assert repaired["related"] == want
    assert repaired["regarding"]["kind"] == "DynamoPoolRelay"
    assert repaired["regarding"]["name"] == POOL
    assert repaired["action"] == "Repair"
    await mcs.settle()
    current = await existing_export(client, namespace, FRONTEND_SVC)
    assert current["metadata"]["labels"][names.DGD_NAME] == POOL
    await client.delete(DGDS, POOL, namespace)
    deleted = await wait_event(client, namespace, "ExportDeleted", name=FRONTEND_SVC)
    assert deleted["related"] == {
        **want,
        "resourceVersion": current["metadata"]["resourceVersion"],
    }
    assert deleted["regarding"]["name"] == POOL
    assert deleted["action"] == "Delete"


# ---------------------------------------------------------------- metrics
def _sample(op: OperatorUnderTest, name: str, **labels_: str) -> float:
    return op.registry.get_sample_value(name, labels_) or 0.0


def exports_by_state(op: OperatorUnderTest) -> dict[str, float]:
    states = ("Exported", "Pending", "Failed", "Foreign", "Skipped")
    return {s: _sample(op, "dynamo_pool_operator_exports", state=s) for s in states}


# Guards: the feature's `_count` (each relay's lines summed, not the last relay's),
# `report` updating it, and the reconciler forgetting a deleted relay.
async def test_exports_gauge_sums_states_over_relays_and_forgets_a_deleted_relay(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    # Restricted to this namespace, so relays other tests left behind do not count.
    cfg = config("mcs", namespace={"restricted": namespace}, leaderElection={"enabled": False})
    async with OperatorUnderTest(control_plane, cfg) as op:
        await client.create(SE, export_body(namespace, "b-frontend"))  # a user's
        await make_pool(client, namespace, name="a")
        await make_pool(client, namespace, name="b")
        await exports_become(
            client, namespace, {"a-pool-relay", "a-frontend", "b-pool-relay", "b-frontend"}
        )
        await state_becomes(client, namespace, "b-frontend", "Foreign", name="b")
        await state_becomes(client, namespace, "a-frontend", "Exported", name="a")
        await op.settle()
        gauge = exports_by_state(op)
        assert gauge == {"Exported": 3, "Pending": 0, "Failed": 0, "Foreign": 1, "Skipped": 0}
        writes = "dynamo_pool_operator_writes_total"
        assert _sample(op, writes, kind="ServiceExport", verb="Create", outcome="ok") == 3
        await client.delete(RELAYS, "b", namespace)

        async def forgotten() -> bool:
            return exports_by_state(op) == {
                "Exported": 2,
                "Pending": 0,
                "Failed": 0,
                "Foreign": 0,
                "Skipped": 0,
            }

        try:
            await eventually(forgotten)
        except AssertionError as e:
            raise AssertionError(
                f"gauge after the relay was deleted: {exports_by_state(op)}"
            ) from e


# ---------------------------------------------------------------- watches
# Guard: wiring `export_mapper`, an export maps to the relay that controls it (whatever
# its name). Here a user restores an old export of the pool from a backup, owner
# reference included: the relay controls it, does not want it, and withdraws it.
async def test_export_the_relay_controls_under_a_name_it_does_not_want_is_withdrawn(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    relay = await exported_pool(client, namespace, mcs)
    stray = await client.create(
        SE,
        export_body(
            namespace,
            f"{POOL}-old-frontend",
            labels={names.DGD_NAME: POOL},
            ownerReferences=[controller_ref(relay)],
        ),
    )
    await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})
    await wait_event_about(client, namespace, "ExportDeleted", stray)
    await second_pass_writes_nothing(mcs, client, namespace)


# Guards: wiring `export_mapper`, an export maps to relay D by its name `<D>-pool-relay`,
# and to every relay whose pool has a frontend Service of its name (`pools_naming_service`),
# even when nobody controls it: a foreign export's deletion must wake the relay.
@pytest.mark.parametrize("name", [RELAY_SVC, FRONTEND_SVC], ids=["relay-service", "frontend"])
async def test_users_export_deleted_lets_the_relay_export_its_own(
    client: Client, namespace: str, mcs: OperatorUnderTest, name: str
) -> None:
    mine = await foreign_beside_pool(client, namespace, mcs, name)
    await client.delete(SE, name, namespace)  # only this deletion can wake the relay

    async def ours() -> dict[str, Any] | None:
        e = await export_obj(client, namespace, name)
        if e and e["metadata"]["uid"] != mine["metadata"]["uid"]:
            return e if e["metadata"].get("ownerReferences") else None
        return None

    created = await eventually(ours)
    assert created["metadata"]["ownerReferences"][0]["name"] == POOL
    await state_becomes(client, namespace, name, "Exported")
    await second_pass_writes_nothing(mcs, client, namespace)


# ---------------------------------------------------------------- independence
# Guard: the plan's needs (pool/plan.py): an export waits only for the write of what
# it points at. The relay Service's export waits for the relay Service; a frontend's
# export (of a Service of Dynamo's) is not held back by a refused relay write.
async def test_a_refused_relay_service_holds_back_its_export_and_nothing_else(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    async with refuse_service_create(control_plane, client, namespace, RELAY_SVC):
        spy = Spy(mcs)
        await make_pool(client, namespace)
        await exports_become(client, namespace, {FRONTEND_SVC})
        assert await absent(client, SERVICES, namespace, RELAY_SVC)

        async def refusal_returned() -> bool:
            return any("denied request" in str(e) for e in spy.errors_of(namespace))

        await eventually(refusal_returned)
        await mcs.settle(timeout=10, quiet=1.0)
        assert await export_names(client, namespace) == {FRONTEND_SVC}, (
            "no export of a Service that does not exist"
        )
        lines = {e["name"]: e for e in (await relay_status(client, namespace, POOL))["exports"]}
        assert (lines[RELAY_SVC]["state"], lines[RELAY_SVC]["reason"]) == ("Pending", "Waiting")
        assert RELAY_SVC in lines[RELAY_SVC]["message"], lines[RELAY_SVC]
    # Lifted: the queue's retries alone create the Service, then its export. The per-key
    # backoff grew while the write was refused (about as long as that lasted).
    await eventually(lambda: _exists(client, SERVICES, namespace, RELAY_SVC), timeout=60)
    await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})
    await state_becomes(client, namespace, FRONTEND_SVC, "Exported")
    await second_pass_writes_nothing(mcs, client, namespace)


async def _exists(client: Client, res: Resource, ns: str, name: str) -> bool:
    return not await absent(client, res, ns, name)


# ---------------------------------------------------------------- the feature-off cleanup
async def exported_by_operator(
    client: Client, cp: ControlPlane, ns: str, names: set[str], **pool: Any
) -> dict[str, Any]:
    """Let an mcs operator export a pool, then stop it; returns the relay."""
    relay = await make_pool(client, ns, **pool)
    async with OperatorUnderTest(cp, config("mcs")) as op:
        await exports_become(client, ns, names)
        await op.settle()
    return relay


# Guard: wiring `is_relay_controller` (kind), used by the feature-off cleanup: our label
# alone does not make an export ours — Dynamo's own operator may label exports its DGD
# controls with the DGD name.
async def test_feature_off_cleanup_leaves_an_export_another_kind_controls(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    await exported_by_operator(client, control_plane, namespace, {RELAY_SVC, FRONTEND_SVC})
    dgd = await client.get(DGDS, POOL, namespace)
    theirs = await client.create(
        SE,
        export_body(
            namespace,
            "dynamos-own",
            labels={names.DGD_NAME: POOL},
            ownerReferences=[controller_ref(dgd)],
        ),
    )
    async with OperatorUnderTest(control_plane, config("")):
        await exports_become(client, namespace, {"dynamos-own"})
    kept = await existing_export(client, namespace, "dynamos-own")
    assert kept["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]


# Guards: cleanup `_withdraw_if_ours`: uid + resourceVersion preconditions, a Conflict
# re-read and decided again, NotFound is done, an export being deleted is left alone.
async def test_feature_off_cleanup_decides_again_on_what_changed_since_its_list(
    client: Client,
    namespace: str,
    control_plane: ControlPlane,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await exported_by_operator(
        client,
        control_plane,
        namespace,
        {RELAY_SVC, FRONTEND_SVC, CHAT_SVC, API_SVC},
        components=[FRONTEND, CHAT, API, WORKER],
    )
    # Held in deletion by an implementation's finalizer before the operator starts.
    await client.merge_patch(SE, API_SVC, {"metadata": {"finalizers": [HOLD]}}, namespace)
    await client.delete(SE, API_SVC, namespace)

    async def taken_over(name: str) -> None:
        await client.merge_patch(SE, name, {"metadata": {"ownerReferences": None}}, namespace)

    async def status_written(name: str) -> None:  # still ours, at a newer resourceVersion
        await client.merge_patch(
            SE, name, {"metadata": {"annotations": {"mcs.example/seen": "yes"}}}, namespace
        )

    async def deleted(name: str) -> None:
        await client.delete(SE, name, namespace)

    meanwhile: dict[str, Callable[[str], Awaitable[None]]] = {
        FRONTEND_SVC: taken_over,
        CHAT_SVC: status_written,
        RELAY_SVC: deleted,
    }
    withdraw = cleanup._withdraw_if_ours

    async def after_the_list(
        c: Client, writes: Any, res: Resource, export: dict[str, Any], *a: Any
    ) -> int:
        meta = export["metadata"]
        if meta["namespace"] == namespace and meta["name"] in meanwhile:
            await meanwhile.pop(meta["name"])(meta["name"])
        return await withdraw(c, writes, res, export, *a)

    monkeypatch.setattr(cleanup, "_withdraw_if_ours", after_the_list)
    try:
        since = control_plane.audit.offset()
        async with OperatorUnderTest(control_plane, config("")) as op:
            assert meanwhile == {}, f"not reached: {sorted(meanwhile)}"
            kept = await export_obj(client, namespace, FRONTEND_SVC)
            assert kept is not None, "an export taken over after the list was deleted"
            assert "ownerReferences" not in kept["metadata"]
            assert await export_obj(client, namespace, CHAT_SVC) is None, (
                "an export still ours after a status write was left behind"
            )
            writes = {
                name: verbs(await export_writes(op, since, namespace, name))
                for name in (FRONTEND_SVC, CHAT_SVC, RELAY_SVC, API_SVC)
            }
        assert writes == {
            FRONTEND_SVC: [("delete", 409)],
            CHAT_SVC: [("delete", 409), ("delete", 200)],
            RELAY_SVC: [("delete", 404)],
            API_SVC: [],
        }
        held = await existing_export(client, namespace, API_SVC)
        assert held["metadata"].get("deletionTimestamp")
    finally:
        await release(client, namespace, API_SVC)


# Guard: operator `cleanup_when_off`, runs only with the feature off.
async def test_restart_with_the_feature_on_keeps_the_exports(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    await exported_by_operator(client, control_plane, namespace, {RELAY_SVC, FRONTEND_SVC})
    before = {e["metadata"]["name"]: e for e in (await client.list(SE, namespace)).items}
    since = control_plane.audit.offset()
    async with OperatorUnderTest(control_plane, config("mcs")) as op:
        await op.settle()
        await second_pass_writes_nothing(op, client, namespace)
        assert await export_writes(op, since, namespace) == []
    after = {e["metadata"]["name"]: e for e in (await client.list(SE, namespace)).items}
    assert {n: e["metadata"]["uid"] for n, e in after.items()} == {
        n: e["metadata"]["uid"] for n, e in before.items()
    }


# Guard: operator `cleanup_when_off`, a namespace-restricted operator cleans up only its
# namespace.
async def test_feature_off_cleanup_of_a_restricted_operator_stays_in_its_namespace(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    with scratch_namespace(control_plane) as other:
        for ns in (namespace, other):
            await make_pool(client, ns)
        async with OperatorUnderTest(control_plane, config("mcs")) as op:
            for ns in (namespace, other):
                await exports_become(client, ns, {RELAY_SVC, FRONTEND_SVC})
            await op.settle()
        cfg = config("", namespace={"restricted": namespace}, leaderElection={"enabled": False})
        async with OperatorUnderTest(control_plane, cfg):
            await exports_become(client, namespace, set())
        assert {e["metadata"]["name"] for e in (await client.list(SE, other)).items} == {
            RELAY_SVC,
            FRONTEND_SVC,
        }


# ---------------------------------------------------------------- status vs a lagging cache
class HeldWatch:
    """Holds the watch lines an informer receives until `flush` (then delivers them in
    order): a watch that lags behind the others, as separate watches may."""

    def __init__(self, informer: Any) -> None:
        self.informer = informer
        self.lines: list[bytes] = []
        self._deliver = informer._handle_line
        informer._handle_line = self.lines.append

    def flush(self) -> None:
        self.informer._handle_line = self._deliver
        for line in self.lines:
            self._deliver(line)
        self.lines.clear()


# Guard: reconcile, the status is written when it differs from what the relay shows.
# Found by the guard-breaking pass (a rare failure of test_publish_exports_relay_and_each_frontend_
# under_its_own_name under load): the comparison is made against the relay cache, which
# may not yet hold the status the previous pass wrote, and status-only updates do not
# requeue the relay, so a line could stay wrong until something else changed. Fixed:
# the reconciler remembers its last status write and the version it was computed from.
async def test_status_follows_an_export_change_while_the_relay_cache_lags(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    await exported_pool(client, namespace, mcs)
    ours = await existing_export(client, namespace, FRONTEND_SVC)
    ref = ours["metadata"]["ownerReferences"]
    await caught_up(mcs, client, namespace)
    held = HeldWatch(mcs.running.caches.relays)
    try:
        # Taken over: the pass writes `Foreign` (its event is held from the cache)...
        await client.merge_patch(
            SE, FRONTEND_SVC, {"metadata": {"ownerReferences": None}}, namespace
        )
        await state_becomes(client, namespace, FRONTEND_SVC, "Foreign")
        await mcs.settle()
        # ...and given back: the next pass computes `Exported` again.
        await client.merge_patch(
            SE, FRONTEND_SVC, {"metadata": {"ownerReferences": ref}}, namespace
        )
        await mcs.settle()
    finally:
        held.flush()
    await mcs.settle()
    assert (await export_states(client, namespace))[FRONTEND_SVC] == "Exported"


# ---------------------------------------------------------------- versions
@pytest.fixture(scope="module")
def alpha_exports_plane() -> Iterator[ControlPlane]:
    """A private control plane that serves ServiceExports only at v1alpha1."""
    assets = resolve()
    crds = [
        relay_crd.crd(),
        dgd_crd("v1beta1"),
        cluster_property_crd(),
        *mcs_crds(assets.mcs_crd_dir, served=("v1alpha1",)),
    ]
    cp = ControlPlane(assets=assets, crds=crds, garbage_collector=False)
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


# Guard: operator `cleanup_when_off`, the cleanup lists and deletes at the version the
# cluster serves (here only v1alpha1, though the feature is off).
async def test_feature_off_cleanup_uses_the_served_version(
    alpha_exports_plane: ControlPlane,
) -> None:
    cp = alpha_exports_plane
    ns = f"t-{uuid.uuid4().hex[:10]}"
    cp.create_namespace(ns)
    se = SE.at_version("v1alpha1")
    async with Client(load_kubeconfig(cp.kubeconfig), user_agent="dpo-tests") as client:
        await make_pool(client, ns)
        async with OperatorUnderTest(cp, config("mcs")) as op:
            await exports_become(client, ns, {RELAY_SVC, FRONTEND_SVC}, se)
            await op.settle()
        since = cp.audit.offset()
        async with OperatorUnderTest(cp, config("")) as op:
            assert op.running.served.serviceexport_served == "v1alpha1"
            await exports_become(client, ns, set(), se)
            writes = await export_writes(op, since, ns)
        assert {(w.verb, w.code, w.raw["objectRef"]["apiVersion"]) for w in writes} == {
            ("delete", 200, "v1alpha1")
        }
        assert await events_for(client, ns, "ExportFailed") == []
