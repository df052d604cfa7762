"""The REST client's own policies against a small HTTP server standing in for the API
server: which answers it retries, for which verbs, and what it refuses to send.

Only the client's decisions are under test here; what the real API server answers is
tested in tests/integration/runtime/test_client.py.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.auth.config import ClusterConfig
from dynamo_pool_operator.runtime.auth.credentials import StaticCredentials
from dynamo_pool_operator.runtime.cache import informer as informer_mod
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client import rest as client_mod
from dynamo_pool_operator.runtime.client.background import (
    BackgroundWrites,
    ChangesFirst,
    background,
)
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import CONFIGMAPS

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}


class FakeServer:
    """Answers each request with the next planned (status, headers), then 200 + `CM`."""

    def __init__(self) -> None:
        self.plan: list[tuple[int, dict[str, str]]] = []
        self.seen: list[str] = []
        self.port = 0
        #: Lines a watch request gets before the server goes silent (never closing).
        self.stream: list[bytes] = []
        self.closing = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(request.method)
        if request.query.get("watch") == "true":
            resp = web.StreamResponse()
            await resp.prepare(request)
            for line in self.stream:
                await resp.write(line + b"\n")
            await self.closing.wait()  # silent but open, until the test ends
            return resp
        if self.plan:
            status, headers = self.plan.pop(0)
            body = {"kind": "Status", "code": status, "message": "planned", "reason": ""}
            return web.Response(
                status=status,
                headers=headers,
                body=orjson.dumps(body),
                content_type="application/json",
            )
        return web.Response(body=orjson.dumps(CM), content_type="application/json")


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    fake = FakeServer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.port = runner.addresses[0][1]
    try:
        yield fake
    finally:
        fake.closing.set()
        await runner.cleanup()


def client_for(server: FakeServer, **kw: Any) -> Client:
    return Client(ClusterConfig(f"http://127.0.0.1:{server.port}", StaticCredentials()), **kw)


Call = Callable[[Client], Awaitable[object]]
IDEMPOTENT: dict[str, Call] = {
    "get": lambda c: c.get(CONFIGMAPS, "a", "default"),
    "replace": lambda c: c.replace(CONFIGMAPS, CM),
    "delete": lambda c: c.delete(CONFIGMAPS, "a", "default"),
    "apply": lambda c: c.apply(CONFIGMAPS, CM, field_manager="t"),
    "merge_patch": lambda c: c.merge_patch(CONFIGMAPS, "a", {"data": {}}, "default"),
}
CREATE: Call = lambda c: c.create(CONFIGMAPS, CM)  # noqa: E731


@pytest.mark.parametrize("status", [500, 503, 504])
@pytest.mark.parametrize("verb", sorted(IDEMPOTENT))
async def test_a_5xx_with_retry_after_is_retried_for_an_idempotent_verb(
    server: FakeServer, verb: str, status: int
) -> None:
    """As client-go: a 5xx carrying Retry-After says "try again", and repeating an
    idempotent request cannot do more than the first one did."""
    server.plan = [(status, {"Retry-After": "0"})] * 2
    async with client_for(server) as c:
        await IDEMPOTENT[verb](c)
    assert len(server.seen) == 3


async def test_a_5xx_with_retry_after_is_not_retried_for_a_create(server: FakeServer) -> None:
    """A create the server did carry out (a 504 after the write) would come back as
    AlreadyExists: the caller decides, with the error and its Retry-After in hand."""
    server.plan = [(503, {"Retry-After": "3"})]
    async with client_for(server) as c:
        with pytest.raises(errors.ServerError) as refused:
            await CREATE(c)
    assert refused.value.retry_after == 3
    assert server.seen == ["POST"]


async def test_a_5xx_without_retry_after_is_not_retried(server: FakeServer) -> None:
    server.plan = [(503, {})]
    async with client_for(server) as c:
        with pytest.raises(errors.ServerError):
            await IDEMPOTENT["get"](c)
    assert server.seen == ["GET"]


async def test_a_429_is_retried_for_every_verb_a_create_included(server: FakeServer) -> None:
    """429 means the request was not processed at all (API Priority and Fairness)."""
    server.plan = [(429, {"Retry-After": "0"})]
    async with client_for(server) as c:
        await CREATE(c)
    assert server.seen == ["POST", "POST"]


async def test_retries_stop_after_max_retries(server: FakeServer) -> None:
    server.plan = [(503, {"Retry-After": "0"})] * 4
    async with client_for(server, max_retries=2) as c:
        with pytest.raises(errors.ServerError):
            await IDEMPOTENT["get"](c)
    assert len(server.seen) == 3


# ---------------------------------------------------------------- dead connections
def test_connection_defaults_match_client_go_and_a_healthy_watch_is_never_silent_that_long() -> (
    None
):
    """client-go's transport: dial 30 s, TCP keepalive 30 s, TLS handshake 10 s. A watch
    is dead after 60 s without a byte; the server ends each of ours sooner (by 54 s),
    so a quiet but healthy watch is never mistaken for a dead one."""
    assert (client_mod.DIAL_TIMEOUT, client_mod.TCP_KEEPALIVE) == (30.0, 30.0)
    assert client_mod.TLS_HANDSHAKE_TIMEOUT == 10.0
    assert client_mod.WATCH_IDLE_TIMEOUT <= 60.0
    longest_watch = informer_mod.WATCH_TIMEOUT_SECONDS * (1 + informer_mod.WATCH_TIMEOUT_JITTER)
    assert longest_watch < client_mod.WATCH_IDLE_TIMEOUT


def test_sockets_probe_an_idle_peer_every_keepalive_period() -> None:
    make = client_mod._keepalive_sockets(30.0)
    sock = make((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", 0)))
    try:
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        if hasattr(socket, "TCP_KEEPIDLE"):
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 30
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == 30
    finally:
        sock.close()


async def drain(c: Client, into: list[bytes] | None = None) -> None:
    """Read a watch to its end, keeping its lines in `into`."""
    async for line in c.watch_lines(CONFIGMAPS, "default", resource_version="1"):
        if into is not None:
            into.append(line)


@pytest.fixture
async def mute_port() -> AsyncIterator[int]:
    """A port that accepts TCP connections and never says a word (no TLS handshake)."""
    held: list[asyncio.StreamWriter] = []

    async def accept(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for writer in held:
            writer.transport.abort()
        server.close()
        await server.wait_closed()


class _Insecure(StaticCredentials):
    async def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx


@pytest.mark.parametrize("what", ["request", "watch"])
async def test_a_tls_handshake_that_never_completes_fails_at_the_handshake_timeout(
    mute_port: int, what: str
) -> None:
    """Without a handshake bound a request waited for its 30 s total, and a watch (no
    total) for asyncio's 60 s; with it both fail after `tls_handshake_timeout`."""
    config = ClusterConfig(f"https://127.0.0.1:{mute_port}", _Insecure())
    async with Client(config, tls_handshake_timeout=0.3, request_timeout=30) as c:
        started = time.monotonic()
        with pytest.raises((errors.ConnectionFailed, errors.ServerTimeout)):
            await (c.get(CONFIGMAPS, "a", "default") if what == "request" else drain(c))
        took = time.monotonic() - started
    assert took < 10, f"gave up after {took:.1f}s"


