"""Carry out what a pass decided: its Events, each action through the guarded writes,
and the relay's status. It decides nothing.

An action whose needs did not all succeed is skipped (a Service is never deleted before
its export is withdrawn); every other runs whatever the rest did. Each comes to one
result: done, gone, lost (a guard refused: decide again), failed or skipped.

Actions run concurrently as soon as what they need is done, a withdrawal after every
earlier write (what replaces comes first), so a pass takes as many round trips as its
longest chain of needs. The status is a server-side apply of the relay's subresource,
and the relay cache reads the answer until it shows it (`Store.wrote`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from dynamo_pool_operator.api.relay import Relay
from dynamo_pool_operator.pool.model import (
    Action,
    ActionResult,
    Advisory,
    Key,
    Outcome,
    Result,
    Verb,
)
from dynamo_pool_operator.runtime import (
    EventRecorder,
    GuardedWrites,
    Informer,
    LostRace,
    NameTaken,
    errors,
    per_registry,
)
from dynamo_pool_operator.runtime.objects import is_controlled_by

log = logging.getLogger(__name__)

#: The words Events and messages use for each writing verb.
WORDS = {Verb.CREATE: "Create", Verb.APPLY: "Apply", Verb.WITHDRAW: "Delete", Verb.HOLD: "Write"}
#: Verbs that send a write; of them, those that make or change an object.
_SENDS = frozenset({Verb.CREATE, Verb.APPLY, Verb.WITHDRAW})
_MAKES = frozenset({Verb.CREATE, Verb.APPLY})
#: Verbs that send a request: the writes, and a read by name.
_ASKS = _SENDS | {Verb.LOOK}


@per_registry
def write_counter(registry: CollectorRegistry) -> Counter:
    """`dynamo_pool_operator_writes_total{kind,verb,outcome}`: writes of owned objects."""
    return Counter(
        "dynamo_pool_operator_writes_total",
        "Writes of the objects relays own, by kind, verb and outcome (ok, lost: a guard "
        "refused it or the name was taken, error: the API server refused it)",
        ["kind", "verb", "outcome"],
        registry=registry,
    )


def word(action: Action) -> str:
    """The action's verb as Events and messages say it (an export's apply restores
    what someone changed: "Repair")."""
    if action.verb is Verb.APPLY and action.fields:
        return "Repair"
    if action.verb is Verb.LOOK:
        return "Read"
    return WORDS.get(action.verb, action.verb.value)


def waiting_for(action: Action, done: Mapping[Key, ActionResult]) -> ActionResult | None:
    """The SKIPPED result of an action that must not run yet (None: it may run): held, or
    a need did not succeed in this pass (a need the plan lacks is a plan error)."""
    if action.verb is Verb.HOLD:
        return ActionResult(action, Result.SKIPPED, action.cause)
    for key in action.needs:
        need = done.get(key)
        if need is None:
            raise ValueError(f"{action.key} needs {key}, which did not run before it")
        if not (need.action.verb.settles and need.result.succeeded):
            why = need.message or _state(need)
            what = f"{word(need.action).lower()} {need.action.resource.kind} {need.action.name}"
            return ActionResult(action, Result.SKIPPED, f"waits for {what}: {why}")
    return None


def _unsent(action: Action) -> ActionResult | None:
    """DONE for an action that sends nothing (right, someone else's, or being deleted):
    no request, count, Event or coroutine. None: it sends a request."""
    return ActionResult(action, Result.DONE) if action.verb not in _ASKS else None


def _state(result: ActionResult) -> str:
    """Why a need that neither failed nor lost a race did not settle its object."""
    verb = result.action.verb
    if verb is Verb.WAIT:
        return "it is being deleted"
    if verb is Verb.FOREIGN:
        return "it is someone else's"
    return result.result.value.lower()


def related(action: Action, obj: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The action's object as an Event's related object, at the version read."""
    source = obj if obj is not None else action.live
    if source is not None:
        return action.resource.reference(dict(source))
    return {
        "apiVersion": action.resource.api_version,
        "kind": action.resource.kind,
        "namespace": action.namespace,
        "name": action.name,
    }


class Executor:
    def __init__(
        self, writes: GuardedWrites, recorder: EventRecorder, registry: CollectorRegistry
    ) -> None:
        self.writes = writes
        self.recorder = recorder
        self._count = write_counter(registry)

    def announce(self, relay: Relay, advisories: Sequence[Advisory]) -> None:
        """Record each as an Event about the relay (at the version read)."""
        for a in advisories:
            related = dict(a.related) if a.related is not None else None
            self.recorder.emit(relay.reference, related, a.type, a.reason, a.action, a.message)

    async def write_status(
        self, relays: Informer, decided_on: Mapping[str, Any], body: dict[str, Any]
    ) -> None:
        """Apply the status `body`, decided on the cached relay `decided_on`; the relay
        cache reads the answer as the relay until it shows the write."""
        meta = body["metadata"]
        relays.store.writing(meta["namespace"], meta["name"])  # unknown until it answers
        answer = await self.writes.client.apply(
            relays.resource, body, force=True, subresource="status"
        )
        relays.store.wrote(answer, decided_on, relays.as_cached)

    async def run(self, relay: Relay, actions: Sequence[Action]) -> Outcome:
        out = Outcome()
        regarding = relay.reference  # at the version read, as the related objects
        done: dict[Key, ActionResult] = {}
        if sum(1 for a in actions if a.verb in _ASKS) <= 1:
            for action in actions:  # one write at most: nothing to run at once
                result = (
                    waiting_for(action, done)
                    or _unsent(action)
                    or await self._run(relay, regarding, action)
                )
                done[action.key] = result
                out.results.append(result)
            return out
        started: dict[Key, asyncio.Task[ActionResult]] = {}
        for i, action in enumerate(actions):
            missing = [k for k in action.needs if k not in done and k not in started]
            if missing:
                raise ValueError(f"{action.key} needs {missing[0]}, which did not run before it")
            after = [started[k] for k in action.needs if k in started]
            if action.verb is Verb.WITHDRAW:
                after += [started[a.key] for a in actions[:i] if a.verb in _MAKES]
            if action.verb in _ASKS or after:
                started[action.key] = asyncio.create_task(
                    self._after(after, relay, regarding, action, done)
                )
            else:  # writes nothing and waits for nothing: settled here, in order
                blocked = waiting_for(action, done)
                done[action.key] = blocked or await self._run(relay, regarding, action)
        try:
            await asyncio.gather(*started.values())
        except BaseException:
            for task in started.values():
                task.cancel()  # a bug in one: the rest stop too, as in a loop
            await asyncio.gather(*started.values(), return_exceptions=True)
            raise
        out.results.extend(done[a.key] for a in actions)
        return out

    def lost_again(self, relay: Relay, outcome: Outcome, times: int) -> Outcome:
        """`outcome` with each lost race as a failure, with its Warning: the relay lost
        `times` passes in a row, so it is something to see and retry with backoff."""
        regarding = relay.reference
        results = []
        for r in outcome.results:
            if r.result is Result.LOST:
                verb = word(r.action)
                what = (
                    f"{verb.lower()} {r.action.resource.kind} {r.action.name}: lost to a "
                    f"concurrent change in {times} passes in a row (retried): {r.message}"
                )
                self.recorder.emit(
                    regarding, related(r.action), "Warning", r.action.events.failed, verb, what
                )
                r = ActionResult(r.action, Result.FAILED, what, r.error)
            results.append(r)
        return Outcome(results)

    async def _after(
        self,
        after: Sequence[asyncio.Task[ActionResult]],
        relay: Relay,
        regarding: Mapping[str, Any],
        action: Action,
        done: dict[Key, ActionResult],
    ) -> ActionResult:
        if after:
            await asyncio.wait(after)
        result = waiting_for(action, done) or await self._run(relay, regarding, action)
        done[action.key] = result
        return result

    async def _run(
        self, relay: Relay, regarding: Mapping[str, Any], action: Action
    ) -> ActionResult:
        unsent = _unsent(action)
        if unsent is not None:
            return unsent
        kind, verb = action.resource.kind, word(action)
        try:
            result = await self._one(relay, regarding, action)
        except LostRace as e:
            self._count.labels(kind, verb, "lost").inc()
            found = e.found if isinstance(e, NameTaken) else None
            return ActionResult(action, Result.LOST, str(e), e, found=found)
        except errors.ApiError as e:
            if action.verb in _SENDS:
                self._count.labels(kind, verb, "error").inc()
            what = f"{verb.lower()} {kind} {action.name}: {e}"
            self.recorder.emit(
                regarding, related(action), "Warning", action.events.failed, verb, what
            )
            return ActionResult(action, Result.FAILED, what, e)
        if action.verb in WORDS or action.hand_over:
            self._count.labels(kind, verb, "ok").inc()
        return result

    async def _one(
        self, relay: Relay, regarding: Mapping[str, Any], action: Action
    ) -> ActionResult:
        res, where = action.resource, {"namespace": action.namespace, "object": action.name}

        def still_ours(obj: Mapping[str, Any]) -> bool:
            return is_controlled_by(obj, relay.uid)

        if action.verb is Verb.LOOK:
            # The caches may hide it (they watch by label): the next pass decides on it.
            got = await self.writes.read(res, action.namespace, action.name)
            return ActionResult(action, Result.DONE, found=got)
        if action.verb is Verb.CREATE:
            assert action.body is not None
            try:
                made = await self.writes.create(res, action.body)
            except NameTaken as e:
                if action.read_if_taken:
                    # The cache may never show it: the next pass decides on it.
                    e.found = await self.writes.read(res, action.namespace, action.name)
                raise
            log.info("created %s", res.kind, extra=where)
            self._note(
                regarding, action, action.events.created, made, f"created {res.kind} {action.name}"
            )
            return ActionResult(action, Result.DONE)
        live = action.live
        if action.hand_over and live is not None and action.verb is Verb.APPLY:
            # The create's fields stay with the create until an apply needs them.
            live = await self.writes.hand_over(res, live, still_ours=still_ours, fetch=True)
            log.info("handed the create's fields of %s to the apply", res.kind, extra=where)
        if action.verb is Verb.APPLY:
            assert action.body is not None
            assert live is not None
            written = await self.writes.apply(res, action.body, live)
            note = (
                f"restored {', '.join(action.fields)} of {res.kind} {action.name}"
                if action.fields
                else f"applied {res.kind} {action.name}"
            )
            log.info("%s", note, extra=where)
            self._note(regarding, action, action.events.applied, live, note)
            return ActionResult(action, Result.DONE, written=written)
        if action.verb is Verb.WITHDRAW:
            assert live is not None
            if not await self.writes.delete(res, live):
                return ActionResult(action, Result.GONE)
            log.info("withdrew %s", res.kind, extra=where)
            self._note(
                regarding,
                action,
                action.events.withdrawn,
                live,
                f"deleted {res.kind} {action.name}",
            )
            return ActionResult(action, Result.DONE)
        return ActionResult(action, Result.DONE)

    def _note(
        self,
        regarding: Mapping[str, Any],
        action: Action,
        reason: str,
        obj: Mapping[str, Any],
        note: str,
    ) -> None:
        if reason:
            self.recorder.emit(
                regarding, related(action, obj), "Normal", reason, word(action), note
            )
