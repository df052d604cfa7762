"""What a reconcile's `Result` asks the controller for, key by key.

`requeue_after=None` (the default) is no requeue; any number, 0.0 included, is a
requeue after that many seconds: 0.0 means now (controller-runtime reads a zero
`RequeueAfter` as none, which turns "look again now" into "never", silently).
"""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.control.controller import Controller, Request, Result
from dynamo_pool_operator.runtime.control.queue import LOW
from dynamo_pool_operator.runtime.ratelimit import ExponentialBackoff
from tests.clock import FakeClock

KEY = ("ns", "k")


class Answers:
    """A reconcile that returns `result`, counting its calls."""

    def __init__(self, result: Result | None) -> None:
        self.result = result
        self.calls = 0

    async def reconcile(self, request: Request) -> Result | None:
        self.calls += 1
        return self.result


async def one_pass(result: Result | None) -> tuple[Controller, FakeClock, CollectorRegistry]:
    """Hand KEY out once (after two failures built up its backoff) and reconcile it."""
    clock, registry = FakeClock(), CollectorRegistry()
    limiter = ExponentialBackoff()
    c = Controller("results", Answers(result), registry=registry, clock=clock, rate_limiter=limiter)
    limiter.when(KEY)  # two failures: the key's backoff is no longer zero
    limiter.when(KEY)
    assert c.queue.num_requeues(KEY) == 2
    c.queue.add(KEY, LOW)
    key, priority = await c.queue.get_with_priority()
    await c._reconcile_handler(key, priority)
    c.queue.done(key)
    return c, clock, registry


def counted(registry: CollectorRegistry, result: str) -> float | None:
    return registry.get_sample_value(
        "controller_runtime_reconcile_total", {"controller": "results", "result": result}
    )


async def test_requeue_after_zero_requeues_now_at_the_same_priority() -> None:
    c, _, registry = await one_pass(Result(requeue_after=0.0))
    assert len(c.queue) == 1, "requeue_after=0.0 must come back now, not be dropped"
    assert c.queue.depth_by_priority() == {LOW: 1}
    assert c.queue.num_requeues(KEY) == 0  # a plain requeue: the backoff is forgotten
    assert counted(registry, "requeue_after") == 1.0
    assert counted(registry, "success") == 0.0


async def test_requeue_after_a_delay_comes_back_after_it_and_not_before() -> None:
    c, clock, registry = await one_pass(Result(requeue_after=3.0))
    assert len(c.queue) == 0
    await clock.advance(2.9)
    await asyncio.sleep(0)
    assert len(c.queue) == 0
    await clock.advance(0.2)
    await asyncio.sleep(0)
    assert len(c.queue) == 1
    assert c.queue.num_requeues(KEY) == 0
    assert counted(registry, "requeue_after") == 1.0


@pytest.mark.parametrize("result", [None, Result()], ids=["None", "Result()"])
async def test_no_requeue_forgets_the_key(result: Result | None) -> None:
    c, clock, registry = await one_pass(result)
    await clock.advance(2000.0)  # past any backoff
    await asyncio.sleep(0)
    assert len(c.queue) == 0
    assert c.queue.delayed == 0
    assert c.queue.num_requeues(KEY) == 0
    assert counted(registry, "success") == 1.0
    assert counted(registry, "requeue_after") == 0.0
