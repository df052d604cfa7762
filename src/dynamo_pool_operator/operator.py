"""The operator, assembled: one function wires caches, controllers, events and exports.

The process, `dev`, the integration tests and the benchmark all build it here, so the
tests exercise the wiring that ships. `Operator.follow_apis` acts on each change the
rediscovery finds: the DGD cache and the export feature's caches follow their APIs
(made before broken), the feature-off cleanup runs when the ServiceExport API appears.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from dynamo_pool_operator.api import dgd as dgd_api
from dynamo_pool_operator.api.mcs import Implementation, serviceexports
from dynamo_pool_operator.api.relay import RelayDefaults
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.pool import controller as relay_controller
from dynamo_pool_operator.pool import status_metrics as relay_metrics
from dynamo_pool_operator.pool.exports.apis import ExportApis
from dynamo_pool_operator.pool.exports.cleanup import withdraw_leftover_exports
from dynamo_pool_operator.pool.exports.feature import ExportCaches, FrontendCaches, PoolExports
from dynamo_pool_operator.pool.exports.plan import EXPORT_EVENTS
from dynamo_pool_operator.pool.reconciler import PoolRelayReconciler, RelayCaches
from dynamo_pool_operator.runtime import (
    REGISTRY,
    BackgroundWrites,
    ChangesFirst,
    Client,
    Clock,
    Controller,
    DegradedChecks,
    EventRecorder,
    ExponentialBackoff,
    FollowedCache,
    Informer,
    Rediscovery,
    SharedInformers,
    SystemClock,
    by_namespace,
    per_registry,
)
from dynamo_pool_operator.runtime.objects import Meta
from dynamo_pool_operator.served_apis import ServedApis, rediscover_served_apis, transitions

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "nvidia.com/dynamo-pool-operator"
#: The feature-off cleanup's retry backoff: 0.5 s doubling to 5 minutes.
CLEANUP_RETRY_BASE = 0.5
CLEANUP_RETRY_CAP = 300.0


@per_registry
def _cleanup_failures(registry: CollectorRegistry) -> Counter:
    return Counter(
        "dynamo_pool_operator_export_cleanup_failures_total",
        "Refused lists and deletes of the feature-off ServiceExport cleanup (each is "
        "retried with backoff)",
        registry=registry,
    )


@dataclass
class Operator:
    """Everything one operator process runs, ready to `start`."""

    client: Client
    config: OperatorConfiguration
    served: ServedApis
    informers: SharedInformers
    caches: RelayCaches
    recorder: EventRecorder
    reconciler: PoolRelayReconciler
    controller: Controller
    #: Optional caches, by the check they serve: they never gate readiness.
    checks: DegradedChecks
    #: `dynamo_pool_operator_export_cleanup_failures_total`: refused cleanup writes/lists.
    cleanup_failures: Counter
    #: The DGD cache, following the version its API is served at.
    dgd_api: FollowedCache
    #: The export feature's APIs (None with no MCS implementation configured).
    export_apis: ExportApis | None = None
    #: Where the relays' own reports are served as metrics (`pool/status_metrics.py`).
    registry: CollectorRegistry | None = None
    #: Reads discovery again on a schedule and hands each change to `follow_apis`.
    rediscovery: Rediscovery[ServedApis] = dataclasses.field(init=False)
    _cleanup_task: asyncio.Task[None] | None = None
    _leading: bool = False
    _reporting: contextlib.ExitStack = dataclasses.field(default_factory=contextlib.ExitStack)

    def __post_init__(self) -> None:
        self.rediscovery = Rediscovery(
            self._rediscover,
            self.follow_apis,
            self.served,
            interval=self.config.multi_cluster.api_discovery_interval,
            what="the served APIs",
        )
        self.dgd_api.poke = self.rediscovery.poke
        if self.export_apis is not None:
            self.export_apis.poke = self.rediscovery.poke

    async def _rediscover(self, current: ServedApis) -> ServedApis:
        mcs = self.config.multi_cluster.mcs_implementation
        return await rediscover_served_apis(self.client, current, mcs)

    @property
    def exports(self) -> ExportCaches | None:
        """The export feature's caches now (None without an MCS implementation, or while
        the ServiceExport API is not served)."""
        return self.export_apis.caches if self.export_apis is not None else None

    async def follow_apis(self, current: ServedApis, new: ServedApis) -> ServedApis:
        """Act on a change of the served APIs; return what is in effect afterwards (a new
        cache not synced yet is offered again at each later read)."""
        want = new.dgd_versions[0] if new.dgd_versions else None
        dgd_version = await self.dgd_api.follow(want, new.dgd_versions)
        applied = dataclasses.replace(new, dgd_version=dgd_version, dgd_stale=not self.dgd_api.live)
        if self.export_apis is not None:
            now = await self.export_apis.follow(
                new.serviceexport_version,
                new.about_version,
                export_served=new.serviceexport_versions,
                about_served=new.about_versions,
                dcd_version=new.dcd_version,
                dcd_served=new.dcd_versions,
            )
            applied = dataclasses.replace(
                applied,
                serviceexport_version=now.serviceexport_version,
                about_version=now.about_version,
                dcd_version=now.dcd_version,
            )
        for line in transitions(current, applied, self.config.multi_cluster.mcs_implementation):
            log.info("%s", line)
        self.served = applied
        appeared = applied.serviceexport_served != current.serviceexport_served
        if self._leading and appeared and applied.serviceexport_served:
            await self._stop_cleanup()
            try:
                await self.cleanup_when_off()
            except Exception as e:  # the change is in effect: retry the cleanup, not it
                log.warning("multi-cluster export is off: cleanup pass failed (retried): %s", e)
                self._cleanup_task = asyncio.create_task(
                    self._retry_cleanup(), name="feature-off export cleanup"
                )
        return applied

    async def start(self) -> None:
        """Start caches and the event writer, then (after caches sync) the workers."""
        await self.start_caches()
        await self.start_leading()

    async def start_leading(self) -> None:
        """What only the leader does: the feature-off cleanup, events, the workers."""
        self._leading = True
        await self.cleanup_when_off()
        await self.recorder.start()
        await self.controller.start()

    async def cleanup_when_off(self) -> None:
        """With no MCS implementation, withdraw the exports this operator made earlier
        while the ServiceExport API is served. The first pass runs now; anything refused
        is logged, counted and retried in the background with backoff, never failing the
        startup."""
        if self.config.multi_cluster.mcs_implementation or not self.served.serviceexport_served:
            return
        if not await self._cleanup_pass():
            self._cleanup_task = asyncio.create_task(
                self._retry_cleanup(), name="feature-off export cleanup"
            )

    async def _cleanup_pass(self) -> bool:
        assert self.served.serviceexport_served is not None
        done = await withdraw_leftover_exports(
            self.client,
            self.served.serviceexport_served,
            self.config.namespace.restricted or None,
        )
        if done.withdrawn:
            log.info(
                "multi-cluster export is off: withdrew %d ServiceExports left from before",
                done.withdrawn,
            )
        for failure in done.failures:
            self.cleanup_failures.inc()
            log.warning("multi-cluster export is off, cleanup refused (retried): %s", failure)
        for export, said in done.refused:
            self._warn_refused_cleanup(export, said)
        return not done.failures

    def _warn_refused_cleanup(self, export: Mapping[str, Any], said: str) -> None:
        """A Warning on the relay that controls an export the cleanup could not withdraw:
        with no implementation, its status has no export condition to say so."""
        meta, ref = Meta(export), Meta(export).controller
        if ref is None:
            return
        relay = {
            "apiVersion": ref.get("apiVersion"),
            "kind": ref.get("kind"),
            "namespace": meta.namespace,
            "name": ref.get("name"),
            "uid": ref.get("uid"),
        }
        related = serviceexports(self.served.serviceexport_served or "").reference(dict(export))
        self.recorder.emit(
            relay,
            related,
            "Warning",
            EXPORT_EVENTS.failed,
            "Delete",
            f"multi-cluster export is off, but its leftover export cannot be withdrawn "
            f"(retried with backoff): {said}",
        )

    async def _retry_cleanup(self) -> None:
        backoff = ExponentialBackoff(base=CLEANUP_RETRY_BASE, cap=CLEANUP_RETRY_CAP)
        while True:
            await asyncio.sleep(backoff.when("cleanup"))
            try:
                if await self._cleanup_pass():
                    log.info("multi-cluster export is off: cleanup complete")
                    return
            except Exception:
                log.exception("multi-cluster export is off: cleanup pass failed (retried)")

    async def start_caches(self) -> None:
        """Warm caches (a follower does this before it leads) and follow the served APIs
        (every replica). Nothing is queued until `start_leading`."""
        self.informers.start_all()
        self.checks.start()
        self.rediscovery.start()
        if self.registry is not None:
            # Read from the relay cache at scrape time, on followers too.
            self._reporting.enter_context(
                relay_metrics.reporting(
                    self.registry,
                    self.caches.relays.store.list,
                    per_relay=self.config.server.per_relay_metrics,
                )
            )

    async def stop_leading(self, *, lost: bool = False, drain_timeout: float = 10.0) -> None:
        """End what only the leader does; the one place its writing stops. A clean stop
        (before the Lease is released) drains the reconciles for `drain_timeout` and writes
        the pending Events; after a lost Lease both are dropped at once, since a successor
        may be writing. The client's write gate refuses what a straggler still tries."""
        self._leading = False
        await self._stop_cleanup()  # the feature-off cleanup is leader work too
        if lost:
            await self.controller.stop(drain_timeout=0)
            await self.recorder.abandon()
        else:
            await self.controller.stop(drain_timeout)
            await self.recorder.stop()

    async def _stop_cleanup(self) -> None:
        if self._cleanup_task is not None:
            self._cleanup_task.cancel()
            await asyncio.gather(self._cleanup_task, return_exceptions=True)
            self._cleanup_task = None

    async def stop(self, drain_timeout: float = 30.0) -> None:
        await self.rediscovery.stop()
        await self.checks.stop()
        await self.stop_leading(drain_timeout=drain_timeout)
        self._reporting.close()
        await self.informers.stop_all()

    def caches_synced(self) -> bool:
        """Readiness: every cache synced but the optional ones and those being made to
        replace one in effect (a replica lacking an optional read would never be ready;
        `checks` reports it as degraded)."""
        pending = self._pending()
        return all(
            i.has_synced
            for i in self.informers.informers()
            if not self.checks.is_optional(i) and i not in pending
        )

    def dgd_api_served(self) -> bool:
        """Readiness: the DGDs are read from a cache of a served version."""
        return self.dgd_api.ready

    def _pending(self) -> set[Informer]:
        pending = set(self.export_apis.pending) if self.export_apis is not None else set()
        if self.dgd_api.pending is not None:
            pending.add(self.dgd_api.pending)
        return pending


