"""A controller's metrics, under controller-runtime's names so its dashboards work.

One set per registry (`for_registry`): several controllers, and tests, share one.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from dynamo_pool_operator.runtime.registry import per_registry


class ReconcileMetrics:
    """controller-runtime's metric names, so existing dashboards work."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=registry,
        )
        self.errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=registry,
        )
        self.time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=(
                0.005,
                0.01,
                0.025,
                0.05,
                0.1,
                0.15,
                0.2,
                0.25,
                0.3,
                0.35,
                0.4,
                0.45,
                0.5,
                0.6,
                0.7,
                0.8,
                0.9,
                1.0,
                1.25,
                1.5,
                1.75,
                2.0,
                2.5,
                3.0,
                3.5,
                4.0,
                4.5,
                5,
                6,
                7,
                8,
                9,
                10,
                15,
                20,
                25,
                30,
                40,
                50,
                60,
            ),
            registry=registry,
        )
        self.max_workers = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller"],
            registry=registry,
        )
        self.active = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"],
            registry=registry,
        )
        self.worker_restarts = Counter(
            "controller_worker_restarts",
            "Workers that died (a bug escaped the reconcile guard) and were replaced.",
            ["controller"],
            registry=registry,
        )

    for_registry = staticmethod(per_registry(lambda registry: ReconcileMetrics(registry)))
