"""Secure metrics against the real API server: who may scrape is the cluster's RBAC.

Three ServiceAccounts with tokens from the TokenRequest API, as pods get them: the
operator (granted the shipped metrics-auth rules, so it may review tokens and access),
a scraper (granted the shipped metrics-reader rule, `get /metrics`) and a stranger
(granted nothing). The metrics server is the operator's own `ProbeServer` over HTTPS
with a self-signed certificate; what the API server answers decides every response.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter

from dynamo_pool_operator import rbac
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.auth.cluster import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.serving.auth import REVIEW_BURST, REVIEW_QPS, DelegatedAuth
from dynamo_pool_operator.runtime.serving.server import Probes, ProbeServer
from dynamo_pool_operator.runtime.serving.tls import ServingCertificate
from tests.integration.support.race_fixtures import Grants

pytestmark = pytest.mark.timeout(120)

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


@pytest.fixture
async def scene(control_plane: ControlPlane, namespace: str) -> AsyncIterator[Scene]:
    s = Scene(control_plane, namespace)
    await s.grant("operator", "auth", rbac.metrics_auth_rules())
    await s.grant("scraper", "reader", rbac.metrics_reader_rules())
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    Counter(SERIES.removesuffix("_total"), "a series to find in the scrape", registry=reg).inc()
    return reg


@dataclass(frozen=True)
class Served:
    server: ProbeServer
    auth: DelegatedAuth
    url: str  # the metrics endpoint, HTTPS
    health: str  # the liveness probe, plain HTTP


@contextlib.asynccontextmanager
async def serving(
    scene: Scene, registry: CollectorRegistry, reviewer: str = "operator", **auth: Any
) -> AsyncIterator[Served]:
    """The metrics server, its reviews made as ServiceAccount `reviewer` with `auth`'s
    options; stopped on the way out."""
    async with scene.client(reviewer) as client:
        delegated = DelegatedAuth(client, **auth)
        server = ProbeServer(
            Probes(liveness={"ping": lambda: True}),
            registry,
            health_address="127.0.0.1:0",
            metrics_address="127.0.0.1:0",
            metrics_tls=ServingCertificate(),
            metrics_auth=delegated,
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


async def test_a_permitted_token_scrapes_and_every_other_is_refused(
    scene: Scene, registry: CollectorRegistry
) -> None:
    async with serving(scene, registry) as served:
        url = served.url
        status, body = await scrape(url, scene.tokens["scraper"])
        assert status == 200, body
        assert f"{SERIES} 1.0" in body

        status, body = await scrape(url, scene.tokens["stranger"])
        assert status == 403, body
        assert f"denied for user {sa_user(scene.ns, 'stranger')}" in body
        assert SERIES not in body

        status, body = await scrape(url, None)
        assert (status, SERIES in body) == (401, False)
        status, body = await scrape(url, "not-a-token")
        assert (status, SERIES in body) == (401, False)

        # Plain HTTP on the metrics port is not served at all...
        plain = url.replace("https://", "http://")
        with pytest.raises(aiohttp.ClientError):
            await scrape(plain, scene.tokens["scraper"])
        # ... while the probes stay plain HTTP for kubelet, on their own listener.
        assert served.server.bound["health"] != served.server.bound["metrics"]
        async with aiohttp.ClientSession() as http, http.get(served.health) as resp:
            assert resp.status == 200


async def test_reviews_are_cached_so_a_busy_scraper_costs_two_reviews(
    scene: Scene, registry: CollectorRegistry
) -> None:
    async with serving(scene, registry) as served:
        for _ in range(5):
            assert (await scrape(served.url, scene.tokens["scraper"]))[0] == 200
        assert served.auth.reviews == 2  # one TokenReview, one SubjectAccessReview
        assert (await scrape(served.url, scene.tokens["stranger"]))[0] == 403
        assert (await scrape(served.url, scene.tokens["stranger"]))[0] == 403
        assert served.auth.reviews == 4


async def test_an_operator_without_the_review_rules_answers_500_not_401(
    scene: Scene, registry: CollectorRegistry
) -> None:
    """The stranger may not create reviews: the API server refuses them, and a scraper
    with a good token must not be told that its token is bad."""
    async with serving(scene, registry, "stranger") as served:
        status, body = await scrape(served.url, scene.tokens["scraper"])
        assert status == 500, body
        assert "Authentication failed" in body
        assert SERIES not in body


async def test_a_grant_made_later_is_honoured_once_the_denial_expires(
    scene: Scene, registry: CollectorRegistry
) -> None:
    # No denial caching here, so the test need not wait the 30 s TTL out.
    async with serving(scene, registry, deny_ttl=0) as served:
        assert (await scrape(served.url, scene.tokens["stranger"]))[0] == 403
        await scene.grant("stranger", "reader", rbac.metrics_reader_rules())
        for _ in range(100):  # the RBAC cache of the API server follows within ms
            if (await scrape(served.url, scene.tokens["stranger"]))[0] == 200:
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the stranger's new grant was never honoured")


async def token_reviews_since(cp: ControlPlane, since: int) -> int:
    """The TokenReviews the API server received from the test's reviewer (audit log)."""
    writes = await asyncio.to_thread(cp.audit.writes, since, user_agent_prefix=USER_AGENT)
    return sum(1 for w in writes if w.resource == "tokenreviews" and w.verb == "create")


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


