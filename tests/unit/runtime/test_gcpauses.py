"""Each garbage collection is timed into the registry, by generation."""

from __future__ import annotations

import gc

from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime import gcpauses
from dynamo_pool_operator.runtime.gcpauses import THRESHOLDS, collector_tuned, watch_gc_pauses


def _count(registry: CollectorRegistry, generation: str) -> float:
    value = registry.get_sample_value(
        "dynamo_pool_operator_gc_pause_seconds_count", {"generation": generation}
    )
    return value or 0.0


def test_a_full_collection_is_timed_once_per_registry() -> None:
    registry = CollectorRegistry()
    watch_gc_pauses(registry)
    watch_gc_pauses(registry)  # once: a second watch adds no second callback
    try:
        gc.collect(2)
        assert _count(registry, "2") == 1
        gc.collect(0)
        assert _count(registry, "0") >= 1
        total = registry.get_sample_value(
            "dynamo_pool_operator_gc_pause_seconds_sum", {"generation": "2"}
        )
        assert total is not None
        assert total > 0
    finally:
        gc.callbacks.remove(gcpauses._WATCHED.pop(registry))
    gc.collect(2)
    assert _count(registry, "2") == 1  # no longer watched


def test_the_operator_runs_with_rare_collections_and_restores_the_thresholds_after() -> None:
    before = gc.get_threshold()
    with collector_tuned():
        assert gc.get_threshold() == THRESHOLDS
        assert THRESHOLDS[0] >= 50_000  # a mass event's objects in flight die young
    assert gc.get_threshold() == before


def test_a_pause_callback_near_the_recursion_limit_raises_nothing() -> None:
    """A collection can start a few frames short of the recursion limit (a deeply nested
    object being cached): the callback counts nothing there rather than raise from the
    collector. (At the limit itself the interpreter cannot even call it.)"""
    registry = CollectorRegistry()
    watch_gc_pauses(registry)
    pauses = gcpauses._WATCHED[registry]
    raised: list[BaseException] = []

    def limit(depth: int) -> int:
        try:
            return limit(depth + 1)
        except RecursionError:
            return depth

    bottom = limit(0)

    def near(depth: int) -> None:
        if depth < bottom - 3:
            near(depth + 1)
            return
        try:
            pauses("start", {})
            pauses("stop", {"generation": 2})
        except RecursionError as e:
            raised.append(e)

    near(0)
    assert raised == []
    assert pauses.started == 0.0
