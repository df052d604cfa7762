"""A controller's metrics and its work queue's, under controller-runtime's and client-go's
names so their dashboards work.

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


#: client-go's buckets for both duration histograms: 10 ns to 1000 s, by decades.
DURATION_BUCKETS: tuple[float, ...] = (
    1e-08,
    1e-07,
    1e-06,
    1e-05,
    1e-04,
    1e-03,
    1e-02,
    1e-01,
    1.0,
    10.0,
    100.0,
    1000.0,
)


class QueueMetrics:
    """The `workqueue_*` metric families of one registry.

    Every queue (one per controller) shares the same families and tells itself
    apart with the ``name`` label, and a family can be registered only once per
    registry, so they are created once per registry via `for_registry`.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ("name",)
        self.depth = Gauge(
            "workqueue_depth",
            "Number of keys waiting in the work queue.",
            labels,
            registry=registry,
        )
        self.depth_by_priority = Gauge(
            "workqueue_depth_by_priority",
            "Number of keys waiting in the work queue, by priority (0 normal, -100 low: "
            "initial list, relists, mass requeues).",
            ("name", "priority"),
            registry=registry,
        )
        self.flows_by_priority = Gauge(
            "workqueue_flows_by_priority",
            "Number of flows (the relay controller: namespaces) with keys queued, by "
            "priority; keys of one priority are served round-robin across them.",
            ("name", "priority"),
            registry=registry,
        )
        self.adds = Counter(
            "workqueue_adds_total",
            "Number of adds the work queue accepted (duplicates of waiting keys excluded).",
            labels,
            registry=registry,
        )
        self.retries = Counter(
            "workqueue_retries_total",
            "Number of rate-limited re-adds the work queue handled.",
            labels,
            registry=registry,
        )
        self.queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "Seconds a key waits in the work queue between being added and handed to a worker.",
            labels,
            registry=registry,
            buckets=DURATION_BUCKETS,
        )
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "Seconds a worker spends on a key, from get to done.",
            labels,
            registry=registry,
            buckets=DURATION_BUCKETS,
        )
        self.unfinished_work = Gauge(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress not yet observed by work_duration; a steady climb "
            "points at stuck workers.",
            labels,
            registry=registry,
        )
        self.longest_running = Gauge(
            "workqueue_longest_running_processor_seconds",
            "Seconds the longest-running worker of the queue has spent on its current key.",
            labels,
            registry=registry,
        )

    for_registry = staticmethod(per_registry(lambda registry: QueueMetrics(registry)))
