"""What the relays' status says, as metrics: the series "relays not Ready" alerts on.

Computed at scrape time from the relay cache the controller already keeps (no second
watch, nothing stored between scrapes), so the numbers are the operator's own reports
as the API server holds them, on followers too:

- `dynamo_pool_operator_relay_ready{relay_namespace, relay}`: 1 while the relay's
  `Ready` condition is True, else 0 (False, Unknown, or not reported yet). One series
  per relay, without the reason, so a reason that changes does not restart an alert's
  `for:` timer. `relay_namespace`, not `namespace`: Prometheus sets `namespace` to the
  scraped pod's and would rename ours to `exported_namespace`.
- `dynamo_pool_operator_relays{condition, status, reason}`: how many relays report each
  condition (every type the status carries, read generically, so new condition types
  show up unchanged), status and reason; a relay without a status counts as
  `Ready=Unknown` `NotReconciled`. Bounded: reasons are a fixed vocabulary.
"""

from __future__ import annotations

import contextlib
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

READY = "Ready"
NOT_RECONCILED = "NotReconciled"

RelaySource = Callable[[], Iterable[Mapping[str, Any]]]


def _conditions(relay: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(type, status, reason) of each condition; Ready=Unknown NotReconciled if none."""
    found = []
    for c in (relay.get("status") or {}).get("conditions") or ():
        if isinstance(c, Mapping) and isinstance(c.get("type"), str):
            found.append((c["type"], str(c.get("status") or "Unknown"), str(c.get("reason") or "")))
    if not any(t == READY for t, _, _ in found):
        found.append((READY, "Unknown", NOT_RECONCILED))
    return found


class RelayStatusCollector(Collector):
    """A Prometheus collector over `relays()`, the cached relay objects."""

    def __init__(self, relays: RelaySource) -> None:
        self._relays = relays

    def _current(self) -> Iterable[Mapping[str, Any]]:
        return self._relays()

    def describe(self) -> Iterable[Any]:
        # Declared up front (and empty until a scrape): the registry learns the names.
        return list(self._families())

    def _families(self) -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        ready = GaugeMetricFamily(
            "dynamo_pool_operator_relay_ready",
            "1 while the DynamoPoolRelay's Ready condition is True, else 0",
            labels=["relay_namespace", "relay"],
        )
        counts = GaugeMetricFamily(
            "dynamo_pool_operator_relays",
            "DynamoPoolRelays by condition, status and reason, as their status reports them",
            labels=["condition", "status", "reason"],
        )
        return ready, counts

    def collect(self) -> Iterator[Any]:
        ready, counts = self._families()
        tally: Counter[tuple[str, str, str]] = Counter()
        for relay in self._current():
            meta = relay.get("metadata") or {}
            conditions = _conditions(relay)
            tally.update(conditions)
            is_ready = any(t == READY and s == "True" for t, s, _ in conditions)
            ready.add_metric(
                [str(meta.get("namespace") or ""), str(meta.get("name") or "")],
                1.0 if is_ready else 0.0,
            )
        for (kind, status, reason), n in sorted(tally.items()):
            counts.add_metric([kind, status, reason], float(n))
        yield ready
        yield counts


class _Sources(RelayStatusCollector):
    """The one collector of a registry; the newest source added is the one reported
    (a process serves one operator; tests may start another before the last stopped)."""

    def __init__(self) -> None:
        super().__init__(lambda: ())
        self.sources: list[RelaySource] = []

    def _current(self) -> Iterable[Mapping[str, Any]]:
        return self.sources[-1]() if self.sources else ()


_REGISTERED: weakref.WeakKeyDictionary[CollectorRegistry, _Sources] = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def reporting(registry: CollectorRegistry, relays: RelaySource) -> Iterator[None]:
    """Report `relays()` in `registry` for the block (registered once per registry)."""
    collector = _REGISTERED.get(registry)
    if collector is None:
        collector = _REGISTERED[registry] = _Sources()
        registry.register(collector)
    collector.sources.append(relays)
    try:
        yield
    finally:
        collector.sources.remove(relays)
