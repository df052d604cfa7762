"""Optional caches: the operator runs without them, and says so while they are missing.

An optional cache (the ClusterProperty: each relay reports what it cannot check) must
not gate `/readyz`, or a lasting Forbidden would hold the pod NotReady and stall every
rollout. Instead `DegradedChecks` sets `dynamo_pool_operator_check_degraded{check}` to 1
while it has not synced past a grace period (0 from the start, so an alert can tell
healthy from unreported), and logs when it degrades and recovers.
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CollectorRegistry, Gauge

from dynamo_pool_operator.runtime.cache.informer import Informer
from dynamo_pool_operator.runtime.registry import per_registry

log = logging.getLogger(__name__)

#: How long an optional cache may take to sync before its check is degraded (as long as
#: the controller waits for it).
DEFAULT_GRACE = 10.0


@per_registry
def _gauge(registry: CollectorRegistry) -> Gauge:
    return Gauge(
        "dynamo_pool_operator_check_degraded",
        "1 while the cache of an optional check (clusterID: the ClusterProperty "
        "cluster.clusterset.k8s.io) cannot be read; readiness does not wait for it",
        ["check"],
        registry=registry,
    )


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
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._started = False

    def is_optional(self, informer: Informer) -> bool:
        return any(informer is i for i in self.caches.values())

    def start(self) -> None:
        """Start watching (needs a running event loop; a second call does nothing)."""
        if self._started:
            return
        self._started = True
        for check, informer in self.caches.items():
            self._spawn(check, informer)

    def watch(self, check: str, informer: Informer) -> None:
        """Add (or replace) the cache of `check`, as its API came to be served."""
        self._drop(check)
        self.caches[check] = informer
        self._gauge.labels(check).set(0)
        if self._started:
            self._spawn(check, informer)

    def unwatch(self, check: str) -> None:
        """The check is off (its API is no longer served): not degraded, just off."""
        self._drop(check)
        self.caches.pop(check, None)
        self._gauge.labels(check).set(0)

    def _spawn(self, check: str, informer: Informer) -> None:
        self._tasks[check] = asyncio.create_task(
            self._watch(check, informer), name=f"check {check}"
        )

    def _drop(self, check: str) -> None:
        task = self._tasks.pop(check, None)
        if task is not None:
            task.cancel()

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
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
