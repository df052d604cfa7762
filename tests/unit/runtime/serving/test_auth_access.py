"""Secure metrics' SubjectAccessReviews: one per (user, verb, path) under way, and those
of users not seen allowed within the budget the TokenReviews of unknown tokens share."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.serving.auth import (
    ALLOW_TTL,
    DENY_TTL,
    DelegatedAuth,
)
from tests.clock import FakeClock
from tests.unit.runtime.serving.reviewer import GET, Reviewer, auth_of, settle, verdicts


@pytest.mark.parametrize(("allowed", "status"), [(False, 403), (True, 200)])
async def test_requests_of_one_user_at_once_share_one_access_review(
    allowed: bool, status: int
) -> None:
    clock, reviewer = FakeClock(), Reviewer(allowed=allowed)
    reviewer.access_gate = asyncio.Event()
    auth = auth_of(reviewer, clock)
    waiting = asyncio.ensure_future(verdicts(auth, ["good"] * 300))
    await settle()
    assert (reviewer.token_reviews, reviewer.access_reviews) == (1, 1)
    reviewer.access_gate.set()
    assert {v.status for v in await waiting} == {status}
    # The answer is cached: asking again makes no review ...
    assert (await auth.verdict("Bearer good", *GET)).status == status
    assert reviewer.access_reviews == 1
    # ... and once it expires, requests at once share one review again.
    await clock.advance(ALLOW_TTL if allowed else DENY_TTL)
    assert {v.status for v in await verdicts(auth, ["good"] * 300)} == {status}
    assert reviewer.access_reviews == 2


async def test_a_failed_access_review_answers_500_to_every_waiter_and_is_not_remembered() -> None:
    reviewer = Reviewer()
    reviewer.access_gate, reviewer.access_fail = asyncio.Event(), True
    auth = auth_of(reviewer, FakeClock())
    waiting = asyncio.ensure_future(verdicts(auth, ["good"] * 10))
    await settle()
    reviewer.access_gate.set()
    answers = await waiting
    assert {(v.status, v.message) for v in answers} == {(500, "Authorization for user prom failed")}
    assert reviewer.access_reviews == 1
    reviewer.access_fail = False
    assert (await auth.verdict("Bearer good", *GET)).status == 200
    assert reviewer.access_reviews == 2


async def test_a_waiter_that_gives_up_does_not_end_the_access_review_of_the_others() -> None:
    reviewer = Reviewer()
    reviewer.access_gate = asyncio.Event()
    auth = auth_of(reviewer, FakeClock())
    first = asyncio.ensure_future(auth.verdict("Bearer good", *GET))
    second = asyncio.ensure_future(auth.verdict("Bearer good", *GET))
    await settle()
    first.cancel()
    await settle()
    reviewer.access_gate.set()
    assert (await second).status == 200
    assert first.cancelled()
    assert reviewer.access_reviews == 1
    assert (await auth.verdict("Bearer good", *GET)).status == 200  # cached
    assert reviewer.access_reviews == 1


async def accepted_users(auth: DelegatedAuth, reviewer: Reviewer, n: int) -> list[str]:
    """`n` tokens of users of their own names, each reviewed (and cached) already."""
    tokens = [f"u{i}" for i in range(n)]
    reviewer.accepted.update(tokens)
    for t in tokens:
        assert await auth.authenticate(t) is not None
    return tokens


async def test_access_reviews_of_users_not_seen_allowed_at_once_are_bounded() -> None:
    reviewer = Reviewer(allowed=False)
    auth = auth_of(reviewer, FakeClock(), review_in_flight=2, review_burst=100)
    tokens = await accepted_users(auth, reviewer, 5)
    reviewer.access_gate = asyncio.Event()
    waiting = asyncio.ensure_future(verdicts(auth, tokens))
    await settle()
    assert reviewer.access_reviews == 2
    reviewer.access_gate.set()
    answers = await waiting
    assert [(v.status, v.retry_after) for v in answers] == [(403, None)] * 2 + [(429, 1)] * 3
    assert answers[-1].message == "Too many access reviews, retry later"
    # The places are free again once the reviews have ended.
    assert [v.status for v in await verdicts(auth, tokens[2:4])] == [403, 403]


async def test_access_reviews_of_users_not_seen_allowed_take_from_the_token_budget() -> None:
    clock, reviewer = FakeClock(), Reviewer()
    auth = auth_of(reviewer, clock, review_in_flight=1, review_burst=2, review_qps=0.5)
    # One TokenReview, one SubjectAccessReview: the burst is spent ...
    assert (await auth.verdict("Bearer good", *GET)).status == 200
    assert (await auth.verdict("Bearer bad", *GET)).retry_after == 2
    # ... and a SubjectAccessReview under way holds the one place of a TokenReview.
    await clock.advance(4)
    tokens = await accepted_users(auth, reviewer, 1)
    reviewer.access_gate = asyncio.Event()
    waiting = asyncio.ensure_future(auth.verdict(f"Bearer {tokens[0]}", *GET))
    await settle()
    refused = await auth.verdict("Bearer bad", *GET)
    assert (refused.status, refused.message) == (429, "Too many token reviews, retry later")
    reviewer.access_gate.set()
    assert (await waiting).status == 200
    assert auth.refused == 2


async def test_a_user_seen_allowed_is_reviewed_outside_the_budget() -> None:
    clock, reviewer = FakeClock(), Reviewer()
    auth = auth_of(reviewer, clock, review_in_flight=1, review_burst=2, review_qps=1e-6)
    assert (await auth.verdict("Bearer good", *GET)).status == 200
    assert (await auth.verdict("Bearer bad", *GET)).status == 429  # the budget is spent
    await clock.advance(ALLOW_TTL)
    assert (await auth.verdict("Bearer good", *GET)).status == 200
    assert reviewer.access_reviews == 2
    # ... while one of them is under way too.
    reviewer.access_gate = asyncio.Event()
    await clock.advance(ALLOW_TTL)
    waiting = asyncio.ensure_future(auth.verdict("Bearer good", *GET))
    await settle()
    assert (await auth.verdict("Bearer bad", *GET)).status == 429
    reviewer.access_gate.set()
    assert (await waiting).status == 200


async def test_a_user_allowed_is_known_for_the_known_ttl_then_budgeted_again() -> None:
    clock, reviewer = FakeClock(), Reviewer()
    # The token stays cached throughout; only the user's decision expires.
    kw = {"authn_ttl": 1000, "allow_ttl": 10, "known_ttl": 100, "review_burst": 2}
    auth = auth_of(reviewer, clock, review_qps=1e-6, **kw)
    assert (await auth.verdict("Bearer good", *GET)).status == 200  # the burst is spent
    await clock.advance(10)
    assert (await auth.verdict("Bearer good", *GET)).status == 200  # known: reviewed
    await clock.advance(100)
    answer = await auth.verdict("Bearer good", *GET)
    assert (answer.status, answer.message) == (429, "Too many access reviews, retry later")
    assert (reviewer.token_reviews, reviewer.access_reviews) == (1, 2)


async def test_a_user_denied_after_being_allowed_goes_back_to_the_budget() -> None:
    clock, reviewer = FakeClock(), Reviewer()
    auth = auth_of(reviewer, clock, review_burst=2, review_qps=1e-6)
    assert (await auth.verdict("Bearer good", *GET)).status == 200
    reviewer.denied.add("prom")
    await clock.advance(ALLOW_TTL)
    assert (await auth.verdict("Bearer good", *GET)).status == 403  # known: reviewed
    await clock.advance(DENY_TTL)
    answer = await auth.verdict("Bearer good", *GET)
    assert (answer.status, answer.message) == (429, "Too many access reviews, retry later")
    assert reviewer.access_reviews == 2


async def test_access_reviews_are_counted_by_result() -> None:
    clock, reviewer, registry = FakeClock(), Reviewer(), CollectorRegistry()
    auth = DelegatedAuth(reviewer, clock=clock, registry=registry, review_burst=6, review_qps=1e-6)
    tokens = await accepted_users(auth, reviewer, 2)
    reviewer.denied.add(tokens[1])
    # good: a TokenReview and a SubjectAccessReview; u0, u1: one each. The burst is spent.
    assert [v.status for v in await verdicts(auth, ["good", *tokens])] == [200, 200, 403]
    await clock.advance(DENY_TTL)  # u1 was denied: budgeted, and refused
    assert (await auth.verdict(f"Bearer {tokens[1]}", *GET)).status == 429
    reviewer.access_fail = True
    await clock.advance(ALLOW_TTL)  # prom was allowed: reviewed outside the budget
    assert (await auth.verdict("Bearer good", *GET)).status == 500

    def value(result: str) -> float | None:
        return registry.get_sample_value("metrics_auth_access_reviews_total", {"result": result})

    assert [value(r) for r in ("allowed", "denied", "failed", "refused")] == [2, 1, 1, 1]
