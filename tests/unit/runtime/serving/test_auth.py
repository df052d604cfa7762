"""Secure metrics' caches, header parsing and TokenReviews (SubjectAccessReviews:
test_auth_access.py; what the API server decides is tested against a real one in
tests/integration/security/)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.serving.auth import (
    ALLOW_TTL,
    AUTHN_TTL,
    DENY_TTL,
    KNOWN_TTL,
    REJECT_TTL,
    REVIEW_BURST,
    REVIEW_IN_FLIGHT,
    REVIEW_QPS,
    DelegatedAuth,
    bearer_token,
)
from tests.clock import FakeClock
from tests.unit.runtime.serving.reviewer import GET, Reviewer, auth_of, settle, verdicts


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("  Bearer   abc  ", "abc"),
        ("Basic abc", None),
        ("Bearer", None),
        ("Bearer  ", None),
        ("", None),
        (None, None),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


async def test_answers_and_ttls_are_controller_runtimes() -> None:
    clock, reviewer = FakeClock(), Reviewer()
    auth = DelegatedAuth(reviewer, clock=clock)
    assert (await auth.verdict("Bearer good", "get", "/metrics")).status == 200
    assert (await auth.verdict("Bearer good", "get", "/metrics")).status == 200
    assert reviewer.kinds == ["TokenReview", "SubjectAccessReview"]
    await clock.advance(AUTHN_TTL)
    assert (await auth.verdict("Bearer good", "get", "/metrics")).status == 200
    assert reviewer.kinds[2:] == ["TokenReview"]  # the decision is still cached
    await clock.advance(ALLOW_TTL)
    await auth.verdict("Bearer good", "get", "/metrics")
    assert reviewer.kinds[3:] == ["TokenReview", "SubjectAccessReview"]


async def test_a_denial_is_cached_for_less_time() -> None:
    clock, reviewer = FakeClock(), Reviewer(allowed=False)
    auth = DelegatedAuth(reviewer, clock=clock)
    assert (await auth.verdict("Bearer good", "get", "/metrics")).status == 403
    await clock.advance(DENY_TTL - 1)
    await auth.verdict("Bearer good", "get", "/metrics")
    assert reviewer.kinds.count("SubjectAccessReview") == 1
    await clock.advance(1)
    await auth.verdict("Bearer good", "get", "/metrics")
    assert reviewer.kinds.count("SubjectAccessReview") == 2


async def test_a_bad_token_is_401_and_remembered() -> None:
    reviewer = Reviewer()
    auth = DelegatedAuth(reviewer, clock=FakeClock())
    for _ in range(3):
        assert (await auth.verdict("Bearer bad", "get", "/metrics")).status == 401
    assert reviewer.kinds == ["TokenReview"]
    assert (await auth.verdict(None, "get", "/metrics")).status == 401


def test_the_review_budget_is_small() -> None:
    assert (REVIEW_IN_FLIGHT, REVIEW_BURST, REVIEW_QPS) == (4, 20, 5.0)
    assert REJECT_TTL == AUTHN_TTL
    assert KNOWN_TTL == 3600.0


async def test_requests_with_one_token_at_once_share_one_review() -> None:
    reviewer = Reviewer()
    reviewer.gate = asyncio.Event()
    # Those who join a review under way take no place of the budget: two places for the
    # two TokenReviews, a third for the one SubjectAccessReview of the accepted user.
    auth = auth_of(reviewer, FakeClock(), review_in_flight=2, review_burst=3)
    waiting = asyncio.ensure_future(verdicts(auth, ["bad"] * 50 + ["good"] * 50))
    await settle()
    assert reviewer.token_reviews == 2
    reviewer.gate.set()
    answers = await waiting
    assert [v.status for v in answers] == [401] * 50 + [200] * 50
    assert reviewer.kinds == ["TokenReview", "TokenReview", "SubjectAccessReview"]


async def test_a_failed_review_answers_500_to_every_waiter_and_is_not_remembered() -> None:
    reviewer = Reviewer()
    reviewer.gate, reviewer.fail = asyncio.Event(), True
    auth = auth_of(reviewer, FakeClock())
    waiting = asyncio.ensure_future(verdicts(auth, ["good"] * 10))
    await settle()
    reviewer.gate.set()
    assert {v.status for v in await waiting} == {500}
    assert reviewer.token_reviews == 1
    reviewer.fail = False
    assert (await auth.verdict("Bearer good", *GET)).status == 200
    assert reviewer.token_reviews == 2


async def test_a_waiter_that_gives_up_does_not_end_the_review_of_the_others() -> None:
    reviewer = Reviewer()
    reviewer.gate = asyncio.Event()
    auth = auth_of(reviewer, FakeClock())
    first = asyncio.ensure_future(auth.verdict("Bearer good", *GET))
    second = asyncio.ensure_future(auth.verdict("Bearer good", *GET))
    await settle()
    first.cancel()
    reviewer.gate.set()
    assert (await second).status == 200
    assert reviewer.token_reviews == 1


async def test_reviews_of_unknown_tokens_at_once_are_bounded() -> None:
    reviewer = Reviewer()
    reviewer.gate = asyncio.Event()
    auth = auth_of(reviewer, FakeClock(), review_in_flight=2, review_burst=100)
    waiting = asyncio.ensure_future(verdicts(auth, [f"t{i}" for i in range(5)]))
    await settle()
    assert reviewer.token_reviews == 2
    reviewer.gate.set()
    answers = await waiting
    assert [(v.status, v.retry_after) for v in answers] == [(401, None)] * 2 + [(429, 1)] * 3
    assert auth.refused == 3
    # The places are free again once the reviews have ended.
    assert [v.status for v in await verdicts(auth, ["t5", "t6"])] == [401, 401]


async def test_the_review_budget_refuses_past_its_burst_and_refills_at_its_rate() -> None:
    clock, reviewer = FakeClock(), Reviewer()
    auth = auth_of(reviewer, clock, review_burst=3, review_qps=0.25)
    answers = [await auth.verdict(f"Bearer t{i}", *GET) for i in range(5)]
    assert [(v.status, v.retry_after) for v in answers] == [(401, None)] * 3 + [(429, 4)] * 2
    assert answers[-1].message == "Too many token reviews, retry later"
    assert reviewer.token_reviews == 3
    await clock.advance(3)  # a refusal takes nothing: the wait is not longer for it
    assert (await auth.verdict("Bearer t5", *GET)).retry_after == 1
    await clock.advance(1)
    assert (await auth.verdict("Bearer t5", *GET)).status == 401
    assert (await auth.verdict("Bearer t6", *GET)).status == 429
    assert reviewer.token_reviews == 4


async def test_a_rejected_token_is_remembered_for_the_reject_ttl() -> None:
    clock, reviewer = FakeClock(), Reviewer()
    auth = auth_of(reviewer, clock, reject_ttl=10)
    for _ in range(3):
        assert (await auth.verdict("Bearer bad", *GET)).status == 401
    await clock.advance(9.9)
    assert (await auth.verdict("Bearer bad", *GET)).status == 401
    assert reviewer.token_reviews == 1
    await clock.advance(0.1)
    assert (await auth.verdict("Bearer bad", *GET)).status == 401
    assert reviewer.token_reviews == 2


async def test_a_flood_of_rejected_tokens_does_not_evict_an_accepted_one() -> None:
    reviewer = Reviewer()
    auth = auth_of(reviewer, FakeClock(), review_burst=5000)
    assert (await auth.verdict("Bearer good", *GET)).status == 200
    for i in range(3000):
        await auth.authenticate(f"t{i}")
    assert (await auth.verdict("Bearer good", *GET)).status == 200
    assert reviewer.token_reviews == 3001


async def test_a_token_seen_accepted_is_reviewed_outside_the_budget() -> None:
    clock, reviewer = FakeClock(), Reviewer()
    # Two places: the good token's TokenReview and its user's SubjectAccessReview.
    auth = auth_of(reviewer, clock, review_in_flight=1, review_burst=2, review_qps=1e-6)
    assert (await auth.verdict("Bearer good", *GET)).status == 200
    assert (await auth.verdict("Bearer bad", *GET)).status == 429  # the budget is spent
    await clock.advance(AUTHN_TTL)
    assert (await auth.verdict("Bearer good", *GET)).status == 200
    assert reviewer.token_reviews == 2
    # ... while one of them is under way too.
    reviewer.gate = asyncio.Event()
    await clock.advance(AUTHN_TTL)
    waiting = asyncio.ensure_future(auth.verdict("Bearer good", *GET))
    await settle()
    assert (await auth.verdict("Bearer bad", *GET)).status == 429
    reviewer.gate.set()
    assert (await waiting).status == 200
    # Known for KNOWN_TTL after its last acceptance, then budgeted like any other.
    await clock.advance(KNOWN_TTL)
    assert (await auth.verdict("Bearer good", *GET)).status == 429


async def test_a_revoked_token_goes_back_to_the_budget() -> None:
    clock, reviewer = FakeClock(), Reviewer()
    auth = auth_of(reviewer, clock, review_burst=2, review_qps=1e-6)
    assert (await auth.verdict("Bearer good", *GET)).status == 200
    reviewer.accepted.clear()
    await clock.advance(AUTHN_TTL)
    assert (await auth.verdict("Bearer good", *GET)).status == 401  # known: reviewed
    await clock.advance(REJECT_TTL)
    assert (await auth.verdict("Bearer good", *GET)).status == 429
    assert reviewer.token_reviews == 2


async def test_reviews_are_counted_by_result_and_no_token_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    clock, reviewer, registry = FakeClock(), Reviewer(), CollectorRegistry()
    # good: a TokenReview and a SubjectAccessReview; the secret: a TokenReview.
    auth = DelegatedAuth(reviewer, clock=clock, registry=registry, review_burst=3)
    secret = "s3cr3t-token-value"
    assert (await auth.verdict("Bearer good", *GET)).status == 200
    assert (await auth.verdict(f"Bearer {secret}", *GET)).status == 401
    assert (await auth.verdict(f"Bearer {secret}x", *GET)).status == 429
    await clock.advance(1)
    reviewer.fail = True
    assert (await auth.verdict(f"Bearer {secret}y", *GET)).status == 500

    def value(result: str) -> float | None:
        return registry.get_sample_value("metrics_auth_token_reviews_total", {"result": result})

    assert [value(r) for r in ("accepted", "rejected", "refused", "failed")] == [1, 1, 1, 1]
    assert "429" in caplog.text  # the refusal is logged, once
    assert secret not in caplog.text


def test_the_in_flight_bound_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="review_in_flight"):
        DelegatedAuth(Reviewer(), review_in_flight=0)
