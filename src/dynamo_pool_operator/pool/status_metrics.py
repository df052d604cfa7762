"""What the relays' status says, as metrics: the series "relays not Ready" alerts on.

Computed at scrape time from the relay cache (no second watch, nothing kept between
scrapes), so they are the operator's reports as the server holds them, on followers too:

- `dynamo_pool_operator_relay_ready{relay_namespace, relay}`: 1 while `Ready` is True.
  No reason label, so a changing reason does not restart an alert's `for:`;
  `relay_namespace` because Prometheus owns `namespace`. Off with
  `server.perRelayMetrics: false` (it names every tenant's relays).
- `dynamo_pool_operator_relays{condition, status, reason}`: relays per condition (read
  generically), status and reason; no status counts as `Ready=Unknown NotReconciled`.
- `dynamo_pool_operator_exports{state}`: wanted exports by state, 0 included, so an
  alert on a state always has a series.
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

from dynamo_pool_operator.api.conditions import ConditionType, ExportState, ReadyReason, Status
from dynamo_pool_operator.api.shown import ShownStatus
from dynamo_pool_operator.runtime.objects import Meta

READY = ConditionType.READY

RelaySource = Callable[[], Iterable[Mapping[str, Any]]]


def _conditions(shown: ShownStatus) -> list[tuple[str, str, str]]:
    """(type, status, reason) of each condition; Ready=Unknown NotReconciled if none."""
    found = [(c.type, c.status or Status.UNKNOWN, c.reason) for c in shown.conditions]
    if not any(t == READY for t, _, _ in found):
        found.append((READY, Status.UNKNOWN, ReadyReason.NOT_RECONCILED))
    return found


def _export_states(shown: ShownStatus) -> list[str]:
    return [line.state for line in shown.exports if isinstance(line.state, str)]


class RelayStatusCollector(Collector):
    """The one collector of a registry over the cached relays, reporting the newest source
    added (tests may start another operator before the last stopped)."""

    def __init__(self) -> None:
        #: (the cached relays, whether series may name a relay), oldest first.
        self.sources: list[tuple[RelaySource, bool]] = []

    def describe(self) -> Iterable[Any]:
        # Declared up front (and empty until a scrape): the registry learns the names.
        return list(self._families())

    def _families(self) -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
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
        exports = GaugeMetricFamily(
            "dynamo_pool_operator_exports",
            "ServiceExports the pools want, by the state their relay's status shows "
            "(Exported, Pending, Failed, Foreign, Skipped)",
            labels=["state"],
        )
        return ready, counts, exports

    def collect(self) -> Iterator[Any]:
        ready, counts, exports = self._families()
        tally: Counter[tuple[str, str, str]] = Counter()
        states: Counter[str] = Counter({str(s): 0 for s in ExportState})
        relays, per_relay = self.sources[-1] if self.sources else ((lambda: ()), True)
        for relay in relays():
            shown = ShownStatus.of(relay.get("status"))  # the relay cache keeps it read
            states.update(_export_states(shown))
            meta = Meta(relay)
            conditions = _conditions(shown)
            tally.update(conditions)
            is_ready = any(t == READY and s == Status.TRUE for t, s, _ in conditions)
            ready.add_metric(
                [meta.namespace, meta.name],
                1.0 if is_ready else 0.0,
            )
        for (kind, status, reason), n in sorted(tally.items()):
            counts.add_metric([kind, status, reason], float(n))
        for state, n in sorted(states.items()):
            exports.add_metric([state], float(n))
        if per_relay:
            yield ready
        yield counts
        yield exports


_REGISTERED: weakref.WeakKeyDictionary[CollectorRegistry, RelayStatusCollector] = (
    weakref.WeakKeyDictionary()
)


@contextlib.contextmanager
def reporting(
    registry: CollectorRegistry, relays: RelaySource, *, per_relay: bool = True
) -> Iterator[None]:
    """Report `relays()` in `registry` for the block (registered once per registry);
    `per_relay` False leaves out the series that name a relay."""
    collector = _REGISTERED.get(registry)
    if collector is None:
        collector = _REGISTERED[registry] = RelayStatusCollector()
        registry.register(collector)
    source = (relays, per_relay)
    collector.sources.append(source)
    try:
        yield
    finally:
        collector.sources.remove(source)
