"""The operator's Prometheus registry, and metric families registered once per registry.

One registry of our own rather than `prometheus_client.REGISTRY`, so that what
`/metrics` serves is exactly what the operator registered (plus whatever it
chooses to add, such as process metrics), and so that tests can build components
against a fresh `CollectorRegistry` without tripping duplicate-registration errors.

A Prometheus family can be registered only once per registry, while the code that
uses it is built once per operator (and many times in one test process, each with
its own registry). `per_registry(make)` turns a function that registers families
into one that returns the same families for the same registry. Weak keys: a
registry a test throws away is not kept alive, and a new one that reuses its id()
is not mistaken for it.
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
