"""The operator's Prometheus registry.

One registry of our own rather than `prometheus_client.REGISTRY`, so that what
`/metrics` serves is exactly what the operator registered (plus whatever it
chooses to add, such as process metrics), and so that tests can build components
against a fresh `CollectorRegistry` without tripping duplicate-registration errors.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

__all__ = ["REGISTRY"]

#: The registry every runtime component registers into unless handed another one.
REGISTRY = CollectorRegistry()
