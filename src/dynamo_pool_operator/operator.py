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
from .runtime.events import EventRecorder
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

    async def start(self) -> None:
        """Start caches and the event writer, then (after caches sync) the workers."""
        self.informers.start_all()
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

    async def stop_leading(self, *, lost: bool = False, drain_timeout: float = 10.0) -> None:
        """End what only the leader does; the one place its writing stops.

        A clean stop runs this before the Lease is released: no more keys are handed
        out, the reconciles in flight finish (at most `drain_timeout` seconds), then
        the pending Events are written. After a lost Lease it cancels the reconciles
        at once and drops the pending Events, since a successor may be writing
        already. Either way nothing of ours is written afterwards (the client's write
        gate refuses what a straggler might still try)."""
        if lost:
            await self.controller.stop(drain_timeout=0)
            await self.recorder.abandon()
        else:
            await self.controller.stop(drain_timeout)
            await self.recorder.stop()

    async def stop(self, drain_timeout: float = 30.0) -> None:
        await self.stop_leading(drain_timeout=drain_timeout)
        await self.informers.stop_all()

    def caches_synced(self) -> bool:
        return all(i.has_synced for i in self.informers.informers())


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
    return Operator(client, config, gates, informers, caches, recorder, reconciler, controller)
