"""Objects of a relay object's name that the caches do not show (pool/reconciler.py
`Found`): kept as read after a create found the name taken, decided on as if cached
(the cache wins once it shows one; ours only once), read again when due (backoff)
and forgotten once gone. The reconcile asks to look again when the next read is due."""

from __future__ import annotations

from typing import Any

from dynamo_pool_operator.pool.model import Action, ActionResult, EventNames, Outcome, Verb
from dynamo_pool_operator.pool.model import Result as Res
from dynamo_pool_operator.pool.relay.kinds import BY_KIND
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, Resource
from tests.clock import FakeClock
from tests.unit.pool.support import reconciler
from tests.unit.runtime.client.fake import FakeClient

NS, POOL, OBJ, UID = "ns", "p", "p-pool-relay", "relay-uid"
REQUEST = (NS, POOL)


def deployment(owner: str | None, rv: str = "5") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": OBJ, "namespace": NS, "uid": "d", "resourceVersion": rv}
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "x/v1", "kind": "K", "name": "n", "uid": owner, "controller": True}
        ]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {}}


class Server(FakeClient):
    """Answers each read with the next of `answers` (an object, or an error to raise)."""

    def __init__(self, *answers: Any) -> None:
        super().__init__()
        self.answers = list(answers)
        self.reads = 0

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Any:
        self.reads += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def apply(self, res: Resource, body: Any, **kwargs: Any) -> Any:
        return body  # the relay's status


def found(obj: dict[str, Any]) -> Outcome:
    create = Action(Verb.CREATE, DEPLOYMENTS, NS, OBJ, EventNames("F"), body={})
    return Outcome([ActionResult(create, Res.LOST, "the name is taken", found=obj)])


NONE: dict[str, Any] = dict.fromkeys(BY_KIND)
#: Each kind a relay owns: a withdrawal reads each name its cache may hide once.
KINDS = len(BY_KIND)
#: The server's answer to the reads of every kind but the Deployment's: none there.
NONE_ELSE = [errors.NotFound(f"no {kind}") for kind in BY_KIND if kind != "Deployment"]


def uid_of(objects: dict[str, Any], kind: str = "Deployment") -> Any:
    obj = objects[kind]
    return None if obj is None else obj["metadata"]["uid"]


async def test_a_foreign_object_is_decided_on_until_a_read_finds_it_gone() -> None:
    clock = FakeClock()
    server = Server(deployment("someone"), errors.NotFound("gone"))
    r = reconciler(server, clock)
    r._remember_found(REQUEST, found(deployment("someone")))
    for _ in range(2):  # every pass meanwhile: as read, and no read
        assert uid_of(r._with_found(REQUEST, UID, dict(NONE))) == "d"
        await r._read_found_again(REQUEST)
    assert server.reads == 0
    await clock.advance(31)
    await r._read_found_again(REQUEST)  # still there: kept, read again after twice as long
    assert server.reads == 1
    assert r._found[REQUEST]["Deployment"].delay == 60.0
    await clock.advance(59)
    await r._read_found_again(REQUEST)
    assert server.reads == 1
    await clock.advance(2)
    await r._read_found_again(REQUEST)  # gone: forgotten, the next pass creates
    assert server.reads == 2
    assert REQUEST not in r._found
    assert r._with_found(REQUEST, UID, dict(NONE)) == NONE


async def test_the_cache_wins_and_ours_is_decided_on_once() -> None:
    r = reconciler(Server(), FakeClock())
    r._remember_found(REQUEST, found(deployment("someone")))
    cached = {"Deployment": deployment(UID, rv="9"), "Service": None}
    assert r._with_found(REQUEST, UID, cached) == cached
    assert REQUEST not in r._found
    r._remember_found(REQUEST, found(deployment(UID)))
    assert uid_of(r._with_found(REQUEST, UID, dict(NONE))) == "d"  # repaired this pass
    assert r._with_found(REQUEST, UID, dict(NONE)) == NONE


async def test_a_found_object_is_kept_as_the_cache_keeps_it() -> None:
    r = reconciler(Server(), FakeClock())
    r._remember_found(REQUEST, found({**deployment("someone"), "status": {"secret": "x"}}))
    kept = r._with_found(REQUEST, UID, dict(NONE))["Deployment"]
    assert "secret" not in repr(kept)  # the Deployment cache's transform


