"""How long the interpreter's cyclic garbage collector stops the event loop, and
keeping the full collections out of busy moments.

A collection of the oldest generation walks every tracked object the process holds,
and an operator holds its caches: tens of containers a pool. While it runs nothing
else does: no reconcile, no watch event, no probe. So its pauses are measured, by
generation, in `dynamo_pool_operator_gc_pause_seconds` (prometheus_client's own
`python_gc_*` counts collections, not their length).

And they are moved to quiet moments (`collect_when_idle`): when the controller turns
idle after work that left many new long-lived objects (a cold start filled the caches,
a mass event replaced them), a full collection runs and what survives it is frozen
(`gc.freeze`: the collector skips it from then on; reference counting still frees each
object the moment nothing holds it). A mass event then collects only what changed
since, not the whole fleet's caches (0.14 s at 5,000 pools in the middle of a
ClusterProperty change, docs/performance.md). Each round unfreezes first, so a cycle
that became garbage while frozen is collected at the next round, not kept.
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

#: A round at a quiet moment once the oldest generation holds this many objects not
#: frozen (and a quarter as many as are frozen), or at the latest this many seconds
#: after the last one (a frozen cycle that became garbage is freed by a round only);
#: how often to look whether the moment is quiet.
ROUND_AT_LEAST = 20_000
ROUND_AT_THE_LATEST = 3600.0
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


def _unfrozen() -> int:
    """How many objects a full collection would walk now (the oldest generation)."""
    return len(gc.get_objects(generation=2))


async def collect_when_idle(
    idle: Callable[[], bool],
    *,
    check: float = IDLE_CHECK_EVERY,
    least: int = ROUND_AT_LEAST,
    longest: float = ROUND_AT_THE_LATEST,
    clock: Callable[[], float] = time.monotonic,
    unfrozen: Callable[[], int] = _unfrozen,
    frozen: Callable[[], int] = gc.get_freeze_count,
) -> None:
    """Until cancelled: each time the controller turns idle after work (`idle()`,
    looked at every `check` seconds), a round (`collect_and_freeze`) if the oldest
    generation holds at least `least` objects not frozen and at least a quarter as
    many as are frozen (CPython's own rule for a full collection, at a quiet moment);
    and a round at the first idle moment `longest` seconds after the last whatever it
    holds. Cancelled, it unfreezes."""
    last = clock()
    worked = True  # from the start: the caches fill
    try:
        while True:
            await asyncio.sleep(check)
            if not idle():
                worked = True
                continue
            overdue = clock() - last >= longest
            if not (worked or overdue):
                continue
            worked = False
            grown = unfrozen()
            if not overdue and (grown < least or grown < frozen() // 4):
                continue
            started = time.perf_counter()
            held = collect_and_freeze()
            last = clock()
            log.debug(
                "full collection at a quiet moment: %.3fs, %d objects walked, %d frozen",
                time.perf_counter() - started,
                grown,
                held,
            )
    finally:
        gc.unfreeze()
