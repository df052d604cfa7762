"""The operator's Prometheus registry, and metric families registered once per registry.

Our own registry, so `/metrics` serves exactly what the operator registered and tests
can build components against fresh registries. `per_registry(make)` returns the same
families for the same registry (weakly keyed: a discarded test registry is not kept,
nor mistaken for a new one at its id()).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TypeVar

from prometheus_client import CollectorRegistry

T = TypeVar("T")


def per_registry(make: Callable[[CollectorRegistry], T]) -> Callable[[CollectorRegistry], T]:
    made: weakref.WeakKeyDictionary[CollectorRegistry, T] = weakref.WeakKeyDictionary()
    lock = threading.Lock()

    def get(registry: CollectorRegistry) -> T:
        with lock:
            found = made.get(registry)
            if found is None:
                found = made[registry] = make(registry)
            return found

    get.__doc__ = make.__doc__
    return get


#: The registry every runtime component registers into unless handed another one.
REGISTRY = CollectorRegistry()