async def test_a_standing_conflict_asks_for_a_look_when_due_and_a_deleted_relay_forgets() -> None:
    clock = FakeClock()
    # Withdrawn (no DGD): the names of the relay's other kinds, which their caches may
    # hide, are read once.
    r = reconciler(Server(errors.NotFound("no Service"), errors.NotFound("no budget")), clock)
    r.caches.relays.store.put(
        {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "DynamoPoolRelay",
            "metadata": {"name": POOL, "namespace": NS, "uid": UID, "resourceVersion": "1"},
            "spec": {},
        }
    )
    r._remember_found(REQUEST, found(deployment("someone")))
    await clock.advance(10)
    for _ in range(2):  # the second pass is quiet (skipped), and asks all the same
        result = await r.reconcile(REQUEST)
        assert result is not None
        assert result.requeue_after == 20.0
    r.caches.relays.store.delete(NS, POOL)
    assert await r.reconcile(REQUEST) is None  # deleted: forgotten
    assert REQUEST not in r._found


async def test_a_relay_gone_forgets_what_its_creates_found_without_reading_it() -> None:
    clock = FakeClock()
    server = Server(deployment("someone"))
    r = reconciler(server, clock)
    r._remember_found(REQUEST, found(deployment("someone")))
    await clock.advance(31)  # its read is due, but the relay is no longer cached
    assert await r.reconcile(REQUEST) is None
    assert server.reads == 0
    assert REQUEST not in r._found


def relay_obj() -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoPoolRelay",
        "metadata": {"name": POOL, "namespace": NS, "uid": UID, "resourceVersion": "1"},
        "spec": {},
    }


class Recorded(Server):
    """`Server`, recording the deletes it is sent."""

    def __init__(self, *answers: Any) -> None:
        super().__init__(*answers)
        self.deletes: list[tuple[str, dict[str, Any]]] = []

    async def delete(
        self, res: Resource, name: str, namespace: str | None = None, **kw: Any
    ) -> Any:
        self.deletes.append((name, {k: kw[k] for k in ("uid", "resource_version")}))
        return {}


async def test_a_withdrawal_reads_a_hidden_name_once_and_withdraws_ours_the_next_pass() -> None:
    """Withdrawn (no DGD), the caches show no relay object: each name is read once; one
    of ours found hidden (our labels removed) is deleted, as read, by the next pass."""
    server = Recorded(deployment(UID, rv="9"), *NONE_ELSE)
    r = reconciler(server)
    r.caches.relays.store.put(relay_obj())
    first = await r.reconcile(REQUEST)
    assert server.reads == KINDS
    assert first is not None
    assert first.requeue, "ours was found: withdrawn at once, not after a delay"
    await r.reconcile(REQUEST)
    assert server.deletes == [(OBJ, {"uid": "d", "resource_version": "9"})]
    assert server.reads == KINDS, "the names are not read again"
    r.inputs_changed()
    await r.reconcile(REQUEST)
    assert server.reads == KINDS, "a relay that stays withdrawn reads no name again"


async def test_a_name_is_read_again_only_after_its_cache_showed_one_and_lost_it() -> None:
    server = Server(errors.NotFound("no Deployment"), *NONE_ELSE)
    r = reconciler(server)
    r.caches.relays.store.put(relay_obj())
    await r.reconcile(REQUEST)
    assert server.reads == KINDS
    assert r._hidden_unread(REQUEST, dict(NONE)) == frozenset()
    shown = {**NONE, "Deployment": deployment(UID)}
    assert r._hidden_unread(REQUEST, shown) == frozenset()
    # Shown once, then gone from the cache (deleted, or its labels removed): read again.
    assert r._hidden_unread(REQUEST, dict(NONE)) == frozenset({"Deployment"})


async def test_someone_elses_object_found_by_a_withdrawals_read_is_left_alone() -> None:
    server = Recorded(deployment("someone"), *NONE_ELSE)
    r = reconciler(server)
    r.caches.relays.store.put(relay_obj())
    assert await r.reconcile(REQUEST) is None
    r.inputs_changed()
    await r.reconcile(REQUEST)
    assert server.deletes == []
    assert server.reads == KINDS
    assert REQUEST not in r._found


def test_only_a_read_or_a_withdrawal_marks_a_name_as_looked() -> None:
    """A kind is marked looked (its name known to hold none of ours) by a read that found
    none or by a delete of ours; an object left, created or applied marks nothing: were it
    marked, one that the cache hides later would never be read by the withdrawal."""
    r = reconciler(Server())
    for verb in (Verb.NONE, Verb.CREATE, Verb.APPLY, Verb.WAIT, Verb.FOREIGN):
        action = Action(verb, DEPLOYMENTS, NS, OBJ, EventNames("F"), body={})
        assert not r._remember_looked(REQUEST, UID, Outcome([ActionResult(action, Res.DONE)]))
        assert REQUEST not in r._looked, verb
    for verb in (Verb.LOOK, Verb.WITHDRAW):
        action = Action(verb, DEPLOYMENTS, NS, OBJ, EventNames("F"))
        assert not r._remember_looked(REQUEST, UID, Outcome([ActionResult(action, Res.DONE)]))
        assert r._looked[REQUEST] == frozenset({"Deployment"}), verb
        del r._looked[REQUEST]
