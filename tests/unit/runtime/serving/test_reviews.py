"""The rules every review of the secure metrics server follows: one review per question
under way (single flight), and one budget for questions no earlier answer vouches for."""

from __future__ import annotations

import asyncio

import pytest

from dynamo_pool_operator.runtime.serving.reviews import ReviewBudget, ReviewRefused, Reviews
from tests.clock import FakeClock


class Review:
    """A review that waits for `gate`, then answers `answer` or raises `error`."""

    def __init__(self, answer: str = "yes", error: Exception | None = None) -> None:
        self.gate = asyncio.Event()
        self.answer, self.error = answer, error
        self.made = 0

    async def __call__(self) -> str:
        self.made += 1
        await self.gate.wait()
        if self.error is not None:
            raise self.error
        return self.answer


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def reviews(**budget: int) -> Reviews[str]:
    return Reviews(ReviewBudget(FakeClock(), **budget))


async def test_questions_asked_at_once_share_one_review_and_all_get_its_answer() -> None:
    flights, review = reviews(), Review()
    waiting = asyncio.gather(*(flights.ask("q", review, budgeted=True) for _ in range(300)))
    await settle()
    assert (review.made, flights.budget.under_way) == (1, 1)
    review.gate.set()
    assert await waiting == ["yes"] * 300
    assert flights.budget.under_way == 0
    # Ended: the next ask is a new review (caching its answer is the caller's).
    review.answer = "no"
    assert await flights.ask("q", review, budgeted=True) == "no"
    assert review.made == 2


async def test_a_failed_review_raises_to_every_waiter_and_the_next_ask_reviews_again() -> None:
    flights, review = reviews(), Review(error=ConnectionError("refused"))
    waiting = asyncio.gather(
        *(flights.ask("q", review, budgeted=True) for _ in range(10)), return_exceptions=True
    )
    await settle()
    review.gate.set()
    answers = await waiting
    assert all(isinstance(a, ConnectionError) for a in answers), answers
    assert (review.made, flights.budget.under_way) == (1, 0)
    review.error = None
    assert await flights.ask("q", review, budgeted=True) == "yes"
    assert review.made == 2


async def test_a_waiter_that_gives_up_does_not_end_the_review_of_the_others() -> None:
    flights, review = reviews(), Review()
    first = asyncio.ensure_future(flights.ask("q", review, budgeted=True))
    second = asyncio.ensure_future(flights.ask("q", review, budgeted=True))
    await settle()
    first.cancel()
    await settle()
    assert first.cancelled()
    review.gate.set()
    assert await second == "yes"
    assert review.made == 1


async def test_a_review_whose_every_waiter_gave_up_still_ends_and_frees_its_place() -> None:
    flights, review = reviews(in_flight=1), Review()
    only = asyncio.ensure_future(flights.ask("q", review, budgeted=True))
    await settle()
    only.cancel()
    await settle()
    with pytest.raises(ReviewRefused):  # the review goes on, and holds its place
        await flights.ask("other", Review(), budgeted=True)
    review.gate.set()
    await settle()
    assert flights.budget.under_way == 0


async def test_different_questions_are_reviewed_apart_within_the_in_flight_bound() -> None:
    flights, review = reviews(in_flight=2, burst=100), Review()
    waiting = [asyncio.ensure_future(flights.ask(q, review, budgeted=True)) for q in "ab"]
    await settle()
    with pytest.raises(ReviewRefused) as refused:
        await flights.ask("c", review, budgeted=True)
    assert refused.value.retry_after == 1.0
    # Joining a review under way takes no place.
    joined = asyncio.ensure_future(flights.ask("a", review, budgeted=True))
    review.gate.set()
    assert await asyncio.gather(*waiting, joined) == ["yes"] * 3
    assert (review.made, flights.budget.under_way, flights.budget.refused) == (2, 0, 1)


async def test_a_review_not_budgeted_takes_no_place_even_when_the_budget_is_spent() -> None:
    flights = reviews(in_flight=1, burst=1)
    spent = Review()
    held = asyncio.ensure_future(flights.ask("a", spent, budgeted=True))
    await settle()
    free = Review()
    free.gate.set()
    assert await flights.ask("b", free, budgeted=False) == "yes"
    assert flights.budget.under_way == 1
    spent.gate.set()
    await held


async def test_the_budget_refills_at_its_rate_and_a_refusal_takes_nothing() -> None:
    clock = FakeClock()
    budget = ReviewBudget(clock, in_flight=10, burst=2, qps=0.5)
    budget.admit()
    budget.admit()
    with pytest.raises(ReviewRefused) as first:
        budget.admit()
    assert first.value.retry_after == 2.0
    await clock.advance(1)
    with pytest.raises(ReviewRefused) as second:
        budget.admit()
    assert second.value.retry_after == 1.0
    await clock.advance(1)
    budget.admit()
    assert (budget.under_way, budget.refused) == (3, 2)


def test_the_in_flight_bound_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="review_in_flight"):
        ReviewBudget(FakeClock(), in_flight=0)
