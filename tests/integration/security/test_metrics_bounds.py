"""What whoever reaches the metrics port can make the operator spend, against the real
API server: SubjectAccessReviews (on the operator's own identity and priority-and-fairness
flow) and connections.

Any token the API server accepts reaches the SubjectAccessReview, scrape permission or
not: a pod's ServiceAccount token is enough. So the reviews are counted where they land,
in the API server's audit log, for the tokens of the scene's stranger (valid, allowed
nothing) and scraper (allowed `get /metrics`).
"""

from __future__ import annotations

import asyncio
import math
import ssl
import time
from collections.abc import Callable

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.serving.auth import (
    REVIEW_BURST,
    REVIEW_QPS,
    DelegatedAuth,
    ReviewRefused,
    User,
)
from dynamo_pool_operator.runtime.serving.listener import MAX_CONNECTIONS
from tests.integration.support.metrics_scene import (
    SERIES,
    Scene,
    mint_token,
    reviews_since,
    scrape,
    scrape_many,
    serving,
)

pytestmark = pytest.mark.timeout(180)

AT_ONCE = 300


async def burst(url: str, token: str) -> list[int]:
    """`AT_ONCE` scrapes with `token` at once, on connections opened first (a request
    without a token costs no review) so that the requests arrive together."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        assert {s for s, _ in await scrape_many(http, url, [None] * AT_ONCE)} == {401}
        return [s for s, _ in await scrape_many(http, url, [token] * AT_ONCE)]


@pytest.mark.parametrize(("who", "status"), [("stranger", 403), ("scraper", 200)])
async def test_scrapes_at_once_with_one_token_make_one_review_of_each_kind(
    scene: Scene, registry: CollectorRegistry, who: str, status: int
) -> None:
    """300 scrapes at once with one token made 300 SubjectAccessReviews (and one
    TokenReview): every request waited for the token's one review, then asked its own.
    Requests that ask the same question share one review, and when the answers expire
    the next burst costs one of each again. (The connections are not what is bounded
    here, so the listener takes them all.)"""
    cp, token = scene.cp, scene.tokens[who]
    ttl = 5.0  # the token's review and the decision expire together
    async with serving(
        scene, registry, max_connections=2 * AT_ONCE, authn_ttl=ttl, allow_ttl=ttl, deny_ttl=ttl
    ) as served:
        for _ in range(2):
            since = cp.audit.offset()
            statuses = await burst(served.url, token)
            assert set(statuses) == {status}, statuses
            made = (
                await reviews_since(cp, since, "tokenreviews"),
                await reviews_since(cp, since, "subjectaccessreviews"),
            )
            assert made == (1, 1), f"{who}: (TokenReviews, SubjectAccessReviews) = {made}"
            # The reviews were made within the burst (after its connections opened,
            # which may take a while): once it is over, a TTL more expires them.
            await asyncio.sleep(ttl + 0.5)


async def test_scrapes_of_many_users_not_allowed_stay_within_the_review_budget(
    scene: Scene, registry: CollectorRegistry
) -> None:
    """Sixty tokens of the stranger, each its own user to review (the API server names
    the credential in the user's extra), their TokenReviews made first; then five
    scrapes with each at once. A SubjectAccessReview of a user not seen allowed takes a
    place of the budget the TokenReviews of unknown tokens take: all of them stay
    within it, and the rest are refused with 429 and Retry-After."""
    cp = scene.cp
    tokens = [mint_token(cp, scene.ns, "stranger") for _ in range(60)]
    async with (
        serving(scene, registry, max_connections=2 * AT_ONCE) as served,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http,
    ):
        users = {await authenticated(served.auth, t) for t in tokens}
        assert len(users) == len(tokens), "the tokens are not users of their own"
        assert {s for s, _ in await scrape_many(http, served.url, [None] * AT_ONCE)} == {401}
        since = cp.audit.offset()
        start = time.monotonic()
        answers = await scrape_many(http, served.url, tokens * (AT_ONCE // len(tokens)))
        took = time.monotonic() - start
    made = await reviews_since(cp, since, "tokenreviews") + await reviews_since(
        cp, since, "subjectaccessreviews"
    )
    budget = REVIEW_BURST + math.ceil(REVIEW_QPS * took)
    assert made <= budget, f"{made} reviews in {took:.2f}s, budget {budget}"
    statuses = {s for s, _ in answers}
    assert statuses <= {403, 429}, answers
    assert 429 in statuses, answers
    assert all(int(r or 0) >= 1 for s, r in answers if s == 429), answers


async def authenticated(auth: DelegatedAuth, token: str) -> User:
    """The token's user, its review waiting for the budget's places as a scraper would."""
    while True:
        try:
            user = await auth.authenticate(token)
        except ReviewRefused as e:
            await asyncio.sleep(e.retry_after)
            continue
        assert user is not None
        return user


async def test_the_metrics_listener_holds_a_bounded_number_of_connections(
    scene: Scene, registry: CollectorRegistry
) -> None:
    """Connections held open (TLS done, no request) fill the listener's places; one more
    is closed at once, and a scraper is served as soon as a place is free."""
    async with serving(scene, registry) as served:
        (listener,) = served.server._listeners
        host, port = served.server.bound["metrics"]
        held = [
            (await asyncio.open_connection(host, port, ssl=no_verify()))[1]
            for _ in range(MAX_CONNECTIONS)
        ]
        await until(lambda: listener.open == MAX_CONNECTIONS)
        with pytest.raises(aiohttp.ClientError):
            await scrape(served.url, scene.tokens["scraper"])
        assert registry.get_sample_value("metrics_connections_refused_total") == 1
        held.pop().close()
        await until(lambda: listener.open < MAX_CONNECTIONS)
        status, body = await scrape(served.url, scene.tokens["scraper"])
        assert (status, SERIES in body) == (200, True), body
        for writer in held:
            writer.close()


def no_verify() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not so within {timeout}s")
