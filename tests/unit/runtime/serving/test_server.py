"""Unit tests for runtime.serving.server: bind addresses, probe answers, and the plain
HTTP endpoints on one shared port (HTTPS metrics are tested in test_tls.py)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily

from dynamo_pool_operator.runtime.serving.server import Probes, ProbeServer, parse_address


@pytest.mark.parametrize(
    ("address", "parsed"),
    [
        (":8081", ("0.0.0.0", 8081)),
        ("127.0.0.1:8080", ("127.0.0.1", 8080)),
        ("[::1]:9443", ("[::1]", 9443)),
        ("0", None),
        ("", None),
    ],
)
def test_parse_address(address: str, parsed: tuple[str, int] | None) -> None:
    assert parse_address(address) == parsed


def test_a_probe_passes_only_when_every_check_does() -> None:
    probes = Probes(readiness={"informers": lambda: True, "caches": lambda: False})
    assert probes.readyz() == (
        False,
        "[-]caches failed\n[+]informers ok\nnot ok\n",
    )
    assert probes.healthz() == (True, "ok\n")


def test_a_check_that_raises_fails_its_probe() -> None:
    def broken() -> bool:
        raise RuntimeError("boom")

    probes = Probes(liveness={"loop": broken})
    assert probes.healthz() == (False, "[-]loop failed\nnot ok\n")


def test_secure_metrics_need_both_certificate_and_authenticator() -> None:
    with pytest.raises(ValueError, match="need both a certificate and an authenticator"):
        ProbeServer(
            Probes(),
            CollectorRegistry(),
            health_address="0",
            metrics_address="0",
            metrics_auth=object(),  # type: ignore[arg-type]
        )


async def test_one_address_serves_probes_and_metrics() -> None:
    registry = CollectorRegistry()
    Counter("served_things", "things served", registry=registry).inc()
    ready = {"synced": False}
    probes = Probes(readiness={"synced": lambda: ready["synced"]})
    server = ProbeServer(
        probes, registry, health_address="127.0.0.1:0", metrics_address="127.0.0.1:0"
    )
    await server.start()
    try:
        assert server.bound["metrics"] == server.bound["health"]
        base = f"http://127.0.0.1:{server.bound['health'][1]}"
        async with aiohttp.ClientSession() as session:
            async with session.get(base + "/healthz") as r:
                assert r.status == 200
            async with session.get(base + "/readyz") as r:
                assert (r.status, await r.text()) == (500, "[-]synced failed\nnot ok\n")
            ready["synced"] = True
            async with session.get(base + "/readyz") as r:
                assert r.status == 200
            async with session.get(base + "/metrics") as r:
                assert r.status == 200
                assert "served_things_total 1.0" in await r.text()
    finally:
        await server.stop()


async def test_metrics_by_name_serve_only_those_and_run_no_other_collector() -> None:
    """`/metrics?name[]=…` (prometheus_client's own parameter): a scrape of a few series
    does not pay for a collector that renders one per relay."""
    registry = CollectorRegistry()
    Counter("served_things", "things served", registry=registry).inc()
    called = []

    class Expensive:
        def describe(self) -> list[Any]:
            return [GaugeMetricFamily("per_relay", "one series per relay")]

        def collect(self) -> list[Any]:
            called.append(True)
            return [GaugeMetricFamily("per_relay", "one series per relay", value=1.0)]

    registry.register(Expensive())  # type: ignore[arg-type]
    server = ProbeServer(Probes(), registry, health_address="0", metrics_address="127.0.0.1:0")
    await server.start()
    try:
        base = f"http://127.0.0.1:{server.bound['metrics'][1]}"
        async with aiohttp.ClientSession() as session:
            async with session.get(base + "/metrics?name[]=served_things_total") as r:
                text = await r.text()
            assert "served_things_total 1.0" in text
            assert "per_relay" not in text
            assert not called
            async with session.get(base + "/metrics") as r:
                assert "per_relay 1.0" in await r.text()
            assert called
    finally:
        await server.stop()
