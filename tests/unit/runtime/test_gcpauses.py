"""Each garbage collection is timed into the registry, by generation."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime import gcpauses
from dynamo_pool_operator.runtime.gcpauses import (
    collect_and_freeze,
    unwatch_gc_pauses,
    watch_gc_pauses,
)


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
        unwatch_gc_pauses(registry)
    gc.collect(2)
    assert _count(registry, "2") == 1  # no longer watched


def test_what_survives_a_full_collection_is_frozen_and_cycles_of_garbage_are_not() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self

    alive = Node()
    try:
        doomed = weakref.ref(Node())  # garbage, but only the collector can free a cycle
        assert collect_and_freeze() > 0
        assert doomed() is None
        assert gc.get_freeze_count() > 0
        late = Node()
        gone = weakref.ref(late)
        del late
        # Frozen: a full collection skips the cache-like objects, and still frees new garbage.
        gc.collect()
        assert gone() is None
        assert alive.me is alive
    finally:
        gc.unfreeze()


async def test_a_round_when_idle_after_work_that_left_many_objects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    quiet = [False]
    grown = [0]
    rounds: list[float] = []

    def counted() -> int:
        rounds.append(now[0])
        grown[0] = 0  # all frozen now
        return 100_000

    monkeypatch.setattr(gcpauses, "collect_and_freeze", counted)
    task = asyncio.create_task(
        gcpauses.collect_when_idle(
            lambda: quiet[0],
            check=0.001,
            least=1_000,
            longest=100.0,
            clock=lambda: now[0],
            unfrozen=lambda: grown[0],
            frozen=lambda: 100_000 if rounds else 0,
        )
    )
    try:

        async def at(t: float, is_quiet: bool, objects: int) -> None:
            now[0], quiet[0], grown[0] = t, is_quiet, objects
            await asyncio.sleep(0.01)

        await at(0.0, False, 50_000)
        assert rounds == []  # busy: never
        await at(1.0, True, 50_000)
        assert rounds == [1.0]  # idle after the caches filled
        await at(2.0, False, 10_000)
        await at(3.0, True, 10_000)
        assert rounds == [1.0]  # fewer than a quarter of the frozen ones
        await at(4.0, False, 30_000)
        await at(5.0, True, 30_000)
        assert rounds == [1.0, 5.0]  # a mass event's worth
        await at(6.0, True, 30_000)
        assert rounds == [1.0, 5.0]  # no work since: nothing to look at
        await at(200.0, True, 0)
        assert rounds == [1.0, 5.0, 200.0]  # overdue: a round whatever is held
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert gc.get_freeze_count() == 0  # cancelled: nothing left frozen