async def test_a_watch_silent_for_the_idle_timeout_is_given_up(server: FakeServer) -> None:
    """The server (or the path) stops sending mid-watch without closing: after
    `watch_idle_timeout` seconds of silence the watch raises ServerTimeout."""
    lines: list[bytes] = []
    async with client_for(server, watch_idle_timeout=0.3) as c:
        server.stream = [b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"2"}}}']
        with pytest.raises(errors.ServerTimeout, match="no byte in"):
            await drain(c, lines)
    assert len(lines) == 1


# ---------------------------------------------------------------- leadership
@pytest.mark.parametrize("verb", ["create", "replace", "delete", "apply", "merge_patch"])
async def test_a_closed_write_gate_refuses_a_write_without_sending_it(
    server: FakeServer, verb: str
) -> None:
    calls: dict[str, Call] = {**IDEMPOTENT, "create": CREATE}
    async with client_for(server) as c:
        c.write_gate = lambda: False
        with pytest.raises(errors.NotLeader):
            await calls[verb](c)
        await IDEMPOTENT["get"](c)  # reads are never gated
    assert server.seen == ["GET"]


async def test_the_write_gate_is_asked_again_before_each_retry(server: FakeServer) -> None:
    """A retry waits Retry-After (up to 30 s): leadership may have ended meanwhile."""
    server.plan = [(503, {"Retry-After": "0"})]
    answers = iter([True, False])
    async with client_for(server) as c:
        c.write_gate = lambda: next(answers)
        with pytest.raises(errors.NotLeader):
            await IDEMPOTENT["replace"](c)
    assert server.seen == ["PUT"]


