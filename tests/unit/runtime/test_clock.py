"""Unit tests for runtime.clock: the fake clock the other runtime tests drive time with."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from dynamo_pool_operator.runtime.clock import SystemClock
from tests.clock import FakeClock


async def test_advance_moves_monotonic_and_wall_time_together() -> None:
    clock = FakeClock(start=datetime(2026, 3, 1, tzinfo=UTC))
    before = clock.monotonic()
    await clock.advance(90)
    assert clock.monotonic() == before + 90
    assert clock.now() == datetime(2026, 3, 1, tzinfo=UTC) + timedelta(seconds=90)


async def test_sleepers_wake_in_deadline_order_and_only_once_their_deadline_passes() -> None:
    clock = FakeClock()
    woke: list[str] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(name)

    tasks = [asyncio.create_task(sleeper("late", 20)), asyncio.create_task(sleeper("soon", 5))]
    await asyncio.sleep(0)
    assert clock.sleepers == 2
    await clock.advance(4)
    assert woke == []
    await clock.advance(20)
    assert woke == ["soon", "late"]
    assert clock.sleepers == 0
    await asyncio.gather(*tasks)


async def test_a_cancelled_sleeper_is_not_counted() -> None:
    clock = FakeClock()
    task = asyncio.create_task(clock.sleep(10))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert clock.sleepers == 0


async def test_a_sleep_of_zero_or_less_does_not_park() -> None:
    clock = FakeClock()
    await clock.sleep(0)
    await clock.sleep(-1)
    assert clock.sleepers == 0


async def test_the_system_clock_reads_utc_and_never_sleeps_a_negative_time() -> None:
    clock = SystemClock()
    assert clock.now().tzinfo is UTC
    await clock.sleep(-5)
