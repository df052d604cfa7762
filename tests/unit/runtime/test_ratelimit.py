"""Unit tests for runtime.ratelimit: per-key exponential backoff, the token bucket and
their combination.
"""

from __future__ import annotations

from collections.abc import Hashable

import pytest

from dynamo_pool_operator.runtime.ratelimit import ExponentialBackoff, MaxOf, TokenBucket
from tests.clock import FakeClock


def test_exponential_backoff_doubles_from_5ms() -> None:
    backoff = ExponentialBackoff()

    delays = [backoff.when("a") for _ in range(5)]

    assert delays == pytest.approx([0.005, 0.010, 0.020, 0.040, 0.080])
    assert backoff.failures("a") == 5


def test_exponential_backoff_is_capped_at_1000s() -> None:
    backoff = ExponentialBackoff()

    delays = [backoff.when("a") for _ in range(19)]

    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655.36 s, still under the cap
    assert delays[18] == 1000.0
    # Far past the point where 2**n overflows a float, still the cap, no error.
    for _ in range(2000):
        assert backoff.when("a") <= 1000.0
    assert backoff.when("a") == 1000.0


def test_exponential_backoff_is_tracked_per_key() -> None:
    backoff = ExponentialBackoff()
    for _ in range(4):
        backoff.when("a")

    assert backoff.when("b") == pytest.approx(0.005)
    assert backoff.failures("a") == 4


def test_forget_restarts_the_backoff_from_the_base() -> None:
    backoff = ExponentialBackoff()
    for _ in range(6):
        backoff.when("a")

    backoff.forget("a")

    assert backoff.failures("a") == 0
    assert backoff.when("a") == pytest.approx(0.005)


def test_exponential_backoff_honours_custom_base_and_cap() -> None:
    backoff = ExponentialBackoff(base=1.0, cap=3.0)

    assert [backoff.when("a") for _ in range(4)] == [1.0, 2.0, 3.0, 3.0]


def test_exponential_backoff_rejects_negative_settings() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        ExponentialBackoff(base=-1.0)


async def test_token_bucket_allows_a_burst_then_spaces_retries_at_qps(clock: FakeClock) -> None:
    bucket = TokenBucket(qps=10.0, burst=100, clock=clock)

    burst = [bucket.when(i) for i in range(100)]
    assert burst == [0.0] * 100
    assert bucket.when("x") == pytest.approx(0.1)
    assert bucket.when("y") == pytest.approx(0.2)

    # After a second the 10 new tokens pay off the two borrowed ones and leave 8.
    await clock.advance(1.0)
    assert [bucket.when(i) for i in range(8)] == [0.0] * 8
    assert bucket.when("z") == pytest.approx(0.1)


async def test_token_bucket_never_saves_more_than_its_burst(clock: FakeClock) -> None:
    bucket = TokenBucket(qps=1.0, burst=2, clock=clock)
    await clock.advance(3600.0)

    assert [bucket.when(i) for i in range(2)] == [0.0, 0.0]
    assert bucket.when("x") == pytest.approx(1.0)


async def test_token_bucket_take_refuses_without_going_into_debt(clock: FakeClock) -> None:
    bucket = TokenBucket(qps=2.0, burst=3, clock=clock)

    assert [bucket.take() for _ in range(3)] == [0.0] * 3
    # Refused, and the refusals take nothing: the wait does not grow with them.
    assert [bucket.take() for _ in range(5)] == [pytest.approx(0.5)] * 5
    await clock.advance(0.25)
    assert bucket.take() == pytest.approx(0.25)
    await clock.advance(0.25)
    assert bucket.take() == 0.0
    assert bucket.take() == pytest.approx(0.5)


def test_max_of_returns_the_longest_delay_and_records_the_retry_in_every_limiter() -> None:
    slow = ExponentialBackoff(base=1.0)
    fast = ExponentialBackoff(base=0.5)
    combined: MaxOf[Hashable] = MaxOf(fast, slow)

    assert combined.when("a") == 1.0
    assert combined.when("a") == 2.0
    assert slow.failures("a") == 2
    assert fast.failures("a") == 2
    assert combined.failures("a") == 2

    combined.forget("a")
    assert slow.failures("a") == 0
    assert fast.failures("a") == 0


async def test_max_of_backoff_and_bucket_applies_the_bucket_when_many_keys_fail(
    clock: FakeClock,
) -> None:
    combined: MaxOf[Hashable] = MaxOf(
        ExponentialBackoff(), TokenBucket(qps=10.0, burst=1, clock=clock)
    )

    assert combined.when("a") == pytest.approx(0.005)
    assert combined.when("b") == pytest.approx(0.1)
