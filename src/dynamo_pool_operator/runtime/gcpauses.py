"""How long the interpreter's cyclic garbage collector stops the event loop.

A full collection walks every object the caches hold, and nothing else runs meanwhile.
So its pauses are measured (`dynamo_pool_operator_gc_pause_seconds`; prometheus_client
counts collections, not their length), and made rare (`collector_tuned`): collecting the
youngest generation every 700 allocations promotes a mass event's objects in flight by
the thousand until a full collection walks the whole cache (0.13-0.20 s at 5,000 pools,
docs/performance.md); every 50,000, they die young by reference counting first.
"""

from __future__ import annotations

import contextlib
import gc
import time
import weakref
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram

#: Buckets from a young collection (well under a millisecond) to a full one of a large
#: fleet's caches (tens of microseconds a pool).
BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

#: The collector's thresholds (`gc.set_threshold`; the interpreter's are 700, 10, 10).
THRESHOLDS = (50_000, 20, 10)

_WATCHED: weakref.WeakKeyDictionary[CollectorRegistry, _Pauses] = weakref.WeakKeyDictionary()


class _Pauses:
    """A `gc.callbacks` entry that times each collection into `histogram`."""

    def __init__(self, histogram: Histogram) -> None:
        self.histogram = histogram
        self.started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        # A collection can start anywhere, at the recursion limit too (a deeply nested
        # object being cached); a callback that raises there is an unraisable error
        # printed to stderr, so that pause goes uncounted instead.
        try:
            if phase == "start":
                self.started = time.perf_counter()
            elif phase == "stop" and self.started:
                took = time.perf_counter() - self.started
                self.started = 0.0
                self.histogram.labels(str(info.get("generation", ""))).observe(took)
        except RecursionError:
            self.started = 0.0


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


@contextlib.contextmanager
def collector_tuned() -> Iterator[None]:
    """`THRESHOLDS` while the operator runs; the ones before, after it."""
    before = gc.get_threshold()
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
