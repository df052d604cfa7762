"""The DynamoPoolRelay reconciler: its phases, in order, and nothing else.

1. **Gather** the relay, its DGD, the objects named `<D>-pool-relay` and the exports'
   inputs (the exports that matter, the cluster's ID) from caches.
2. **Plan** (`plan.make_plan`, pure): the decision of the check chain, every owned
   object's action in write order, the advisories.
3. **Announce** the plan's advisories (Warning Events, by the executor).
4. **Execute** (`pool.execute`): each action through the guarded writes. A write
   that lost a race ends the pass without a status write and requeues the relay at
   once (no error); it is decided again from fresh state. A create that finds its name
   taken by an object the caches do not show (they watch the relay objects by label
   selector) reads that object: the next pass decides on it as if cached (ours with
   our labels removed: repaired; anyone else's: `OwnershipConflict`, and it is read
   again after a delay, since no watch says when it goes). A relay that loses
   `LOST_LIMIT` passes in a row (something keeps changing the object, or refuses
   with 409) goes on instead: the lost writes are reported as failed, with a
   Warning and backoff, so its status says what keeps failing.
5. **Report** (`status.report`, pure): the status, whether it changed, the Events of
   its transitions, the failures and when to look again.
6. **Write** the status, only when it changed (the executor).
7. **Announce** the transitions, once their status is written; then every failure is
   raised, so the queue retries the key with backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.dgd import pool_from_object
from dynamo_pool_operator.api.relay import Relay, RelayDefaults, relay_from_object
from dynamo_pool_operator.api.shown import ShownStatus
from dynamo_pool_operator.pool.execute import Executor
from dynamo_pool_operator.pool.exports.feature import PoolExports
from dynamo_pool_operator.pool.exports.plan import ExportRules
from dynamo_pool_operator.pool.model import (
    ExportInputs,
    Outcome,
    Result,
    Snapshot,
    Verb,
)
from dynamo_pool_operator.pool.plan import make_plan
from dynamo_pool_operator.pool.relay.kinds import BY_KIND, RELAY_KINDS
from dynamo_pool_operator.pool.report import report
from dynamo_pool_operator.runtime import (
    Client,
    Clock,
    EventRecorder,
    GuardedWrites,
    Informer,
    NamespaceGoing,
    Request,
    SystemClock,
    errors,
)
from dynamo_pool_operator.runtime import Result as ReconcileResult
from dynamo_pool_operator.runtime.objects import is_controlled_by, record

log = logging.getLogger(__name__)


@dataclass
class RelayCaches:
    """The informers the reconciler reads (never the API server)."""

    relays: Informer
    dgds: Informer
    #: The relay objects' caches, by kind (`relay/kinds.py`, the table they follow).
    objects: dict[str, Informer]

    def of_kind(self, kind: str) -> Informer:
        """The cache of the relay objects of `kind`."""
        return self.objects[kind]

    @property
    def frontend_services(self) -> Informer:
        """Every Service (the relay's own in full, any other as a stub): where the
        frontends' Services are read while exports are on."""
        return next(self.objects[k.kind] for k in RELAY_KINDS if k.frontends)

    def hides(self, kind: str) -> bool:
        """Whether the cache of `kind` may hide a relay object (it watches by label
        selector: one whose labels were removed is not shown)."""
        return self.of_kind(kind).label_selector is not None

    def relay_objects(self, namespace: str, relay: str) -> dict[str, Mapping[str, Any] | None]:
        name = names.relay_name(relay)
        return {kind: cache.store.get(namespace, name) for kind, cache in self.objects.items()}


class ReconcileErrors(errors.Failures):
    """Several writes (or reads) failed in one pass; each is named."""


#: Passes in a row that may lose a race quietly before the losses are reported.
LOST_LIMIT = 3
#: Seconds until an object of a relay object's name the caches do not show (found by a
#: create) is read again, doubling up to the max: no watch sees it go.
FOREIGN_RECHECK = 30.0
FOREIGN_RECHECK_MAX = 120.0


@record
class Found:
    """An object of a relay object's name that the caches do not show, as last read
    (cache-shaped), and when to read it again."""

    obj: Mapping[str, Any]
    recheck_at: datetime
    delay: float


class PoolRelayReconciler:
    def __init__(
        self,
        client: Client,
        caches: RelayCaches,
        *,
        defaults: RelayDefaults,
        default_discovery_backend: str,
        recorder: EventRecorder,
        registry: CollectorRegistry,
        exports: PoolExports | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.caches = caches
        self.defaults = defaults
        self.backend = default_discovery_backend
        self.recorder = recorder
        #: The export feature; None while it is off.
        self.exports = exports
        self.executor = Executor(GuardedWrites(client, names.FIELD_MANAGER), recorder, registry)
        self.clock = clock or SystemClock()
        #: Passes in a row that lost a race, per relay.
        self._lost: dict[Request, int] = {}
        # The hash of the inputs of each relay's last pass that did nothing and asked for
        # no later look (`Snapshot.quiet_key`): a pass on the same is skipped. The hash,
        # not the key: ~800 bytes less a relay; a 64-bit collision costs one skipped
        # pass until the next change.
        self._quiet: dict[Request, int] = {}
        #: Objects of the relay objects' names the caches do not show, per relay and kind
        #: (`Found`): read after a create found the name taken, or by a withdrawal.
        self._found: dict[Request, dict[str, Found]] = {}
        #: The relay objects' kinds, per relay, whose name was read (or object deleted)
        #: since their cache last showed one (`Snapshot.hidden_unread`).
        self._looked: dict[Request, frozenset[str]] = {}
        self.foreign_recheck = FOREIGN_RECHECK
        self.foreign_recheck_max = FOREIGN_RECHECK_MAX

    def gather(self, request: Request) -> Snapshot | None:
        """The pass's snapshot of the relay `request` names; None when it is gone. The
        relay reads as our own last status write while the cache does not show it yet."""
        relays = self.caches.relays.store
        cached = relays.get(*request)
        if cached is None:
            return None
        relay_obj = relays.latest(*request) or cached
        relay = relay_from_object(relay_obj, self.defaults)
        shown = relay_obj.get("status")  # read by the cache (`api.shown.ShownStatus`)
        dgd_obj = self.caches.dgds.store.get(relay.namespace, relay.name)
        pool = pool_from_object(dgd_obj) if dgd_obj is not None else None
        inputs = self.exports.gather(relay, pool) if self.exports is not None else ExportInputs()
        objects = self._with_found(
            (relay.namespace, relay.name),
            relay.uid,
            self.caches.relay_objects(relay.namespace, relay.name),
        )
        hidden_unread = self._hidden_unread((relay.namespace, relay.name), objects)
        return Snapshot(
            relay=relay,
            pool=pool,
            relay_objects=objects,
            exports=inputs.exports,
            cluster_id=inputs.cluster_id,
            unreadable=inputs.unreadable,
            exports_unavailable=inputs.exports_unavailable,
            shown_status=shown if isinstance(shown, ShownStatus | Mapping) else None,
            own_status_unseen=relays.shows_own_write(*request),
            decided_on=cached,
            read_at=self.clock.now(),
            services=inputs.services,
            component_deployments=inputs.component_deployments,
            pool_unreadable=self._dgd_unreadable(relay, dgd_obj),
            hidden_unread=hidden_unread,
        )

    def _hidden_unread(
        self, request: Request, objects: Mapping[str, Mapping[str, Any] | None]
    ) -> frozenset[str]:
        """The kinds whose cache may hide an object of the relay object's name, shows
        none, and whose name was not read since it last showed one."""
        looked = self._looked.get(request)
        if looked:
            shown = frozenset(k for k, obj in objects.items() if obj is not None)
            if looked & shown:  # shown again: it may be hidden again later
                looked = looked - shown
                if looked:
                    self._looked[request] = looked
                else:
                    del self._looked[request]
        return frozenset(
            kind
            for kind, obj in objects.items()
            if obj is None and (not looked or kind not in looked) and self.caches.hides(kind)
        )

    def _export_rules(self) -> ExportRules | None:
        return self.exports.rules if self.exports is not None else None

    def _dgd_unreadable(self, relay: Relay, dgd: Mapping[str, Any] | None) -> str:
        """Why the relay's DGD cannot be read, when it exists, cannot be decoded and no
        readable version of it is cached; else ""."""
        bad = None if dgd is not None else self.caches.dgds.undecodable(relay.namespace, relay.name)
        return f"at resourceVersion {bad.resource_version or '?'}, {bad.error}" if bad else ""

    def inputs_changed(self) -> None:
        """Something every pass reads but no snapshot shows changed (the export API's
        version, the DGD cache): forget every quiet pass. `Controller.enqueue_all` calls it."""
        self._quiet.clear()

    async def reconcile(self, request: Request) -> ReconcileResult | None:
        result = await self._reconcile(request)
        found = self._found.get(request)
        if not found:
            return result
        # A foreign object only read, not watched: look again when it is due.
        due = min(f.recheck_at for f in found.values())
        after = max(0.0, (due - self.clock.now()).total_seconds())
        if result is None:
            return ReconcileResult(requeue_after=after)
        if result.requeue or (result.requeue_after is not None and result.requeue_after <= after):
            return result
        return ReconcileResult(requeue_after=after)

    async def _reconcile(self, request: Request) -> ReconcileResult | None:
        if request in self._found and self.caches.relays.store.get(*request) is not None:
            await self._read_found_again(request)  # a relay gone forgets them unread
        snapshot = self.gather(request)
        if snapshot is None:
            self._lost.pop(request, None)
            self._quiet.pop(request, None)
            self._found.pop(request, None)
            self._looked.pop(request, None)
            return None  # deleted: the garbage collector removes what it controlled
        key = snapshot.quiet_key()
        inputs = None if key is None else hash(key)
        if inputs is not None and self._quiet.get(request) == inputs:
            # The inputs of a pass that did nothing: it would decide the same (its plan
            # and report are two thirds of a pass).
            return None
        self._quiet.pop(request, None)
        plan = make_plan(snapshot, self._export_rules(), default_discovery_backend=self.backend)
        self.executor.announce(snapshot.relay, plan.advisories)
        outcome = await self.executor.run(snapshot.relay, plan.actions)
        self._remember_found(request, outcome)
        hidden_ours = self._remember_looked(request, snapshot.relay.uid, outcome)
        if outcome.lost:
            # A namespace being deleted is no race to report: the relay goes with it; a
            # name found taken by an object the caches do not show is decided next pass.
            going = all(
                isinstance(r.error, NamespaceGoing) or r.found is not None
                for r in outcome.results
                if r.result is Result.LOST
            )
            times = self._lost[request] = self._lost.get(request, 0) + (0 if going else 1)
            if going or times < LOST_LIMIT:
                log.debug("lost a race: %s", "; ".join(outcome.lost), extra=_where(request))
                # No status from a pass that acted on stale state: the retry, from fresh
                # state, writes the right one (a failure of this pass is found again).
                return ReconcileResult(requeue=True)
            outcome = self.executor.lost_again(snapshot.relay, outcome, times)
        else:
            self._lost.pop(request, None)
        now = self.clock.now()
        said = report(snapshot, plan, outcome, self._export_rules(), now=now)
        failures = list(said.failures)
        if said.changed:
            try:
                await self.executor.write_status(self.caches.relays, snapshot.decided_on, said.body)
            except errors.NotFound:
                # The relay was deleted since the cache read (its namespace is going,
                # say): its deletion event brings the pass that forgets it.
                log.debug("relay gone before its status was written", extra=_where(request))
                return None
            except errors.ApiError as e:
                failures.append(e)
            else:
                self.executor.announce(snapshot.relay, said.transitions)
        if failures:
            raise failures[0] if len(failures) == 1 else ReconcileErrors(failures)
        if hidden_ours:
            return ReconcileResult(requeue=True)  # withdrawn by the next pass, at once
        if (
            inputs is not None
            and not said.changed
            and said.recheck_at is None
            and not plan.advisories
            and all(a.verb in _QUIET_VERBS and not a.hand_over for a in plan.actions)
        ):
            self._quiet[request] = inputs
        if said.recheck_at is not None:
            # A grace period or hold ends with no event to say so: look again then.
            return ReconcileResult(requeue_after=max(0.0, (said.recheck_at - now).total_seconds()))
        return None

    def _with_found(
        self,
        request: Request,
        uid: str,
        cached: dict[str, Mapping[str, Any] | None],
    ) -> dict[str, Mapping[str, Any] | None]:
        """The relay objects as cached, and where the cache shows none, the object of that
        name found by a create. An object of ours found is decided on once."""
        found = self._found.get(request)
        if not found:
            return cached
        out = dict(cached)
        for kind, f in list(found.items()):
            if out.get(kind) is not None:
                del found[kind]
                continue
            out[kind] = f.obj
            if is_controlled_by(f.obj, uid):
                del found[kind]
        if not found:
            del self._found[request]
        return out

    def _remember_looked(self, request: Request, uid: str, outcome: Outcome) -> bool:
        """Mark each relay object kind whose name was read and showed none of ours, or
        whose object this pass deleted; keep one of ours a read found hidden, for the next
        pass to withdraw. True: one was found."""
        looked = self._looked.get(request, frozenset())
        hidden_ours = False
        for r in outcome.results:
            kind, verb = r.action.resource.kind, r.action.verb
            if verb not in _LOOKED_VERBS or not r.result.succeeded or kind not in _RELAY_KINDS:
                continue
            if verb is Verb.LOOK and r.found is not None and is_controlled_by(r.found, uid):
                self._keep_found(request, kind, r.found, self.foreign_recheck)
                hidden_ours = True
            else:
                looked |= {kind}
        if looked:
            self._looked[request] = looked
        return hidden_ours

    def _keep_found(
        self, request: Request, kind: str, obj: Mapping[str, Any], delay: float
    ) -> None:
        """Keep `obj`, read by name, as the cache would keep it, to be read again after `delay`."""
        cached = self.caches.of_kind(kind).as_cached(dict(obj))
        due = self.clock.now() + timedelta(seconds=delay)
        self._found.setdefault(request, {})[kind] = Found(cached, due, delay)

    def _remember_found(self, request: Request, outcome: Outcome) -> None:
        """Keep each object a create found of its name."""
        for r in outcome.results:
            if r.found is not None and r.action.verb is not Verb.LOOK:
                self._keep_found(request, r.action.resource.kind, r.found, self.foreign_recheck)

    async def _read_found_again(self, request: Request) -> None:
        """Read again each found object that is due: gone, it is forgotten (the next
        create tells); still there, it is kept as read and read again later (backoff)."""
        found = self._found.get(request)
        if not found:
            return
        now = self.clock.now()
        for kind, f in list(found.items()):
            if f.recheck_at > now:
                continue
            delay = min(f.delay * 2, self.foreign_recheck_max)
            meta = f.obj.get("metadata") or {}
            try:
                got = await self.executor.writes.read(
                    BY_KIND[kind].resource, str(meta.get("namespace")), str(meta.get("name"))
                )
            except errors.ApiError as e:
                log.warning("cannot read %s again: %s", kind, e, extra=_where(request))
                found[kind] = Found(f.obj, now + timedelta(seconds=delay), delay)
                continue
            if got is None:
                del found[kind]
            else:
                self._keep_found(request, kind, got, delay)
        if not found:
            del self._found[request]


#: Actions that write nothing and wait for nothing.
_QUIET_VERBS = frozenset({Verb.NONE, Verb.FOREIGN})
#: The relay's own objects' kinds (not its exports).
_RELAY_KINDS = frozenset(BY_KIND)
#: The verbs that say whether an object of the name is left (`_remember_looked`).
_LOOKED_VERBS = (Verb.LOOK, Verb.WITHDRAW)


def _where(request: Request) -> dict[str, str]:
    return {"namespace": request[0], "object": request[1]}
