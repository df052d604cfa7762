"""Fair queuing across flows in the work queue: within one priority, flows take turns.

A key's flow here is its first letter ("a7" is of flow "a"), as the relay controller's
is its namespace. The tests of order, priorities, dedup, keys in flight and the flows
metric fail if the queue ignores the flow function (all keys in one FIFO), if a flow is
served until it is empty, or if a new flow jumps the round; three check what holds with
or without flows (FIFO within a flow, FIFO without a flow function, the depth and queue
durations).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.control.controller import (
    Controller,
    Request,
    Result,
    by_namespace,
)
from dynamo_pool_operator.runtime.control.flows import FairQueue
from dynamo_pool_operator.runtime.control.queue import LOW, NORMAL, WorkQueue
from tests.clock import FakeClock

NAME = "poolrelay"


def first_letter(key: str) -> str:
    return key[0]


@pytest.fixture
def queue(clock: FakeClock, registry: CollectorRegistry) -> WorkQueue[str]:
    return WorkQueue[str](NAME, clock=clock, registry=registry, flow=first_letter)


async def get_now(queue: WorkQueue[str]) -> str:
    """`get` a key that must already be available (fails instead of hanging)."""
    return await asyncio.wait_for(queue.get(), timeout=1.0)


async def drain(queue: WorkQueue[str]) -> list[str]:
    """Every queued key, in the order workers get them (each done at once)."""
    out = []
    while len(queue):
        key = await get_now(queue)
        queue.done(key)
        out.append(key)
    return out


def flows(registry: CollectorRegistry, priority: int) -> float | None:
    return registry.get_sample_value(
        "workqueue_flows_by_priority", {"name": NAME, "priority": str(priority)}
    )


# ------------------------------------------------------------------ order


async def test_keys_of_one_priority_are_served_one_flow_at_a_time_in_turn(
    queue: WorkQueue[str],
) -> None:
    for key in ("a1", "a2", "a3", "b1", "c1", "b2"):
        queue.add(key)

    assert await drain(queue) == ["a1", "b1", "c1", "a2", "b2", "a3"]


async def test_within_a_flow_keys_are_served_in_the_order_they_came(
    queue: WorkQueue[str],
) -> None:
    for key in ("a3", "b1", "a1", "a2"):
        queue.add(key)

    assert [k for k in await drain(queue) if k[0] == "a"] == ["a3", "a1", "a2"]


async def test_a_flow_with_one_key_is_served_within_one_round_of_a_flow_with_a_thousand(
    queue: WorkQueue[str],
) -> None:
    """Tenant A queued a thousand changes, then tenant B makes one: B is served within
    one round (at once here, as A's keys hold workers), not after A's thousand."""
    for i in range(1000):
        queue.add(f"a{i:04d}")
    for _ in range(3):  # workers already busy with A's first keys
        await get_now(queue)
    queue.add("b-new-pool")

    served = [await get_now(queue) for _ in range(2)]

    assert "b-new-pool" in served
    assert len(queue) == 1000 - 3 - 1


async def test_a_new_flow_joins_the_back_of_the_round(queue: WorkQueue[str]) -> None:
    for key in ("a1", "a2", "a3", "b1", "b2", "b3"):
        queue.add(key)
    queue.done(await get_now(queue))  # a1; round: b, a
    queue.add("c1")  # round: b, a, c

    assert await drain(queue) == ["b1", "a2", "c1", "b2", "a3", "b3"]


async def test_a_flow_that_refills_at_once_gets_one_turn_a_round_not_every_turn(
    queue: WorkQueue[str],
) -> None:
    """A flow emptied by a get and refilled right after is at the back of the round again:
    it cannot starve flows that wait by always looking new."""
    for i in range(20):
        queue.add(f"a{i:02d}")
        queue.add(f"c{i:02d}")
    served: list[str] = []
    queue.add("b00")
    for i in range(30):
        key = await get_now(queue)
        queue.done(key)
        served.append(key)
        if key[0] == "b":
            queue.add(f"b{i + 1:02d}")  # another change of B's, made as soon as one is done

    per_flow = Counter(key[0] for key in served)
    assert per_flow == {"a": 10, "b": 10, "c": 10}


async def test_without_a_flow_function_keys_are_served_first_come_first_served(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    """The default: one flow, so the queue is the FIFO it was for every other user."""
    queue = WorkQueue[str](NAME, clock=clock, registry=registry)
    for key in ("a1", "a2", "a3", "b1", "c1"):
        queue.add(key)

    assert await drain(queue) == ["a1", "a2", "a3", "b1", "c1"]
    assert flows(registry, NORMAL) == 0.0


# ------------------------------------------------------------------ priorities


async def test_priorities_come_first_and_flows_take_turns_within_each(
    queue: WorkQueue[str],
) -> None:
    for key in ("b1", "b2", "c1"):
        queue.add(key, LOW)  # the backlog of a start
    for key in ("a1", "a2", "d1"):
        queue.add(key)

    assert await drain(queue) == ["a1", "d1", "a2", "b1", "c1", "b2"]


async def test_a_kept_getter_takes_only_normal_keys_in_their_turn(queue: WorkQueue[str]) -> None:
    queue.add("z1", LOW)
    for key in ("a1", "a2", "b1"):
        queue.add(key)

    got = [(await queue.get_with_priority(NORMAL))[0] for _ in range(3)]

    assert got == ["a1", "b1", "a2"]
    assert len(queue) == 1  # the LOW key is left to the other getters


# ------------------------------------------------------------------ dedup and in flight


async def test_a_key_added_again_while_waiting_keeps_its_place_in_its_flow(
    queue: WorkQueue[str],
) -> None:
    for key in ("a1", "a2", "b1"):
        queue.add(key)
    queue.add("a1")
    queue.add("a1", LOW)

    assert await drain(queue) == ["a1", "b1", "a2"]


async def test_a_key_moved_up_leaves_its_flow_behind_and_is_served_once(
    queue: WorkQueue[str], registry: CollectorRegistry
) -> None:
    for key in ("a1", "b1", "b2", "c1"):
        queue.add(key, LOW)
    assert flows(registry, LOW) == 3.0

    queue.add("a1")  # a real change to a key still waiting from the initial list

    assert flows(registry, LOW) == 2.0  # flow a has nothing left at LOW
    assert flows(registry, NORMAL) == 1.0
    assert await drain(queue) == ["a1", "b1", "c1", "b2"]


async def test_a_moved_up_key_added_low_again_is_served_once_in_its_new_turn(
    queue: WorkQueue[str],
) -> None:
    for key in ("a1", "a2", "b1", "b2"):
        queue.add(key, LOW)
    queue.add("a1")
    assert await get_now(queue) == "a1"
    queue.done("a1")
    queue.add("a1", LOW)  # back in flow a, behind a2: its old entry is dead

    assert await drain(queue) == ["a2", "b1", "a1", "b2"]


async def test_a_key_added_while_in_flight_runs_once_more_after_in_its_flow_turn(
    queue: WorkQueue[str],
) -> None:
    for key in ("a1", "a2", "b1", "b2"):
        queue.add(key)
    assert await get_now(queue) == "a1"
    queue.add("a1")  # dirty: not handed out while a worker holds it
    assert await get_now(queue) == "b1"
    assert await get_now(queue) == "a2"

    queue.done("a1")  # now queued again, at the back of flow a

    assert await drain(queue) == ["b2", "a1"]


async def test_no_key_is_held_by_two_workers_and_no_flow_is_served_twice_a_round() -> None:
    """Random adds at both priorities, gets and dones against a model of what is waiting:
    no key is handed out while held or lost; the metrics match the model; a flow with
    keys in flight at a priority is served there only when every flow waiting there has
    some, and never to a getter for idle flows (a kept worker, every other get); and
    while a flow with none waits, no other flow is served there twice before it (one
    round)."""
    rng = random.Random(55)
    registry = CollectorRegistry()
    q = WorkQueue[str]("model", clock=FakeClock(), registry=registry, flow=first_letter)
    waiting: dict[str, int] = {}  # queued keys -> priority
    dirty: dict[str, int] = {}  # processing keys added again -> priority
    queued_flows: set[tuple[int, str]] = set()
    busy: set[tuple[int, str]] = set()
    processing: dict[str, int] = {}  # key -> the priority it was got at
    # (priority, flow) waiting with nothing in flight there -> the flows served at that
    # priority since it was last served or its last key in flight was done
    served_since: dict[tuple[int, str], Counter[str]] = {}
    for _ in range(4000):
        op = rng.random()
        if op < 0.5:
            key, prio = f"{rng.choice('abcd')}{rng.randrange(6)}", rng.choice((NORMAL, LOW))
            q.add(key, prio)
            if key in processing:
                dirty[key] = max(dirty.get(key, prio), prio)
            else:
                waiting[key] = max(waiting.get(key, prio), prio)
        elif op < 0.8 and waiting and len(processing) < 4:  # four workers
            idle_flow = rng.random() < 0.5
            fits = [p for p, f in queued_flows if not idle_flow or (p, f) not in busy]
            if not fits:
                continue  # it would wait (another test checks it is woken)
            key, prio = await q.get_with_priority(idle_flow=idle_flow)
            assert prio == max(fits), "a priority was skipped"
            assert waiting.pop(key) == prio
            assert key not in processing, "a key held by a worker was handed out again"
            flow = key[0]
            assert not idle_flow or (prio, flow) not in busy, "an idle-flow get took a busy one"
            if (prio, flow) in busy:
                idle = {f for p, f in queued_flows if p == prio} - {f for p, f in busy if p == prio}
                assert not idle, f"{flow} has keys in flight, {idle} none, and {flow} went first"
            processing[key] = prio
            for (level, other), counts in served_since.items():
                if level == prio and other != flow:
                    counts[flow] += 1
                    assert counts[flow] <= 1, f"flow {flow} served twice while {other} waited"
            served_since.pop((prio, flow), None)
        elif processing:
            key = rng.choice(sorted(processing))
            q.done(key)
            del processing[key]
            if key in dirty:
                waiting[key] = dirty.pop(key)
        queued_flows = {(p, k[0]) for k, p in waiting.items()}
        busy = {(p, k[0]) for k, p in processing.items()}
        served_since = {w: served_since.get(w, Counter()) for w in queued_flows - busy}
        assert len(q) == len(waiting)
        assert q.flows_by_priority() == dict(Counter(p for p, _ in queued_flows))
        for prio in (NORMAL, LOW):
            expected = sum(1 for p, _ in queued_flows if p == prio)
            assert registry.get_sample_value(
                "workqueue_flows_by_priority", {"name": "model", "priority": str(prio)}
            ) == float(expected)


# ------------------------------------------------------------------ metrics


async def test_flows_by_priority_counts_flows_with_keys_queued(
    queue: WorkQueue[str], registry: CollectorRegistry
) -> None:
    assert (flows(registry, NORMAL), flows(registry, LOW)) == (0.0, 0.0)
    for key in ("a1", "a2", "b1", "c1"):
        queue.add(key)
    queue.add("z1", LOW)
    assert (flows(registry, NORMAL), flows(registry, LOW)) == (3.0, 1.0)
    assert queue.flows_by_priority() == {NORMAL: 3, LOW: 1}

    assert await get_now(queue) == "a1"  # a still has a2
    assert await get_now(queue) == "b1"  # b has nothing left
    assert flows(registry, NORMAL) == 2.0
    queue.add("b1")  # dirty while processing: not queued, not a waiting flow
    assert flows(registry, NORMAL) == 2.0
    queue.done("b1")
    assert flows(registry, NORMAL) == 3.0

    queue.shut_down()
    assert (flows(registry, NORMAL), flows(registry, LOW)) == (0.0, 0.0)


async def test_depth_and_queue_duration_are_unchanged_by_flows(
    queue: WorkQueue[str], registry: CollectorRegistry, clock: FakeClock
) -> None:
    for key in ("a1", "a2", "b1"):
        queue.add(key)
    await clock.advance(2.0)
    assert registry.get_sample_value("workqueue_depth", {"name": NAME}) == 3.0

    await drain(queue)

    assert registry.get_sample_value("workqueue_depth", {"name": NAME}) == 0.0
    count = registry.get_sample_value("workqueue_queue_duration_seconds_count", {"name": NAME})
    total = registry.get_sample_value("workqueue_queue_duration_seconds_sum", {"name": NAME})
    assert (count, total) == (3.0, 6.0)


# ------------------------------------------------------------------ the flow of a relay key


def test_a_relay_key_flows_by_its_namespace() -> None:
    fair = FairQueue(by_namespace)
    for key in (("team-a", "p1"), ("team-a", "p2"), ("team-b", "p1")):
        fair.push(key)

    assert fair.flows == 2
    assert [fair.pop() for _ in range(3)] == [("team-a", "p1"), ("team-b", "p1"), ("team-a", "p2")]


class NoReconcile:
    async def reconcile(self, request: Request) -> Result | None:
        return None


async def test_a_controller_given_a_flow_function_queues_its_keys_by_it() -> None:
    fair = Controller(
        "fair", NoReconcile(), workers=0, registry=CollectorRegistry(), flow=by_namespace
    )
    for key in (("team-a", "p1"), ("team-a", "p2"), ("team-b", "p1")):
        fair.queue.add(key)

    order = []
    while len(fair.queue):
        key = await asyncio.wait_for(fair.queue.get(), 1.0)
        fair.queue.done(key)
        order.append(key)

    assert order == [("team-a", "p1"), ("team-b", "p1"), ("team-a", "p2")]
