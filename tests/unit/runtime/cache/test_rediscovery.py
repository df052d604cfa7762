"""Unit tests for runtime.cache.rediscovery: the loop that re-reads what the cluster
serves, acts on each change once, logs failures once, and runs when poked.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from dynamo_pool_operator.runtime.cache.rediscovery import Rediscovery
from dynamo_pool_operator.runtime.client import errors
from tests.clock import FakeClock


class Cluster:
    """What `read` finds: a value to return, or an error to raise."""

    def __init__(self, value: int) -> None:
        self.value = value
        self.error: Exception | None = None
        self.applied: list[tuple[int, int]] = []
        #: What `apply` can take up of a change (None: all of it).
        self.cap: int | None = None

    async def read(self, current: int) -> int:
        if self.error is not None:
            raise self.error
        return self.value

    async def apply(self, current: int, new: int) -> int:
        self.applied.append((current, new))
        return new if self.cap is None else min(new, self.cap)


def loop(cluster: Cluster, clock: FakeClock | None = None) -> Rediscovery[int]:
    return Rediscovery(cluster.read, cluster.apply, 0, interval=30.0, what="the thing", clock=clock)


async def test_a_change_is_acted_on_once() -> None:
    cluster = Cluster(0)
    r = loop(cluster)
    assert await r.check() is False
    cluster.value = 1
    assert await r.check() is True
    assert await r.check() is False
    assert cluster.applied == [(0, 1)]
    assert (r.current, r.reads) == (1, 3)


async def test_a_part_not_taken_up_is_offered_again() -> None:
    cluster = Cluster(0)
    cluster.cap = 1
    r = loop(cluster)
    cluster.value = 2
    assert await r.check() is True  # 1 is in effect, not 2
    cluster.cap = None
    assert await r.check() is True
    assert cluster.applied == [(0, 2), (1, 2)]
    assert r.current == 2


async def test_failures_are_logged_once_and_the_recovery_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="dynamo_pool_operator.runtime.cache.rediscovery")
    cluster = Cluster(0)
    r = loop(cluster)
    cluster.error = errors.ApiError("unavailable", status=503)
    for _ in range(5):
        assert await r.check() is False
    cluster.error = None
    cluster.value = 1
    await r.check()
    await r.check()
    said = [rec.getMessage() for rec in caplog.records if rec.levelno >= logging.INFO]
    assert len(said) == 2, said
    assert said[0].startswith("reading the thing failed (ApiError")
    assert "retried every 30s" in said[0]
    assert said[1] == "the thing: read and acted on again"
    assert r.current == 1


async def test_a_failing_apply_keeps_what_is_in_effect() -> None:
    cluster = Cluster(1)

    async def refuse(current: int, new: int) -> int:
        raise errors.ApiError("boom", status=500)

    r = Rediscovery(cluster.read, refuse, 0, interval=30.0, what="the thing")
    assert await r.check() is False
    assert r.current == 0


async def yields() -> None:
    """Let the loop's task run until it waits again (no real time passes)."""
    for _ in range(10):
        await asyncio.sleep(0)


async def test_the_loop_runs_every_interval_and_at_once_when_poked() -> None:
    clock = FakeClock()
    cluster = Cluster(0)
    r = loop(cluster, clock)
    r.start()
    await yields()
    await clock.advance(29)
    await yields()
    assert r.reads == 0
    await clock.advance(1)
    await yields()
    assert r.reads == 1
    r.poke()
    r.poke()  # pokes before the pass runs are one pass
    await yields()
    assert r.reads == 2
    await clock.advance(29)
    await yields()
    assert r.reads == 2  # the interval starts again after a poked pass
    await r.stop()
    assert not r.running


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval must be positive"):
        Rediscovery(Cluster(0).read, Cluster(0).apply, 0, interval=0, what="x")
