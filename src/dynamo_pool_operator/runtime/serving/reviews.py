"""How the secure metrics server spends reviews: one at a time per question, within a budget.

Every TokenReview and SubjectAccessReview spends the operator's own priority-and-fairness
flow (its Lease renewals'), and whoever reaches the port chooses what is asked. So:

- **Single flight**: requests asking the same question while it is under way share its
  review (300 scrapes with one token: one review); a waiter that gives up does not end
  it for the others.
- **A budget for strangers**: a question no recent answer vouches for takes a place in
  one budget shared by both kinds (`in_flight` at once, a token bucket of `burst` at
  `qps`); past it, `ReviewRefused` (429 with `Retry-After`). Questions vouched for go
  outside it, so a flood cannot lock out a scraper whose cached answer expired.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine, Hashable
from typing import Any, Generic, TypeVar

from dynamo_pool_operator.runtime.clock import Clock
from dynamo_pool_operator.runtime.ratelimit import TokenBucket

log = logging.getLogger(__name__)

V = TypeVar("V")

#: Reviews not vouched for: at most this many at once, and a token bucket of this burst
#: refilled at this rate; past either the request gets 429.
REVIEW_IN_FLIGHT = 4
REVIEW_BURST = 20
REVIEW_QPS = 5.0


class ReviewRefused(Exception):
    """The review budget is spent: nothing was reviewed; try after `retry_after` s."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"the review budget is spent, retry after {retry_after:.1f}s")
        self.retry_after = retry_after


class ReviewBudget:
    """At most `in_flight` budgeted reviews at once, and `burst` then `qps` a second."""

    def __init__(
        self,
        clock: Clock,
        *,
        in_flight: int = REVIEW_IN_FLIGHT,
        burst: int = REVIEW_BURST,
        qps: float = REVIEW_QPS,
    ) -> None:
        if in_flight < 1:
            raise ValueError(f"review_in_flight must be >= 1, got {in_flight}")
        self.in_flight, self.qps = in_flight, qps
        self._bucket = TokenBucket(qps, burst, clock=clock)
        self._under_way = 0
        #: Requests refused, for the log (every thousandth) and for tests.
        self.refused = 0

    @property
    def under_way(self) -> int:
        """Budgeted reviews under way now."""
        return self._under_way

    def admit(self) -> None:
        """Take a place for one review, or raise `ReviewRefused` having taken nothing."""
        if self._under_way >= self.in_flight:
            wait = 1.0
        else:
            wait = self._bucket.take()
            if wait <= 0:
                self._under_way += 1
                return
        self.refused += 1
        if self.refused == 1 or self.refused % 1000 == 0:
            log.warning(
                "metrics: %d requests refused (429): more than %d reviews at once or %g a "
                "second for tokens and users not seen accepted",
                self.refused,
                self.in_flight,
                self.qps,
            )
        raise ReviewRefused(wait)

    def release(self) -> None:
        """A review admitted by `admit` ended: its place is free."""
        self._under_way -= 1


class Reviews(Generic[V]):
    """The reviews of one kind under way, one per key, shared by whoever asks meanwhile."""

    def __init__(self, budget: ReviewBudget) -> None:
        self.budget = budget
        self._flights: dict[Hashable, asyncio.Task[V]] = {}

    async def ask(
        self,
        key: Hashable,
        review: Callable[[], Coroutine[Any, Any, V]],
        *,
        budgeted: bool,
    ) -> V:
        """The answer of the review of `key` under way, or of `review()` started now,
        taking a place of the budget when `budgeted` (`ReviewRefused` when none). Its error
        reaches every waiter; a waiter cancelled does not cancel it."""
        flight = self._flights.get(key)
        if flight is None:
            if budgeted:
                self.budget.admit()
            flight = asyncio.create_task(review())
            flight.add_done_callback(functools.partial(self._landed, key, budgeted))
            self._flights[key] = flight
        return await asyncio.shield(flight)

    def _landed(self, key: Hashable, budgeted: bool, flight: asyncio.Task[V]) -> None:
        """A review ended (or was cancelled before it began): the next ask starts anew."""
        if not flight.cancelled():
            flight.exception()  # retrieved, so a failure no waiter saw is not logged
        del self._flights[key]
        if budgeted:
            self.budget.release()
