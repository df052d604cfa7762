"""A reconciler over empty caches for the unit tests of one pass: the caches are
filled by the test, the client is the test's fake server, Events go nowhere. And the
Services Dynamo's operator would make for a pool's frontends."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from dynamo_pool_operator.api.dgd import KIND as DGD_KIND
from dynamo_pool_operator.api.dgd import Pool
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


def dgds_services(pool: Pool | None) -> dict[str, dict[str, Any]]:
    """The Service of each frontend of `pool`, by name, controlled by the DGD as Dynamo's
    operator makes it (the Grove path): what a frontend needs to be exported."""
    if pool is None:
        return {}
    owner = {
        "apiVersion": pool.api_version,
        "kind": DGD_KIND,
        "name": pool.name,
        "uid": pool.uid,
        "controller": True,
    }
    return {
        name: {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": pool.namespace,
                "uid": f"svc-uid-{name}",
                "resourceVersion": "5",
                "ownerReferences": [owner],
            },
        }
        for name in pool.frontend_services
    }
