"""Optional caches: the operator runs without them, and says so while they are missing.

A cache is optional when the operator does its job without it and reports, per object,
what it could not check (the ClusterProperty of the cluster ID check: each relay gets
`ExportFailed` while it is unreadable). Such a cache must not gate `/readyz`: a read
that keeps failing (Forbidden, say) would hold the pod NotReady forever, and stall
`helm --wait` and every rollout with it. Instead each optional cache names a check,
and `DegradedChecks` reports that check as degraded while the cache has not synced:

- the gauge `dynamo_pool_operator_check_degraded{check}` is 1, else 0 (the series
  exists from the start, so an alert can tell "healthy" from "not reported");
- one warning when the check degrades (after a grace period that a normal start
  fills well within), one info line when it recovers.
"""

from __future__ import annotations

import asyncio
import logging
import weakref

from prometheus_client import CollectorRegistry, Gauge

from .informer import Informer

log = logging.getLogger(__name__)

#: How long an optional cache may take to sync at start before its check is degraded
#: (as long as the controller waits for it before its first reconcile).
DEFAULT_GRACE = 10.0


def _gauge(registry: CollectorRegistry) -> Gauge:
    found = _GAUGES.get(registry)
    if found is None:
        found = _GAUGES[registry] = Gauge(
            "dynamo_pool_operator_check_degraded",
            "1 while the cache of an optional check (clusterID: the ClusterProperty "
            "cluster.clusterset.k8s.io) cannot be read; readiness does not wait for it",
            ["check"],
            registry=registry,
        )
    return found


_GAUGES: weakref.WeakKeyDictionary[CollectorRegistry, Gauge] = weakref.WeakKeyDictionary()


class DegradedChecks:
    """Watches optional caches, by the name of the check each one serves."""

    def __init__(
        self,
        caches: dict[str, Informer],
        registry: CollectorRegistry,
        *,
        grace: float = DEFAULT_GRACE,
    ) -> None:
        self.caches = dict(caches)
        self.grace = grace
        self._gauge = _gauge(registry)
        for check in self.caches:
            self._gauge.labels(check).set(0)
        self._tasks: list[asyncio.Task[None]] = []

    def is_optional(self, informer: Informer) -> bool:
        return any(informer is i for i in self.caches.values())

    def start(self) -> None:
        """Start watching (needs a running event loop; a second call does nothing)."""
        if self._tasks:
            return
        self._tasks = [
            asyncio.create_task(self._watch(check, informer), name=f"check {check}")
            for check, informer in self.caches.items()
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def _watch(self, check: str, informer: Informer) -> None:
        if await informer.wait_synced(self.grace) or not informer.running:
            return  # synced, or stopped first: nothing to report
        self._gauge.labels(check).set(1)
        log.warning(
            "check %s is degraded: cache %s has not synced after %.0fs (the informer's "
            "warnings say why, e.g. Forbidden); /readyz does not wait for it, and each "
            "object it concerns reports the failure until it syncs",
            check,
            informer.description,
            self.grace,
        )
        if await informer.wait_synced(None):
            self._gauge.labels(check).set(0)
            log.info("check %s recovered: cache %s synced", check, informer.description)