@pytest.mark.parametrize("verb", ["create", "replace", "delete", "apply", "merge_patch"])
async def test_a_background_write_takes_a_slot_and_other_requests_do_not(
    server: FakeServer, verb: str
) -> None:
    """The writes of background work wait for a free slot (background.py); reads, and
    writes of other work, are sent at once."""
    calls: dict[str, Call] = {**IDEMPOTENT, "create": CREATE}
    gate = BackgroundWrites(1)
    async with client_for(server) as c:
        c.background_writes = gate
        with background(True):
            async with gate.slot():  # the one slot is taken
                waiting = asyncio.create_task(calls[verb](c))
                await asyncio.sleep(0.05)
                assert server.seen == []
                assert not waiting.done()
                await IDEMPOTENT["get"](c)  # a read of background work: not gated
                with background(False):
                    await calls[verb](c)  # a change's write: not gated
                assert len(server.seen) == 2
                assert not waiting.done()
            await asyncio.wait_for(waiting, 5)
    assert len(server.seen) == 3


@pytest.mark.parametrize("verb", ["create", "replace", "delete", "apply", "merge_patch"])
async def test_another_passes_write_waits_for_a_lone_changes_pass_and_reads_do_not(
    server: FakeServer, verb: str
) -> None:
    """While a lone change's pass is in flight, another pass's writes wait for it
    (background.py `ChangesFirst`); its reads, and the change's own writes, are sent."""
    calls: dict[str, Call] = {**IDEMPOTENT, "create": CREATE}
    first = ChangesFirst(30.0)
    async with client_for(server) as c:
        c.changes_first = first

        async def other_pass() -> None:
            async with first.pass_of(False):
                await calls[verb](c)

        async with first.pass_of(True):
            waiting = asyncio.create_task(other_pass())
            await asyncio.sleep(0.05)
            assert server.seen == []
            assert not waiting.done()
            async with first.pass_of(False):
                await IDEMPOTENT["get"](c)  # a read: not held
            await calls[verb](c)  # the change's own write
            assert len(server.seen) == 2
            assert not waiting.done()
        await asyncio.wait_for(waiting, 5)
    assert len(server.seen) == 3


# --------------------------------------------------------------------------- metrics


def _requests(registry: CollectorRegistry, code: str, method: str, host: str) -> float | None:
    return registry.get_sample_value(
        "rest_client_requests_total", {"code": code, "method": method, "host": host}
    )


async def test_every_attempt_is_counted_as_client_go_names_it(server: FakeServer) -> None:
    """rest_client_requests_total{code,method,host}: each attempt, retries included, by
    its answer; rest_client_request_duration_seconds{verb,host} times each one."""
    registry = CollectorRegistry()
    host = f"127.0.0.1:{server.port}"
    server.plan = [(503, {"Retry-After": "0"}), (404, {})]
    async with client_for(server, registry=registry) as c:
        with pytest.raises(errors.NotFound):
            await c.get(CONFIGMAPS, "a", "default")  # 503 (retried), then 404
        await c.create(CONFIGMAPS, CM)
    assert _requests(registry, "503", "GET", host) == 1.0
    assert _requests(registry, "404", "GET", host) == 1.0
    assert _requests(registry, "201", "POST", host) is None  # the fake answers 200
    assert _requests(registry, "200", "POST", host) == 1.0
    count = registry.get_sample_value(
        "rest_client_request_duration_seconds_count", {"verb": "GET", "host": host}
    )
    assert count == 2.0


