"""The export step of the relay reconciler: read caches, plan, write, report (SPEC §4).

Called after the relay's own objects, whatever their writes did. Reads only
caches: the exports of the relay's namespace (by name, and by controller UID),
and the cluster's ID property. A ClusterProperty cache that has not synced
(e.g. Forbidden) is a failed read: `ExportFailed`, retried — never taken for
"no property".
"""

from __future__ import annotations

import logging
import weakref
from collections import Counter as Tally
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Gauge

from ..api.dgd import Pool
from ..api.relay import Relay
from ..features import ABOUT_GROUP
from ..poolrelay.decide import Decision
from ..poolrelay.reconcile import ExportOutcome
from ..runtime import errors
from ..runtime.client import Client
from ..runtime.controller import Request
from ..runtime.events import EventRecorder
from ..runtime.informer import Informer
from ..runtime.resources import Resource
from ..runtime.store import CONTROLLER_UID_INDEX
from .execute import Executor
from .plan import CLUSTER_ID_PROPERTY, ClusterID, Warn, plan, relevant_exports

log = logging.getLogger(__name__)

WARNING_ACTIONS = {Warn.CLUSTER_ID_MISMATCH: "CheckClusterID"}


class ClusterIDUnreadable(errors.Reported):
    """The ClusterProperty cache is not synced: the cluster ID cannot be checked."""


@dataclass
class ExportCaches:
    exports: Informer
    #: None when the cluster ID check is off (karmada, or the About API not served).
    cluster_properties: Informer | None = None


class _StateGauge:
    """`dynamo_pool_operator_exports{state}`: exports by state across all relays."""

    _made: weakref.WeakKeyDictionary[CollectorRegistry, Gauge] = weakref.WeakKeyDictionary()

    def __init__(self, registry: CollectorRegistry) -> None:
        gauge = self._made.get(registry)
        if gauge is None:
            gauge = self._made[registry] = Gauge(
                "dynamo_pool_operator_exports",
                "ServiceExports the pools want, by state (Exported, Pending, Failed, "
                "Foreign, Skipped)",
                ["state"],
                registry=registry,
            )
        self.gauge = gauge
        self.by_relay: dict[Request, Tally[str]] = {}

    def update(self, relay: Request, states: list[str]) -> None:
        before = self.by_relay.get(relay, Tally())
        after = Tally(states)
        if after:
            self.by_relay[relay] = after
        else:
            self.by_relay.pop(relay, None)
        for state in set(before) | set(after):
            self.gauge.labels(state).inc(after[state] - before[state])


class PoolExports:
    """The `ExportStep` for an enabled MCS implementation."""

    def __init__(
        self,
        client: Client,
        caches: ExportCaches,
        *,
        resource: Resource,
        implementation: str,
        about_version: str | None,
        recorder: EventRecorder,
        registry: CollectorRegistry,
    ) -> None:
        self.caches = caches
        self.implementation = implementation
        self.about_version = f"{ABOUT_GROUP}/{about_version}" if about_version else ""
        self.recorder = recorder
        self.executor = Executor(client, resource, recorder, registry)
        self._states = _StateGauge(registry)

    def read_cluster_id(self, relay: Relay) -> ClusterID:
        """The cluster's ID property as the cluster ID check and the effective cluster ID
        need it: unchecked with karmada or without the About API; raises (and records
        `ExportFailed` about the property) when its cache cannot be read."""
        informer = self.caches.cluster_properties
        if informer is None:
            return ClusterID()
        if not informer.has_synced:
            e = ClusterIDUnreadable(
                f"cannot read ClusterProperty {CLUSTER_ID_PROPERTY}: its cache has not synced "
                "(see the operator log: is the ClusterProperty reader role bound?)"
            )
            related = ClusterID(api_version=self.about_version).reference()
            self.recorder.emit(
                relay.reference(), related, "Warning", "ExportFailed", "ReadClusterID", str(e)
            )
            raise e
        return ClusterID(True, informer.store.get("", CLUSTER_ID_PROPERTY), self.about_version)

    async def reconcile(
        self, relay: Relay, pool: Pool | None, decision: Decision, cluster_id: ClusterID
    ) -> ExportOutcome:
        regarding = relay.reference()  # at the version read, as the related objects
        store = self.caches.exports.store
        exports = relevant_exports(
            relay,
            pool,
            lambda name: store.get(relay.namespace, name),
            store.by_index(CONTROLLER_UID_INDEX, relay.uid) if relay.uid else [],
        )
        the_plan = plan(
            relay,
            decision,
            pool,
            exports,
            implementation=self.implementation,
            cluster_id=cluster_id,
        )
        for w in the_plan.warnings:
            self.recorder.emit(
                regarding,
                dict(w.related),
                "Warning",
                w.reason.value,
                WARNING_ACTIONS.get(w.reason, "Export"),
                w.message,
            )
        outcome = await self.executor.run(relay, the_plan)
        if not outcome.lost:  # a lost race is re-planned at once: keep the last tally
            self._states.update((relay.namespace, relay.name), [s.state for s in outcome.statuses])
        return ExportOutcome(exports=outcome.statuses, errors=outcome.errors, lost=outcome.lost)

    def forget(self, request: Request) -> None:
        """The relay is gone: its exports leave the state gauge (GC deletes them)."""
        self._states.update(request, [])
