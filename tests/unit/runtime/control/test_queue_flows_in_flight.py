"""Fair queuing and the workers: keys in flight count against their flow.

Within a priority a flow with no key in flight goes before flows with some, so a
newcomer takes the next free worker while another flow's mass change holds them all;
and a getter may take only such keys (`idle_flow`: the relay controller's worker kept
for changes), so another flow's change is taken at once. A key's flow is its first
letter, as in test_queue_flows.py. These fail if keys in flight are not counted (the
round order alone), or if an idle-flow getter takes a busy flow's key or misses a wake-up.
"""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.control.controller import (
    Controller,
    Request,
    Result,
    by_namespace,
)
from dynamo_pool_operator.runtime.control.queue import LOW, NORMAL, WorkQueue
from tests.clock import FakeClock

NAME = "poolrelay"


def first_letter(key: str) -> str:
    return key[0]


@pytest.fixture
def queue(clock: FakeClock, registry: CollectorRegistry) -> WorkQueue[str]:
    return WorkQueue[str](NAME, clock=clock, registry=registry, flow=first_letter)


async def get_now(queue: WorkQueue[str], *, idle_flow: bool = False) -> str:
    """A key that must already be available (fails instead of hanging)."""
    got = await asyncio.wait_for(queue.get_with_priority(idle_flow=idle_flow), timeout=1.0)
    return got[0]


async def settle(rounds: int = 20) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


# ------------------------------------------------------------------ the order


async def test_a_flow_with_no_key_in_flight_goes_before_flows_with_keys_in_flight(
    queue: WorkQueue[str],
) -> None:
    """Tenant A's keys hold every worker; tenant B's change takes the next free one,
    not the one after A's next key (A's turn comes first in the round)."""
    for i in range(10):
        queue.add(f"a{i}")
    held = [await get_now(queue) for _ in range(4)]  # four workers on A's keys
    queue.add("b1")

    queue.done(held[0])  # the first worker to be free takes B's key
    assert await get_now(queue) == "b1"
    assert await get_now(queue) == "a4"  # then A's, both now with keys in flight


async def test_flows_with_keys_in_flight_still_take_turns(queue: WorkQueue[str]) -> None:
    for key in ("a1", "a2", "a3", "b1", "b2", "b3", "c1"):
        queue.add(key)
    got = [await get_now(queue) for _ in range(3)]  # one of each: every flow busy
    assert got == ["a1", "b1", "c1"]

    assert [await get_now(queue) for _ in range(4)] == ["a2", "b2", "a3", "b3"]


async def test_keys_in_flight_count_at_their_own_priority_only(queue: WorkQueue[str]) -> None:
    """A backlog pass of a namespace (LOW) does not put its user's change (NORMAL) behind
    another namespace's change."""
    queue.add("a1", LOW)
    assert await get_now(queue) == "a1"  # a has a LOW key in flight
    queue.add("a2")
    queue.add("b1")

    assert [await get_now(queue) for _ in range(2)] == ["a2", "b1"]


# ------------------------------------------------------------------ a getter for idle flows


async def test_an_idle_flow_getter_leaves_a_busy_flows_keys_and_takes_a_newcomers(
    queue: WorkQueue[str],
) -> None:
    for i in range(5):
        queue.add(f"a{i}")
    assert await get_now(queue) == "a0"  # a has a key in flight
    kept = asyncio.ensure_future(queue.get_with_priority(idle_flow=True))
    await settle()
    assert not kept.done(), "it took a key of a flow with a key in flight"

    queue.add("b1")

    assert await asyncio.wait_for(kept, 1.0) == ("b1", NORMAL)


async def test_a_key_an_idle_flow_getter_cannot_take_wakes_a_getter_behind_it(
    queue: WorkQueue[str],
) -> None:
    """Woken for a key it cannot take, it would park again while the getter that can
    take it slept on: the wake-up goes to the one that can."""
    queue.add("a0")
    assert await get_now(queue) == "a0"
    kept = asyncio.ensure_future(queue.get_with_priority(idle_flow=True))
    await settle()
    general = asyncio.ensure_future(queue.get_with_priority())
    await settle()

    queue.add("a1")  # flow a is busy: only the general getter may take it

    assert await asyncio.wait_for(general, 1.0) == ("a1", NORMAL)
    assert not kept.done()
    kept.cancel()


async def test_an_idle_flow_getter_is_woken_when_a_flow_with_keys_waiting_turns_idle(
    queue: WorkQueue[str],
) -> None:
    queue.add("a0")
    queue.add("a1")
    assert await get_now(queue) == "a0"
    kept = asyncio.ensure_future(queue.get_with_priority(idle_flow=True))
    await settle()
    assert not kept.done()

    queue.done("a0")  # flow a has nothing in flight now, and a1 waits

    assert await asyncio.wait_for(kept, 1.0) == ("a1", NORMAL)


async def test_without_a_flow_function_an_idle_flow_getter_takes_any_key(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    """There are no flows, so no newcomer to keep it for: the kept worker works as before."""
    plain = WorkQueue[str](NAME, clock=clock, registry=registry)
    plain.add("a0")
    plain.add("a1")
    assert await asyncio.wait_for(plain.get(), 1.0) == "a0"

    got = await asyncio.wait_for(plain.get_with_priority(idle_flow=True), 1.0)

    assert got == ("a1", NORMAL)


# ------------------------------------------------------------------ the relay controller's workers


class HoldsTenantA:
    """A reconcile of tenant A's relays waits until released (her mass change's slow
    writes), but for her first one; others return at once. Records the passes."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started: list[Request] = []

    async def reconcile(self, request: Request) -> Result | None:
        self.started.append(request)
        if request[0] == "tenant-a" and request[1] != "p0000":
            await self.release.wait()
        return None


def four_workers(reconciler: HoldsTenantA, *, fair: bool) -> Controller:
    """Four workers, one kept for changes, with A's thousand keys queued at NORMAL."""
    c = Controller(
        "fair",
        reconciler,
        registry=CollectorRegistry(),
        workers=4,
        kept_for_changes=1,
        flow=by_namespace if fair else None,
    )
    for i in range(1000):
        c.queue.add(("tenant-a", f"p{i:04d}"))
    return c


async def test_the_kept_worker_waits_for_another_tenants_change_beside_a_mass_change() -> None:
    """Tenant A's mass change at NORMAL holds the three other workers; the kept worker
    takes none of her keys while she has some in flight, and B's change at once."""
    reconciler = HoldsTenantA()
    c = four_workers(reconciler, fair=True)
    await c.start()
    try:
        await settle()
        assert c.queue.processing == 3  # A's, held; the kept worker is free again
        c.queue.add(("tenant-b", "new"))
        await settle()
        assert reconciler.started[-1] == ("tenant-b", "new")
        assert c.queue.processing == 3
    finally:
        reconciler.release.set()
        await c.stop()


async def test_without_fair_queuing_the_kept_worker_is_held_by_the_mass_change() -> None:
    """The same with one flow (the order before fair queuing): the kept worker takes A's
    next key, and B's change waits for one of A's passes to end."""
    reconciler = HoldsTenantA()
    c = four_workers(reconciler, fair=False)
    await c.start()
    try:
        await settle()
        assert c.queue.processing == 4
        c.queue.add(("tenant-b", "new"))
        await settle()
        assert ("tenant-b", "new") not in reconciler.started
    finally:
        reconciler.release.set()
        await c.stop()
