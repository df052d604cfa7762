"""A reconciler over empty caches for the unit tests of one pass: the caches are
filled by the test, the client is the test's fake server, Events go nowhere."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from dynamo_pool_operator.api.relay import RelayDefaults
from dynamo_pool_operator.pool import controller
from dynamo_pool_operator.pool.reconciler import PoolRelayReconciler
from dynamo_pool_operator.runtime.cache.shared import SharedInformers
from tests.clock import FakeClock
from tests.unit.runtime.client.fake import FakeClient


class Events:
    def emit(self, *args: Any) -> None:
        pass


def reconciler(server: FakeClient, clock: FakeClock | None = None) -> PoolRelayReconciler:
    informers = SharedInformers(FakeClient())
    caches = controller.relay_caches(informers, namespace=None, dgd_version="v1beta1")
    return PoolRelayReconciler(
        server,
        caches,
        # One relay pod: no PodDisruptionBudget (it has tests of its own).
        defaults=RelayDefaults(image="i", port=1, replicas=1),
        default_discovery_backend="kubernetes",
        recorder=Events(),  # type: ignore[arg-type]
        registry=CollectorRegistry(),
        clock=clock or FakeClock(),
    )
