"""The scene of the secure metrics tests: ServiceAccounts with real tokens, and the
operator's own metrics server reviewing them with a real API server.

Three ServiceAccounts with tokens from the TokenRequest API, as pods get them: the
operator (granted the shipped metrics-auth rules, so it may review tokens and access),
a scraper (granted the shipped metrics-reader rule, `get /metrics`) and a stranger
(granted nothing). The metrics server is the operator's own `ProbeServer` over HTTPS
with a self-signed certificate; what the API server answers decides every response.
The `scene` and `registry` fixtures are in this directory's conftest.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.serving.auth import DelegatedAuth
from dynamo_pool_operator.runtime.serving.listener import MAX_CONNECTIONS
from dynamo_pool_operator.runtime.serving.server import Probes, ProbeServer
from dynamo_pool_operator.runtime.serving.tls import ServingCertificate
from tests.integration.support.race_fixtures import Grants

SERIES = "dpo_secure_metrics_test_total"
USER_AGENT = "dpo-secure-metrics-test"


def mint_token(cp: ControlPlane, namespace: str, name: str) -> str:
    """A ServiceAccount (created if missing) and a token for it from TokenRequest."""
    cp.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": name}}
    )
    status, body = cp.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    assert status == 201, body
    return str(body["status"]["token"])


def sa_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


async def scrape(
    url: str, token: str | None, http: aiohttp.ClientSession | None = None
) -> tuple[int, str]:
    """One scrape; on `http`'s connections when given, else on a new one."""
    if http is None:
        async with aiohttp.ClientSession() as new:
            return await scrape(url, token, new)
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with http.get(url, headers=headers, ssl=False) as r:
        return r.status, await r.text()


class Scene:
    def __init__(self, cp: ControlPlane, namespace: str) -> None:
        self.cp, self.ns = cp, namespace
        suffix = uuid.uuid4().hex[:8]
        self.grants: list[Grants] = []
        self.names = {k: f"dpo-{k}-{suffix}" for k in ("auth", "reader")}
        self.tokens = {n: mint_token(cp, namespace, n) for n in ("operator", "scraper", "stranger")}

    async def grant(self, sa: str, which: str, rules: list[dict[str, object]]) -> None:
        g = Grants(self.cp, sa_user(self.ns, sa))
        self.grants.append(g)
        await g.grant(f"{self.names[which]}-{sa}", rules)

    def client(self, sa: str) -> Client:
        path = self.cp.token_kubeconfig(self.tokens[sa], user=f"{self.ns}-{sa}")
        return Client(load_kubeconfig(path), user_agent=USER_AGENT)

    async def close(self) -> None:
        for g in self.grants:
            await g.revoke_all()


@dataclass(frozen=True)
class Served:
    server: ProbeServer
    auth: DelegatedAuth
    url: str  # the metrics endpoint, HTTPS
    health: str  # the liveness probe, plain HTTP


@contextlib.asynccontextmanager
async def serving(
    scene: Scene,
    registry: CollectorRegistry,
    reviewer: str = "operator",
    *,
    max_connections: int = MAX_CONNECTIONS,
    **auth: Any,
) -> AsyncIterator[Served]:
    """The metrics server, its reviews made as ServiceAccount `reviewer` with `auth`'s
    options, holding `max_connections` connections; stopped on the way out."""
    async with scene.client(reviewer) as client:
        delegated = DelegatedAuth(client, **auth)
        server = ProbeServer(
            Probes(liveness={"ping": lambda: True}),
            registry,
            health_address="127.0.0.1:0",
            metrics_address="127.0.0.1:0",
            metrics_tls=ServingCertificate(),
            metrics_auth=delegated,
            metrics_max_connections=max_connections,
        )
        await server.start()
        mhost, mport = server.bound["metrics"]
        hhost, hport = server.bound["health"]
        try:
            yield Served(
                server,
                delegated,
                f"https://{mhost}:{mport}/metrics",
                f"http://{hhost}:{hport}/healthz",
            )
        finally:
            await server.stop()


async def reviews_since(cp: ControlPlane, since: int, resource: str = "tokenreviews") -> int:
    """The reviews of `resource` (tokenreviews, subjectaccessreviews) the API server
    received from the test's reviewer after audit offset `since` (the audit log)."""
    writes = await asyncio.to_thread(cp.audit.writes, since, user_agent_prefix=USER_AGENT)
    return sum(1 for w in writes if w.resource == resource and w.verb == "create")


async def scrape_many(
    http: aiohttp.ClientSession, url: str, tokens: list[str] | list[None]
) -> list[tuple[int, str | None]]:
    """Every token's scrape at once (None: no token): (status, Retry-After) of each."""

    async def one(token: str | None) -> tuple[int, str | None]:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        async with http.get(url, headers=headers, ssl=False) as r:
            await r.read()
            return r.status, r.headers.get("Retry-After")

    return await asyncio.gather(*(one(t) for t in tokens))


def random_tokens(n: int) -> list[str]:
    return [secrets.token_urlsafe(24) for _ in range(n)]


async def timed_scrape(
    http: aiohttp.ClientSession, url: str, token: str, *, after: float
) -> tuple[int, str, float]:
    """`scrape` on `http`, `after` seconds from now: (status, body, how long it took)."""
    await asyncio.sleep(after)
    start = time.monotonic()
    status, body = await scrape(url, token, http)
    return status, body, time.monotonic() - start
