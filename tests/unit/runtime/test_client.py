"""The REST client's own policies against a small HTTP server standing in for the API
server: which answers it retries, for which verbs, and what it refuses to send.

Only the client's decisions are under test here; what the real API server answers is
tested in tests/integration/test_runtime_client.py.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp import web

from dynamo_pool_operator.runtime import errors
from dynamo_pool_operator.runtime.auth import ClusterConfig
from dynamo_pool_operator.runtime.client import Client
from dynamo_pool_operator.runtime.resources import CONFIGMAPS

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}


class _PlainHttp:
    async def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context()

    async def headers(self) -> dict[str, str]:
        return {}

    def invalidate(self) -> None:
        pass


class FakeServer:
    """Answers each request with the next planned (status, headers), then 200 + `CM`."""

    def __init__(self) -> None:
        self.plan: list[tuple[int, dict[str, str]]] = []
        self.seen: list[str] = []
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(request.method)
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
        await runner.cleanup()


def client_for(server: FakeServer, **kw: Any) -> Client:
    return Client(ClusterConfig(f"http://127.0.0.1:{server.port}", _PlainHttp()), **kw)


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