async def test_one_unknown_token_costs_one_token_review_however_often_it_asks(
    scene: Scene, registry: CollectorRegistry
) -> None:
    """Fifty requests at once with one token the API server rejects make one review
    (single flight), and the rejection is remembered: asking again makes none."""
    cp = scene.cp
    async with serving(scene, registry) as served:
        url = served.url
        unknown = secrets.token_urlsafe(24)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as http:
            since = cp.audit.offset()
            same = await scrape_many(http, url, [unknown] * 50)
            assert {s for s, _ in same} == {401}, same
            assert await token_reviews_since(cp, since) == 1
        since = cp.audit.offset()
        again = [await scrape(url, unknown) for _ in range(5)]
        assert {s for s, _ in again} == {401}
        assert await token_reviews_since(cp, since) == 0


async def test_a_flood_of_unknown_tokens_makes_a_bounded_number_of_token_reviews(
    scene: Scene, registry: CollectorRegistry
) -> None:
    """600 random tokens, 300 at once and 300 more over 20 connections, share a small
    budget of reviews; the rest are refused with 429 and Retry-After. A scraper whose
    token the API server accepted before is served at once during the flood even though
    its review has expired."""
    cp = scene.cp
    # The scraper's review expires at once, so its scrape during the flood needs a
    # new TokenReview: the budget must not shut out a token seen accepted.
    async with (
        serving(scene, registry, authn_ttl=0.001) as served,
        aiohttp.ClientSession() as scraper,
    ):
        url = served.url
        assert (await scrape(url, scene.tokens["scraper"], scraper))[0] == 200
        since = cp.audit.offset()
        start = time.monotonic()
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            # 300 connections open first (no token: no review), so that the flood's
            # requests arrive at once, and the scraper's latency is the server's
            # answer and not 300 TLS handshakes in this process.
            assert {s for s, _ in await scrape_many(http, url, [None] * 300)} == {401}
            at_once, (status, body, scraper_took) = await asyncio.gather(
                scrape_many(http, url, random_tokens(300)),
                timed_scrape(scraper, url, scene.tokens["scraper"], after=0.01),
            )
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=20)) as http:
            spread = await scrape_many(http, url, random_tokens(300))
        took = time.monotonic() - start
        reviews = await token_reviews_since(cp, since)
        budget = REVIEW_BURST + math.ceil(REVIEW_QPS * took) + 1  # + the scraper's
        assert reviews <= budget, f"{reviews} TokenReviews in {took:.2f}s, budget {budget}"
        assert (status, SERIES in body) == (200, True), body
        assert scraper_took < 1, f"the permitted scrape took {scraper_took:.2f}s"
        for answers in (at_once, spread):
            statuses = {s for s, _ in answers}
            assert statuses == {401, 429}, statuses
            refused = [retry for s, retry in answers if s == 429]
            assert all(r is not None and int(r) >= 1 for r in refused), refused
