"""The metrics listener's bound on connections, with real sockets on loopback: held
connections count, one past the bound is closed at once (before any TLS handshake), and
a place freed is taken again. (Against the real API server, with real tokens:
tests/integration/security/test_metrics_bounds.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.serving import listener as listener_module
from dynamo_pool_operator.runtime.serving import server as server_module
from dynamo_pool_operator.runtime.serving.auth import DelegatedAuth
from dynamo_pool_operator.runtime.serving.listener import MAX_CONNECTIONS
from dynamo_pool_operator.runtime.serving.server import Probes, ProbeServer
from dynamo_pool_operator.runtime.serving.tls import ServingCertificate
from tests.unit.runtime.serving.reviewer import Reviewer

Opened = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def client_tls() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


@contextlib.asynccontextmanager
async def probe_server(
    *, secure: bool, shared: bool = False, **kw: int
) -> AsyncIterator[tuple[ProbeServer, int]]:
    """The operator's ProbeServer on loopback: its metrics port (HTTPS when `secure`)."""
    server = ProbeServer(
        Probes(liveness={"ping": lambda: True}),
        CollectorRegistry(),
        # One address for both is one listener (plain metrics only); "0": no probes.
        health_address="127.0.0.1:0" if shared else "0",
        metrics_address="127.0.0.1:0",
        metrics_tls=ServingCertificate() if secure else None,
        metrics_auth=DelegatedAuth(Reviewer(), registry=CollectorRegistry()) if secure else None,
        **kw,  # type: ignore[arg-type]
    )
    await server.start()
    try:
        yield server, server.bound["metrics"][1]
    finally:
        await server.stop()


async def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not so within {timeout}s")


async def closed_at_once(port: int, within: float = 1.0) -> bool:
    """Whether a new TCP connection to `port` is closed by the server without a byte
    within `within` seconds (less than a handshake gets)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async with asyncio.timeout(within):
            return await reader.read(1) == b""
    except TimeoutError:
        return False
    finally:
        writer.close()


async def get(port: int, *, secure: bool) -> int:
    scheme = "https" if secure else "http"
    headers = {"Authorization": "Bearer good"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{scheme}://127.0.0.1:{port}/metrics", headers=headers, ssl=False) as r,
    ):
        return r.status


async def hold(n: int, connect: Callable[[], Awaitable[Opened]]) -> list[Opened]:
    return [await connect() for _ in range(n)]


def close(opened: list[Opened]) -> None:
    for _, writer in opened:
        writer.close()


@pytest.mark.parametrize("secure", [False, True])
async def test_a_connection_past_the_bound_is_closed_and_a_freed_place_is_taken(
    secure: bool,
) -> None:
    async with probe_server(secure=secure, metrics_max_connections=3) as (server, port):
        (listener,) = server._listeners
        tls = client_tls() if secure else None
        held = await hold(3, lambda: asyncio.open_connection("127.0.0.1", port, ssl=tls))
        await eventually(lambda: listener.open == 3)
        assert await closed_at_once(port)
        assert listener.refused == 1
        assert server.registry.get_sample_value("metrics_connections_refused_total") == 1
        close(held[:1])
        await eventually(lambda: listener.open == 2)
        assert await get(port, secure=secure) == 200
        close(held[1:])


async def test_connections_in_their_tls_handshake_hold_places_until_its_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client that connects and says nothing holds a place (the handshake is work the
    listener has taken on) until the handshake's timeout frees it; a connection past
    the bound is closed before any handshake."""
    monkeypatch.setattr(listener_module, "HANDSHAKE_TIMEOUT", 2.0)
    async with probe_server(secure=True, metrics_max_connections=2) as (server, port):
        (listener,) = server._listeners
        silent = await hold(2, lambda: asyncio.open_connection("127.0.0.1", port))
        await eventually(lambda: listener.open == 2)
        assert await closed_at_once(port)
        await eventually(lambda: listener.open == 0)
        assert await get(port, secure=True) == 200
        close(silent)


async def test_an_idle_connection_gives_its_place_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that took its place and went quiet (a pool of connections left open)
    keeps the scrapers out only for the idle timeout, not aiohttp's hour."""
    monkeypatch.setattr(server_module, "IDLE_TIMEOUT", 0.5)
    async with probe_server(secure=False, metrics_max_connections=1) as (server, port):
        (listener,) = server._listeners
        quiet = await hold(1, lambda: asyncio.open_connection("127.0.0.1", port))
        await eventually(lambda: listener.open == 1)
        assert await closed_at_once(port, within=0.2)
        await eventually(lambda: listener.open == 0)
        assert await get(port, secure=False) == 200
        close(quiet)


async def test_the_metrics_listener_is_bounded_by_default_and_a_shared_one_is_not() -> None:
    """A listener shared with the probes stays unbounded: a kubelet whose probe is
    refused restarts the pod."""
    async with probe_server(secure=True) as (server, port):
        (listener,) = server._listeners
        assert listener.max_connections == MAX_CONNECTIONS
    async with probe_server(secure=False, shared=True, metrics_max_connections=1) as (
        server,
        port,
    ):
        assert server.bound["metrics"] == server.bound["health"]
        held = await hold(3, lambda: asyncio.open_connection("127.0.0.1", port))
        assert not await closed_at_once(port)
        close(held)


def test_the_bound_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="max_connections"):
        listener_module.BoundedListener(
            None,  # type: ignore[arg-type]
            "127.0.0.1",
            0,
            registry=CollectorRegistry(),
            max_connections=0,
        )