def build(
    client: Client,
    config: OperatorConfiguration,
    served: ServedApis,
    *,
    identity: str,
    registry: CollectorRegistry | None = None,
    clock: Clock | None = None,
) -> Operator:
    """Wire the operator for `config` on a cluster serving `served`."""
    registry = registry if registry is not None else REGISTRY
    clock = clock or SystemClock()
    namespace = config.namespace.restricted or None
    informers = SharedInformers(client, registry=registry)
    implementation = Implementation(config.multi_cluster.mcs_implementation)
    caches = relay_controller.relay_caches(
        informers,
        namespace=namespace,
        dgd_version=served.dgd_version,
        frontends=bool(implementation),
    )
    recorder = EventRecorder(
        client,
        reporting_controller=REPORTING_CONTROLLER,
        reporting_instance=identity,
        registry=registry,
    )
    pool_exports: PoolExports | None = None
    if implementation:
        # Made with nothing to read: `ExportApis.begin` hands it the caches served now.
        pool_exports = PoolExports(
            None,
            resource=None,
            implementation=implementation,
            about_version=None,
            unconfirmed_after=timedelta(seconds=config.multi_cluster.unconfirmed_after),
            confirmation=implementation.confirmation(config.multi_cluster.confirmation),
            frontends=FrontendCaches(caches.frontend_services),
            exported_annotations=config.multi_cluster.exported_annotations,
            exported_labels=config.multi_cluster.exported_labels,
        )
    relay = config.pool_relay
    reconciler = PoolRelayReconciler(
        client,
        caches,
        defaults=RelayDefaults(
            image=relay.image,
            port=relay.port,
            replicas=relay.replicas,
            image_pull_policy=relay.image_pull_policy,
            headless=relay.headless,
        ),
        default_discovery_backend=config.discovery.backend,
        recorder=recorder,
        registry=registry,
        exports=pool_exports,
        clock=clock,
    )
    writes = config.controller.background_writes
    client.background_writes = BackgroundWrites(writes) if writes else None
    hold = config.controller.changes_first_hold
    first = ChangesFirst(hold) if hold > 0 else None  # the controller uses it only with a flow
    client.changes_first = first
    controller = relay_controller.wire(
        Controller(
            relay_controller.CONTROLLER_NAME,
            reconciler,
            workers=config.controller.workers,
            cache_sync_timeout=config.controller.cache_sync_timeout,
            registry=registry,
            kept_for_changes=1,
            flow=by_namespace if config.controller.fair_queuing else None,
            changes_first=first,
        ),
        caches,
    )
    checks = DegradedChecks({}, registry)
    export_apis: ExportApis | None = None

    def switch_dgds(new: Informer, old: Informer) -> None:
        caches.dgds = new  # read by every pass from here on
        if export_apis is not None:
            export_apis.use_dgds(new)
        relay_controller.watch_dgds(controller, new)
        controller.unwatch(old)
        controller.enqueue_all(caches.relays.store.keys())

    dgds = FollowedCache(
        informers,
        caches.dgds,
        served.dgd_version,
        make=lambda version: relay_controller.dgd_cache(
            informers, namespace=namespace, version=version
        ),
        switch=switch_dgds,
        what=f"the DGD API ({dgd_api.PLURAL}.{dgd_api.GROUP})",
    )
    if pool_exports is not None:
        export_apis = ExportApis(
            informers,
            controller,
            pool_exports,
            checks,
            relays=caches.relays,
            dgds=caches.dgds,
            namespace=namespace,
        )
        export_apis.begin(served.serviceexport_version, served.about_version, served.dcd_version)
    return Operator(
        client,
        config,
        served,
        informers,
        caches,
        recorder,
        reconciler,
        controller,
        checks,
        _cleanup_failures(registry),
        dgds,
        export_apis,
        registry,
    )
