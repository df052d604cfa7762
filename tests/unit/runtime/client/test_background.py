"""Background writes in flight (runtime/client/background.py): at most the cap for the writes
of background work, first come first served; any other write passes at once. And a lone
change's writes first (`ChangesFirst`)."""

from __future__ import annotations

import asyncio

import pytest

from dynamo_pool_operator.runtime.client.background import (
    BackgroundWrites,
    ChangesFirst,
    background,
    in_background,
)


async def settle(rounds: int = 20) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


class Writer:
    def __init__(self, gate: BackgroundWrites) -> None:
        self.gate = gate
        self.in_flight = 0
        self.most = 0
        self.order: list[int] = []
        self.release = asyncio.Event()

    async def write(self, n: int, *, in_bg: bool = True) -> None:
        with background(in_bg):
            async with self.gate.slot():
                self.order.append(n)
                self.in_flight += 1
                self.most = max(self.most, self.in_flight)
                await self.release.wait()
                self.in_flight -= 1


async def test_background_writes_wait_for_a_slot_first_come_first_served() -> None:
    w = Writer(BackgroundWrites(2))
    tasks = [asyncio.create_task(w.write(i)) for i in range(6)]
    await settle()
    assert w.order == [0, 1]
    assert w.gate.in_flight == 2
    w.release.set()
    await asyncio.gather(*tasks)
    assert w.order == list(range(6))
    assert w.most == 2
    assert w.gate.in_flight == 0


async def test_other_writes_pass_while_background_ones_wait() -> None:
    w = Writer(BackgroundWrites(1))
    tasks = [asyncio.create_task(w.write(i)) for i in range(3)]
    await settle()
    change = asyncio.create_task(w.write(99, in_bg=False))
    await settle()
    assert w.order == [0, 99]
    w.release.set()
    await asyncio.gather(*tasks, change)


async def test_a_waiter_cancelled_keeps_no_slot_and_loses_none() -> None:
    w = Writer(BackgroundWrites(1))
    first = asyncio.create_task(w.write(0))
    second = asyncio.create_task(w.write(1))
    third = asyncio.create_task(w.write(2))
    await settle()
    second.cancel()
    await settle()
    w.release.set()
    await asyncio.gather(first, third)
    assert w.order == [0, 2]
    assert w.gate.in_flight == 0
    assert second.cancelled()


async def test_the_mode_is_inherited_by_the_tasks_a_block_starts() -> None:
    async def probe() -> bool:
        return in_background()

    with background(True):
        inner = asyncio.create_task(probe())
    assert await inner
    assert not in_background()


def test_the_cap_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        BackgroundWrites(0)


# --------------------------------------------------------------------------- changes first


async def _turn_taken(first: ChangesFirst, *, change: bool | None, in_bg: bool = False) -> bool:
    """Whether a write in that context goes at once while another task's change is in
    flight (True), or waits for it (False)."""

    async def write() -> None:
        with background(in_bg):
            if change is None:
                await first.turn()
            else:
                async with first.pass_of(change):
                    await first.turn()

    task = asyncio.create_task(write())
    await settle()
    went = task.done()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return went


async def test_while_a_changes_pass_is_in_flight_other_passes_and_background_writes_wait() -> None:
    first = ChangesFirst(5.0)
    ended = asyncio.Event()

    async def changes_pass() -> None:
        async with first.pass_of(True):
            await first.turn()  # its own writes never wait
            await ended.wait()

    change = asyncio.create_task(changes_pass())
    await settle()
    assert first.changes_in_flight == 1
    assert not await _turn_taken(first, change=False)  # another pass's write
    assert not await _turn_taken(first, change=None, in_bg=True)  # an Event's
    assert await _turn_taken(first, change=None)  # outside any pass: leader election
    assert await _turn_taken(first, change=True)  # another change's
    ended.set()
    await change
    assert first.changes_in_flight == 0
    assert await _turn_taken(first, change=False)


async def test_a_write_held_for_a_change_goes_once_the_pass_ends() -> None:
    first = ChangesFirst(5.0)
    ended = asyncio.Event()
    sent: list[str] = []

    async def changes_pass() -> None:
        async with first.pass_of(True):
            await ended.wait()
            sent.append("change")

    async def other_pass() -> None:
        async with first.pass_of(False):
            await first.turn()
            sent.append("other")

    change = asyncio.create_task(changes_pass())
    await settle()
    other = asyncio.create_task(other_pass())
    await settle()
    assert sent == []
    ended.set()
    await asyncio.gather(change, other)
    assert sent == ["change", "other"]


async def test_a_write_waits_for_a_change_at_most_the_hold() -> None:
    first = ChangesFirst(0.05)
    async with first.pass_of(True):
        waited = asyncio.get_running_loop().time()
        async with first.pass_of(False):
            await asyncio.wait_for(first.turn(), 2.0)
        waited = asyncio.get_running_loop().time() - waited
    assert 0.04 <= waited < 1.0


def test_the_hold_is_positive() -> None:
    with pytest.raises(ValueError, match="hold > 0"):
        ChangesFirst(0)
