"""Secure metrics against the real API server: who may scrape is the cluster's RBAC.

The scene (tests/integration/support/metrics_scene.py): an operator, a scraper and a
stranger ServiceAccount with TokenRequest tokens, and the operator's own metrics server
over HTTPS; what the API server answers decides every response.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator import rbac
from dynamo_pool_operator.runtime.serving.auth import REVIEW_BURST, REVIEW_QPS
from tests.integration.support.metrics_scene import (
    SERIES,
    Scene,
    random_tokens,
    reviews_since,
    sa_user,
    scrape,
    scrape_many,
    serving,
    timed_scrape,
)

pytestmark = pytest.mark.timeout(120)


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
            assert await reviews_since(cp, since) == 1
        since = cp.audit.offset()
        again = [await scrape(url, unknown) for _ in range(5)]
        assert {s for s, _ in again} == {401}
        assert await reviews_since(cp, since) == 0


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
    # 300 connections at once: what is bounded here is the reviews, not the connections.
    async with (
        serving(scene, registry, authn_ttl=0.001, max_connections=1000) as served,
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
        reviews = await reviews_since(cp, since)
        budget = REVIEW_BURST + math.ceil(REVIEW_QPS * took) + 1  # + the scraper's
        assert reviews <= budget, f"{reviews} TokenReviews in {took:.2f}s, budget {budget}"
        assert (status, SERIES in body) == (200, True), body
        assert scraper_took < 1, f"the permitted scrape took {scraper_took:.2f}s"
        for answers in (at_once, spread):
            statuses = {s for s, _ in answers}
            assert statuses == {401, 429}, statuses
            refused = [retry for s, retry in answers if s == 429]
            assert all(r is not None and int(r) >= 1 for r in refused), refused
