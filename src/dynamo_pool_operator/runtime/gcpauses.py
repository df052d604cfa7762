"""How long the interpreter's cyclic garbage collector stops the event loop, and
keeping the full collections out of busy moments.

A collection of the oldest generation walks every tracked object the process holds,
and an operator holds its caches: tens of containers a pool. While it runs nothing
else does: no reconcile, no watch event, no probe. So its pauses are measured, by
generation, in `dynamo_pool_operator_gc_pause_seconds` (prometheus_client's own
`python_gc_*` counts collections, not their length).

And they are moved to quiet moments (`collect_when_idle`): when the controller has
nothing to do, a full collection runs and what survives it is frozen (`gc.freeze`:
the collector skips it from then on; reference counting still frees each object the
moment nothing holds it). A mass event then collects only what changed since, not the
whole fleet's caches (0.14 s at 5,000 pools in the middle of a ClusterProperty change,
docs/performance.md). Each round unfreezes first, so a cycle that became garbage
while frozen is collected at the next round, not kept.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import weakref
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Histogram

#: Buckets from a young collection (well under a millisecond) to a full one of a large
#: fleet's caches (tens of microseconds a pool).
BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

log = logging.getLogger(__name__)

#: Seconds between full collections at quiet moments (each one at the first quiet
#: moment after that), and how often to look whether the moment is quiet.
IDLE_COLLECTION_EVERY = 600.0
IDLE_CHECK_EVERY = 1.0

_WATCHED: weakref.WeakKeyDictionary[CollectorRegistry, _Pauses] = weakref.WeakKeyDictionary()


class _Pauses:
    """A `gc.callbacks` entry that times each collection into `histogram`."""

    def __init__(self, histogram: Histogram) -> None:
        self.histogram = histogram
        self.started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        elif phase == "stop" and self.started:
            took = time.perf_counter() - self.started
            self.started = 0.0
            self.histogram.labels(str(info.get("generation", ""))).observe(took)


def watch_gc_pauses(registry: CollectorRegistry) -> None:
    """Time every collection into `registry` from now on (once per registry)."""
    if registry in _WATCHED:
        return
    histogram = Histogram(
        "dynamo_pool_operator_gc_pause_seconds",
        "How long each cyclic garbage collection stopped the process, by generation "
        "(2: the full one, which walks every cached object)",
        ["generation"],
        registry=registry,
        buckets=BUCKETS,
    )
    pauses = _WATCHED[registry] = _Pauses(histogram)
    gc.callbacks.append(pauses)


def unwatch_gc_pauses(registry: CollectorRegistry) -> None:
    """Stop timing collections into `registry` (a test's, or a stopped operator's)."""
    pauses = _WATCHED.pop(registry, None)
    if pauses is not None and pauses in gc.callbacks:
        gc.callbacks.remove(pauses)


def collect_and_freeze() -> int:
    """A full collection of everything, frozen ones included, then freeze what is
    left; the number of objects frozen."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


async def collect_when_idle(
    idle: Callable[[], bool],
    *,
    every: float = IDLE_COLLECTION_EVERY,
    check: float = IDLE_CHECK_EVERY,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Until cancelled: at the first moment `idle()` holds, then at the first one
    `every` seconds after the last, `collect_and_freeze`. Cancelled, it unfreezes."""
    due = clock()
    try:
        while True:
            await asyncio.sleep(check)
            if clock() < due or not idle():
                continue
            started = time.perf_counter()
            frozen = collect_and_freeze()
            log.debug(
                "full collection at a quiet moment: %.3fs, %d objects frozen",
                time.perf_counter() - started,
                frozen,
            )
            due = clock() + every
    finally:
        gc.unfreeze()
