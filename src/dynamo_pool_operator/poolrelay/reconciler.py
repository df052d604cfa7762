"""The DynamoPoolRelay reconciler: gather -> plan -> execute -> status.

1. **Gather** the relay, its DGD, the objects named `<D>-pool-relay` and each
   contributor's part (the exports that matter, the cluster's ID) from caches.
2. **Plan** (`plan.make_plan`, pure): the decision of the check chain, every owned
   object's action in write order, the advisories.
3. **Execute** (`pipeline.execute`): each action through the guarded writes, each
   whatever the others did. A write that lost a race ends the pass without a
   status write and requeues the relay at once (no error); it is decided again
   from fresh state.
4. **Status** (`status.desired_status`, pure), written last and only when it
   changed; then every failed write is raised, so the queue retries the key with
   backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry

from ..api import labels, names
from ..api.dgd import pool_from_object
from ..api.mcs import ClusterID
from ..api.relay import RelayDefaults, relay_from_object
from ..pipeline.execute import Executor
from ..pipeline.model import (
    ConditionView,
    Contributor,
    Outcome,
    Result,
    Snapshot,
    StatusLine,
    Verb,
)
from ..runtime import errors
from ..runtime.client import Client
from ..runtime.clock import Clock, SystemClock
from ..runtime.controller import Request
from ..runtime.controller import Result as ReconcileResult
from ..runtime.events import EventRecorder
from ..runtime.guarded import GuardedWrites
from ..runtime.informer import Informer
from ..runtime.resources import DEPLOYMENTS, Resource
from .availability import availability
from .plan import Plan, make_plan
from .status import (
    PUBLISHED,
    READY,
    RELAY_AVAILABLE,
    changed_conditions,
    desired_status,
    status_apply,
    status_changed,
    warned,
)


def _reference(res: Resource, obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return res.reference(dict(obj)) if obj is not None else None


def _lines_by_name(status: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    """`status.exports[]` by name (entries that are not objects with a name skipped)."""
    lines = (status or {}).get("exports")
    if not isinstance(lines, list):
        return {}
    return {
        str(line["name"]): line
        for line in lines
        if isinstance(line, Mapping) and isinstance(line.get("name"), str)
    }


log = logging.getLogger(__name__)


@dataclass
class RelayCaches:
    """The informers the reconciler reads (never the API server)."""

    relays: Informer
    dgds: Informer
    deployments: Informer
    services: Informer

    def relay_objects(self, namespace: str, relay: str) -> dict[str, Mapping[str, Any] | None]:
        name = names.relay_name(relay)
        return {
            "Deployment": self.deployments.store.get(namespace, name),
            "Service": self.services.store.get(namespace, name),
        }


class ReconcileErrors(errors.Failures):
    """Several writes (or reads) failed in one pass; each is named."""


def refused_writes(plan: Plan, outcome: Outcome) -> str:
    """The relay objects' refused writes, for the Ready condition ("" when none)."""
    return "; ".join(r.message for r in outcome.of(plan.relay_actions) if r.result is Result.FAILED)


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
        contributors: Sequence[Contributor] = (),
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.caches = caches
        self.defaults = defaults
        self.default_discovery_backend = default_discovery_backend
        self.recorder = recorder
        self.contributors = tuple(contributors)
        self.executor = Executor(GuardedWrites(client, labels.FIELD_MANAGER), recorder, registry)
        self.clock = clock or SystemClock()
        # Our last status write per relay: (uid, resourceVersion it was computed from,
        # status written). The relay cache may not hold that write yet when the next
        # pass runs; comparing with the stale cached status would then skip a needed
        # write (a status line would stay wrong).
        self._written: dict[Request, tuple[str, str, Mapping[str, Any]]] = {}

    def gather(self, relay_obj: Mapping[str, Any], shown: Mapping[str, Any] | None) -> Snapshot:
        """The pass's snapshot; `shown`: the relay's status as the server shows it."""
        relay = relay_from_object(relay_obj, self.defaults)
        dgd_obj = self.caches.dgds.store.get(relay.namespace, relay.name)
        pool = pool_from_object(dgd_obj) if dgd_obj is not None else None
        exports: dict[str, Mapping[str, Any]] = {}
        cluster_id = ClusterID()
        unreadable: tuple[Exception, ...] = ()
        unavailable = ""
        for contributor in self.contributors:
            part = contributor.gather(relay, pool)
            exports.update(part.exports)
            cluster_id = part.cluster_id if part.cluster_id.checked else cluster_id
            unreadable += part.unreadable
            unavailable = unavailable or part.exports_unavailable
        return Snapshot(
            relay,
            pool,
            self.caches.relay_objects(relay.namespace, relay.name),
            exports,
            cluster_id,
            unreadable,
            unavailable,
            _lines_by_name(shown),
            self.clock.now(),
        )

    async def reconcile(self, request: Request) -> ReconcileResult | None:
        namespace, name = request
        where = {"namespace": namespace, "object": name}
        relay_obj = self.caches.relays.store.get(namespace, name)
        if relay_obj is None:
            self._written.pop(request, None)
            for contributor in self.contributors:
                contributor.forget(namespace, name)
            return None  # deleted: the garbage collector removes what it controlled
        current = self._shown_status(request, relay_obj)
        shown = current if isinstance(current, Mapping) else None
        snapshot = self.gather(relay_obj, shown)
        plan = make_plan(
            snapshot, self.contributors, default_discovery_backend=self.default_discovery_backend
        )
        relay, decision = snapshot.relay, plan.decision
        log.debug("decided %s", decision.reason, extra={**where, "reason": decision.reason})
        for w in plan.advisories:
            self.recorder.emit(
                relay.reference(), dict(w.related), "Warning", w.reason, w.action, w.message
            )
        outcome = await self.executor.run(relay, plan.actions)
        if outcome.lost:
            for race in outcome.lost:
                log.debug("lost a race: %s", race, extra=where)
            # No status from a pass that acted on stale state: the retry, from fresh
            # state, writes the right one (a failure of this pass is found again).
            return ReconcileResult(requeue=True)

        failures: list[Exception] = list(outcome.failures)
        if decision.publish:
            failures = list(snapshot.unreadable) + failures
        now = self.clock.now()
        lines: list[StatusLine] = []
        exported: ConditionView | None = None
        recheck: list[datetime] = []
        for contributor, contribution in zip(self.contributors, plan.contributions, strict=True):
            report = contributor.report(
                snapshot, decision, contribution, outcome.of(contribution.actions), now=now
            )
            lines += report.lines
            if report.condition is not None:
                exported = report.condition
                if report.condition.recheck_at is not None:
                    recheck.append(report.condition.recheck_at)
        created = frozenset(
            r.action.resource.kind
            for r in outcome.of(plan.relay_actions)
            if r.action.verb is Verb.CREATE and r.result is Result.DONE
        )
        available = availability(
            snapshot.relay_objects.get("Deployment"),
            snapshot.relay_objects.get("Service"),
            published=decision.publish,
            refused=refused_writes(plan, outcome),
            name=names.relay_name(relay.name),
            created=created,
            replicas=relay.replicas,
        )
        status = desired_status(
            relay,
            shown,
            decision,
            cluster_id=snapshot.cluster_id.effective(relay.cluster_id),
            exports=lines,
            available=available,
            exported=exported,
            now=now,
        )
        if status_changed(shown, status):
            try:
                await self.client.apply(
                    self.caches.relays.resource,
                    status_apply(relay, status),
                    force=True,
                    subresource="status",
                )
            except errors.NotFound:
                # The relay was deleted since the cache read (its namespace is going,
                # say): its deletion event brings the pass that forgets it.
                self._written.pop(request, None)
                log.debug("relay gone before its status was written", extra=where)
                return None
            except errors.ApiError as e:
                self._written.pop(request, None)  # unknown what the server shows now
                failures.append(e)
            else:
                read_at = str(relay_obj.get("metadata", {}).get("resourceVersion", ""))
                self._written[request] = (relay.uid, read_at, status)
                self._record_transitions(snapshot, shown, status, exported)
        if failures:
            raise failures[0] if len(failures) == 1 else ReconcileErrors(failures)
        if recheck:
            # A grace period ends (an export with no condition becomes "unconfirmed"):
            # no event will say so, so look again then.
            return ReconcileResult(requeue_after=max(0.0, (min(recheck) - now).total_seconds()))
        return None

    def _record_transitions(
        self,
        snapshot: Snapshot,
        shown: Mapping[str, Any] | None,
        status: Mapping[str, Any],
        exported: ConditionView | None,
    ) -> None:
        """A Warning for each condition turning False with a new reason (a refused write
        has its own Warning already; a withdrawn pool's parts say so once, on
        Published), a Normal one when the pool becomes Ready. One series per cause."""
        relay, pool = snapshot.relay, snapshot.pool
        about: dict[str, Mapping[str, Any] | None] = {
            PUBLISHED: pool.reference() if pool is not None else None,
            RELAY_AVAILABLE: _reference(DEPLOYMENTS, snapshot.relay_objects.get("Deployment")),
        }
        if exported is not None:
            about[exported.type] = exported.related
        for c in changed_conditions(shown, status):
            if c["type"] == READY:
                if c["status"] == "True":
                    self.recorder.emit(
                        relay.reference(), None, "Normal", "PoolReady", "Ready", c["message"]
                    )
                continue
            if not warned(c):
                continue
            self.recorder.emit(
                relay.reference(),
                about.get(c["type"]),
                "Warning",
                c["reason"],
                c["type"],
                c["message"],
            )

    def _shown_status(self, request: Request, relay_obj: Mapping[str, Any]) -> Any:
        """The status the server shows: the cached one, unless the cache still holds the
        very version our last status write was computed from (then: what we wrote)."""
        cached = relay_obj.get("status")
        last = self._written.get(request)
        meta = relay_obj.get("metadata", {})
        read = (meta.get("uid"), meta.get("resourceVersion"))
        if last is not None and (last[0], last[1]) == read:
            return last[2]
        return cached
