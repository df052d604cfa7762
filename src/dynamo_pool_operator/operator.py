"""The operator, assembled: one function wires caches, controllers, events and exports.

`run` (the process), `dev`, the integration tests and the benchmark all build
the operator here, so what the tests exercise is the wiring that ships.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from .api.relay import RelayDefaults
from .config import OperatorConfiguration
from .exports.step import PoolExports
from .exports.wiring import serviceexports, wire_exports, withdraw_leftover_exports
from .features import Gates
from .poolrelay import controller as relay_controller
from .poolrelay.reconcile import PoolRelayReconciler, RelayCaches
from .runtime import metrics
from .runtime.client import Client
from .runtime.clock import Clock, SystemClock
from .runtime.controller import Controller
from .runtime.degraded import DegradedChecks
from .runtime.events import EventRecorder
from .runtime.informer import Informer
from .runtime.shared_informers import SharedInformers

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "nvidia.com/dynamo-pool-operator"


@dataclass
class Operator:
    """Everything one operator process runs, ready to `start`."""

    client: Client
    config: OperatorConfiguration
    gates: Gates
    informers: SharedInformers
    caches: RelayCaches
    recorder: EventRecorder
    reconciler: PoolRelayReconciler
    controller: Controller
    #: Optional caches, by the check they serve: they never gate readiness.
    checks: DegradedChecks

    async def start(self) -> None:
        """Start caches and the event writer, then (after caches sync) the workers."""
        await self.start_caches()
        await self.start_leading()

    async def start_leading(self) -> None:
        """What only the leader does: the feature-off cleanup, events, the workers."""
        await self.cleanup_when_off()
        await self.recorder.start()
        await self.controller.start()

    async def cleanup_when_off(self) -> None:
        """SPEC §4.11: with no MCS implementation, withdraw once the exports this
        operator created earlier, if the ServiceExport API is still served."""
        if self.config.multi_cluster.mcs_implementation or not self.gates.serviceexport_served:
            return
        n = await withdraw_leftover_exports(
            self.client,
            self.gates.serviceexport_served,
            self.config.namespace.restricted or None,
        )
        log.info("multi-cluster export is off: withdrew %d ServiceExports left from before", n)

    async def start_caches(self) -> None:
        """Warm caches only (a follower does this before it leads)."""
        self.informers.start_all()
        self.checks.start()

    async def stop(self, drain_timeout: float = 30.0) -> None:
        await self.checks.stop()
        await self.controller.stop(drain_timeout)
        await self.recorder.stop()
        await self.informers.stop_all()

    def caches_synced(self) -> bool:
        """Readiness: every cache synced but the optional ones. A replica whose RBAC
        lacks an optional read (the ClusterProperty) would otherwise never be ready;
        `checks` reports it as degraded instead."""
        return all(
            i.has_synced for i in self.informers.informers() if not self.checks.is_optional(i)
        )


def build(
    client: Client,
    config: OperatorConfiguration,
    gates: Gates,
    *,
    identity: str,
    registry: CollectorRegistry | None = None,
    clock: Clock | None = None,
) -> Operator:
    """Wire the operator for `config` on a cluster with `gates`."""
    registry = registry if registry is not None else metrics.REGISTRY
    clock = clock or SystemClock()
    namespace = config.namespace.restricted or None
    informers = SharedInformers(client)
    caches = relay_controller.relay_caches(
        informers, namespace=namespace, dgd_version=gates.dgd_version
    )
    recorder = EventRecorder(
        client,
        reporting_controller=REPORTING_CONTROLLER,
        reporting_instance=identity,
        registry=registry,
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
        ),
        default_discovery_backend=config.discovery.backend,
        clock=clock,
    )
    controller = relay_controller.wire(
        Controller(
            relay_controller.CONTROLLER_NAME,
            reconciler,
            workers=config.controller.workers,
            cache_sync_timeout=config.controller.cache_sync_timeout,
            registry=registry,
        ),
        caches,
    )
    optional: dict[str, Informer] = {}
    implementation = config.multi_cluster.mcs_implementation
    if implementation and gates.serviceexport_version:
        export_caches = wire_exports(
            controller,
            caches,
            informers,
            namespace=namespace,
            gates=gates,
            implementation=implementation,
        )
        reconciler.exports = PoolExports(
            client,
            export_caches,
            resource=serviceexports(gates.serviceexport_version),
            implementation=implementation,
            about_version=gates.about_version,
            recorder=recorder,
            registry=registry,
        )
        if export_caches.cluster_properties is not None:
            optional["clusterID"] = export_caches.cluster_properties
    return Operator(
        client,
        config,
        gates,
        informers,
        caches,
        recorder,
        reconciler,
        controller,
        DegradedChecks(optional, registry),
    )
