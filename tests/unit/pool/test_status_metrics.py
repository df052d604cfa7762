"""The relay status metrics: read from cached relays, conditions by type."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from dynamo_pool_operator.pool.status_metrics import reporting


def relay(name: str, *conditions: tuple[str, str, str]) -> dict[str, Any]:
    status = {"conditions": [{"type": t, "status": s, "reason": r} for t, s, r in conditions]}
    return {"metadata": {"namespace": "ns", "name": name}, "status": status}


def scrape(relays: list[dict[str, Any]]) -> str:
    registry = CollectorRegistry()
    with reporting(registry, lambda: relays):
        return generate_latest(registry).decode()


def test_ready_per_relay_and_counts_per_condition() -> None:
    text = scrape(
        [
            relay("a", ("Ready", "True", "Published"), ("Published", "True", "Published")),
            relay("b", ("Ready", "False", "DGDNotFound"), ("Exported", "False", "Pending")),
            {"metadata": {"namespace": "ns", "name": "new"}},  # no status yet
        ]
    )
    assert 'dynamo_pool_operator_relay_ready{relay="a",relay_namespace="ns"} 1.0' in text
    assert 'dynamo_pool_operator_relay_ready{relay="b",relay_namespace="ns"} 0.0' in text
    assert 'dynamo_pool_operator_relay_ready{relay="new",relay_namespace="ns"} 0.0' in text
    counts = 'dynamo_pool_operator_relays{condition="%s",reason="%s",status="%s"} %s'
    assert counts % ("Ready", "Published", "True", "1.0") in text
    assert counts % ("Ready", "DGDNotFound", "False", "1.0") in text
    assert counts % ("Ready", "NotReconciled", "Unknown", "1.0") in text
    # Condition types are read generically: new ones appear without a change here.
    assert counts % ("Exported", "Pending", "False", "1.0") in text
    assert counts % ("Published", "Published", "True", "1.0") in text


def test_no_relays_no_series_but_the_families_are_declared() -> None:
    text = scrape([])
    assert "# TYPE dynamo_pool_operator_relay_ready gauge" in text
    assert "dynamo_pool_operator_relay_ready{" not in text


def test_one_collector_per_registry_reporting_the_newest_source() -> None:
    registry = CollectorRegistry()
    first = [relay("a", ("Ready", "True", "Published"))]
    second = [relay("b", ("Ready", "False", "NoWorkers"))]
    with reporting(registry, lambda: first):
        with reporting(registry, lambda: second):  # no "Duplicated timeseries"
            text = generate_latest(registry).decode()
            assert 'relay="b"' in text
            assert 'relay="a"' not in text
        assert 'relay="a"' in generate_latest(registry).decode()
    assert "relay_ready{" not in generate_latest(registry).decode()


def test_exports_by_state_sum_every_relays_status_lines_with_every_state_present() -> None:
    def with_exports(name: str, *states: str) -> dict[str, Any]:
        lines = [{"name": f"{name}-{i}", "state": s} for i, s in enumerate(states)]
        return {"metadata": {"namespace": "ns", "name": name}, "status": {"exports": lines}}

    text = scrape(
        [
            with_exports("a", "Exported", "Exported", "Skipped"),
            with_exports("b", "Exported", "Foreign"),
            {"metadata": {"namespace": "ns", "name": "c"}, "status": {"exports": "not a list"}},
            with_exports("d"),
        ]
    )
    series = {
        line.split(" ")[0]: line.split(" ")[1]
        for line in text.splitlines()
        if line.startswith("dynamo_pool_operator_exports{")
    }
    assert series == {
        'dynamo_pool_operator_exports{state="Exported"}': "3.0",
        'dynamo_pool_operator_exports{state="Failed"}': "0.0",
        'dynamo_pool_operator_exports{state="Foreign"}': "1.0",
        'dynamo_pool_operator_exports{state="Pending"}': "0.0",
        'dynamo_pool_operator_exports{state="Skipped"}': "1.0",
        'dynamo_pool_operator_exports{state="Withdrawing"}': "0.0",
    }


def test_without_per_relay_series_no_relay_is_named() -> None:
    """`server.perRelayMetrics: false`: relay names (every tenant's) stay out of the
    scrape; the counts by condition and the exports by state remain."""
    registry = CollectorRegistry()
    relays = [relay("payments-pool", ("Ready", "True", "Published"))]
    with reporting(registry, lambda: relays, per_relay=False):
        text = generate_latest(registry).decode()
    assert "payments-pool" not in text
    assert "dynamo_pool_operator_relay_ready" not in text
    counts = 'dynamo_pool_operator_relays{condition="Ready",reason="Published",status="True"}'
    assert f"{counts} 1.0" in text
    assert 'dynamo_pool_operator_exports{state="Exported"} 0.0' in text