async def test_a_request_without_an_answer_is_counted_as_an_error(server: FakeServer) -> None:
    registry = CollectorRegistry()
    dead = f"127.0.0.1:{_free_port()}"
    c = Client(ClusterConfig(f"http://{dead}", StaticCredentials()), registry=registry)
    async with c:
        with pytest.raises(errors.ConnectionFailed):
            await c.get(CONFIGMAPS, "a", "default")
        with pytest.raises(errors.ConnectionFailed):
            async for _ in c.watch_lines(CONFIGMAPS, "default", resource_version="1"):
                pass
    assert _requests(registry, "<error>", "GET", dead) == 1.0
    assert _requests(registry, "<error>", "WATCH", dead) == 1.0


async def test_a_watch_is_counted_once_at_its_answer(server: FakeServer) -> None:
    registry = CollectorRegistry()
    server.stream = [b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"2"}}}']
    async with client_for(server, registry=registry) as c:
        async for _ in c.watch_lines(CONFIGMAPS, "default", resource_version="1"):
            break
    assert _requests(registry, "200", "WATCH", f"127.0.0.1:{server.port}") == 1.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------- no answer, said as kubectl
async def _refused(host: str = "127.0.0.1") -> str:
    port = _free_port()
    async with Client(ClusterConfig(f"https://{host}:{port}", StaticCredentials())) as c:
        with pytest.raises(errors.ConnectionFailed) as e:
            await c.get(CONFIGMAPS, "a", "default")
    return str(e.value).replace(str(port), "PORT")


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_a_refused_connection_is_said_as_kubectl_says_it(host: str) -> None:
    """Not aiohttp's repr of its socket (`ssl:<ssl.SSLContext object at 0x...> [Connect
    call failed ...]`); `localhost` tries IPv6 and IPv4, both refused."""
    assert await _refused(host) == (
        f"The connection to the server {host}:PORT was refused - did you specify the right "
        "host or port?"
    )


async def test_an_unknown_host_is_said_as_kubectl_says_it() -> None:
    config = ClusterConfig("https://no-such-host.invalid:6443", StaticCredentials())
    async with Client(config) as c:
        with pytest.raises(errors.ConnectionFailed) as e:
            await c.get(CONFIGMAPS, "a", "default")
    assert str(e.value) == (
        "Unable to connect to the server: dial tcp: lookup no-such-host.invalid: no such host"
    )


async def test_a_tls_handshake_timeout_is_said_as_kubectl_says_it(mute_port: int) -> None:
    config = ClusterConfig(f"https://127.0.0.1:{mute_port}", _Insecure())
    async with Client(config, tls_handshake_timeout=0.3) as c:
        with pytest.raises(errors.ConnectionFailed) as e:
            await c.get(CONFIGMAPS, "a", "default")
    assert str(e.value) == "Unable to connect to the server: net/http: TLS handshake timeout"


async def test_an_untrusted_certificate_is_said_as_kubectl_says_it() -> None:
    from dynamo_pool_operator.runtime.serving.tls import ServingCertificate

    async def close(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    tls = ServingCertificate(None)  # self-signed: no CA the client trusts signed it
    server = await asyncio.start_server(close, "127.0.0.1", 0, ssl=tls.context)
    port = server.sockets[0].getsockname()[1]
    try:
        config = ClusterConfig(f"https://127.0.0.1:{port}", StaticCredentials())
        async with Client(config) as c:
            with pytest.raises(errors.ConnectionFailed) as e:
                await c.get(CONFIGMAPS, "a", "default")
    finally:
        server.close()
        await server.wait_closed()
    said = str(e.value)
    assert said.startswith("Unable to connect to the server: tls: failed to verify certificate: ")
    assert "SSLContext" not in said, said
    assert "0x" not in said, said


async def test_a_watch_that_cannot_connect_names_its_resource_and_the_refusal() -> None:
    port = _free_port()
    async with Client(ClusterConfig(f"http://127.0.0.1:{port}", StaticCredentials())) as c:
        with pytest.raises(errors.ConnectionFailed) as e:
            async for _ in c.watch_lines(CONFIGMAPS, "default", resource_version="1"):
                pass
    assert str(e.value) == (
        f"watch configmaps: The connection to the server 127.0.0.1:{port} was refused - "
        "did you specify the right host or port?"
    )
