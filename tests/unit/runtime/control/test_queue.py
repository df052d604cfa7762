"""Unit tests for the work queue: the rules a level-based controller relies on.

Time is driven by `FakeClock`; the only real waiting is yielding to the event loop.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.control.queue import (
    LOW,
    NORMAL,
    QueueMetrics,
    ShutDown,
    WorkQueue,
)
from dynamo_pool_operator.runtime.ratelimit import ExponentialBackoff
from tests.clock import FakeClock

NAME = "poolrelay"


@pytest.fixture
def queue(clock: FakeClock, registry: CollectorRegistry) -> WorkQueue[str]:
    return WorkQueue[str](NAME, clock=clock, registry=registry)


async def settle(rounds: int = 20) -> None:
    """Let every runnable task run until it parks."""
    for _ in range(rounds):
        await asyncio.sleep(0)


async def get_now(queue: WorkQueue[str]) -> str:
    """`get` a key that must already be available (fails instead of hanging)."""
    return await asyncio.wait_for(queue.get(), timeout=1.0)


async def keys(queue: WorkQueue[Any]) -> AsyncIterator[Any]:
    """What a worker gets from `queue`, until it shuts down."""
    while True:
        try:
            yield await queue.get()
        except ShutDown:
            return


async def the_only_key(queue: WorkQueue[str]) -> str:
    """The one key queued, got (fails if another is queued with it)."""
    assert len(queue) == 1
    return await get_now(queue)


async def arrives_after(queue: WorkQueue[str], clock: FakeClock, almost: float) -> str:
    """Nothing queued `almost` seconds on; the one key queued a millisecond later."""
    await clock.advance(almost)
    assert len(queue) == 0
    await clock.advance(0.001)
    return await the_only_key(queue)


def sample(registry: CollectorRegistry, metric: str, name: str = NAME) -> float | None:
    return registry.get_sample_value(metric, {"name": name})


async def test_adding_a_key_that_is_already_waiting_is_a_no_op(queue: WorkQueue[str]) -> None:
    queue.add("a")
    queue.add("b")
    queue.add("a")

    assert len(queue) == 2
    assert await get_now(queue) == "a"
    assert await get_now(queue) == "b"
    assert len(queue) == 0


async def test_get_hands_out_keys_in_the_order_they_were_added(queue: WorkQueue[str]) -> None:
    for key in ("c", "a", "b"):
        queue.add(key)

    assert [await get_now(queue) for _ in range(3)] == ["c", "a", "b"]


async def test_tuple_keys_are_deduplicated_by_value(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    queue = WorkQueue[tuple[str, str]](NAME, clock=clock, registry=registry)
    queue.add(("ns", "pool"))
    queue.add(("ns", "pool"))
    queue.add(("other", "pool"))

    assert len(queue) == 2


async def test_get_parks_until_a_key_is_added(queue: WorkQueue[str]) -> None:
    getter = asyncio.create_task(queue.get())
    await settle()
    assert not getter.done()

    queue.add("a")
    await settle()

    assert getter.done()
    assert getter.result() == "a"


async def test_key_added_while_processing_is_not_handed_out_until_done(
    queue: WorkQueue[str],
) -> None:
    queue.add("a")
    assert await get_now(queue) == "a"

    queue.add("a")
    assert len(queue) == 0
    second = asyncio.create_task(queue.get())
    await settle()
    assert not second.done(), "a key being processed must not go to a second worker"

    queue.done("a")
    await settle()
    assert second.done()
    assert second.result() == "a"


async def test_many_adds_while_processing_requeue_the_key_once(queue: WorkQueue[str]) -> None:
    queue.add("a")
    await get_now(queue)
    for _ in range(5):
        queue.add("a")

    queue.done("a")

    assert await the_only_key(queue) == "a"
    queue.done("a")
    assert len(queue) == 0


async def test_done_without_an_add_meanwhile_does_not_requeue(queue: WorkQueue[str]) -> None:
    queue.add("a")
    await get_now(queue)

    queue.done("a")

    assert len(queue) == 0


async def test_other_keys_are_handed_out_while_one_is_processing(queue: WorkQueue[str]) -> None:
    queue.add("a")
    queue.add("b")
    assert await get_now(queue) == "a"
    queue.add("a")

    assert await get_now(queue) == "b"


async def test_done_for_a_key_not_processing_raises(queue: WorkQueue[str]) -> None:
    queue.add("a")
    with pytest.raises(ValueError, match="not processing"):
        queue.done("a")

    await get_now(queue)
    queue.done("a")
    with pytest.raises(ValueError, match="not processing"):
        queue.done("a")


async def test_no_key_is_held_by_two_workers_and_no_change_is_missed(
    queue: WorkQueue[str],
) -> None:
    """Four workers, random adds: never two holders of a key, and each key's last
    change is seen by a reconcile that started after it."""
    holders: set[str] = set()
    overlaps: list[str] = []
    version: defaultdict[str, int] = defaultdict(int)
    reconciled: dict[str, int] = {}

    async def worker() -> None:
        async for key in keys(queue):
            try:
                if key in holders:
                    overlaps.append(key)
                holders.add(key)
                reconciled[key] = version[key]
                for _ in range(3):
                    await asyncio.sleep(0)
            finally:
                holders.discard(key)
                queue.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    rng = random.Random(7)
    for _ in range(400):
        key = rng.choice("abc")
        version[key] += 1
        queue.add(key)
        await asyncio.sleep(0)

    for _ in range(10_000):  # every change reconciled, then stop
        if not (len(queue) or queue.processing):
            break
        await asyncio.sleep(0)
    assert await queue.shut_down_with_drain()
    await asyncio.wait_for(asyncio.gather(*workers), timeout=1.0)
    assert overlaps == []
    assert reconciled == dict(version)


async def test_cancelled_getter_passes_its_wake_up_on(queue: WorkQueue[str]) -> None:
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await settle()

    queue.add("a")  # wakes `first` ...
    first.cancel()  # ... which is cancelled before it can take the key
    await settle()

    assert first.cancelled()
    assert second.done()
    assert second.result() == "a"


async def test_add_after_adds_the_key_only_once_the_delay_has_passed(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add_after("a", 1.0)
    await settle()
    assert len(queue) == 0

    assert await arrives_after(queue, clock, 0.999) == "a"


async def test_add_after_releases_keys_in_deadline_order(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add_after("c", 3.0)
    queue.add_after("a", 1.0)
    queue.add_after("b", 2.0)

    await clock.advance(3.0)

    assert [await get_now(queue) for _ in range(3)] == ["a", "b", "c"]


async def test_add_after_with_an_earlier_deadline_wakes_the_sleeping_timer(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add_after("late", 10.0)
    await settle()  # the timer is now asleep until t+10

    queue.add_after("early", 1.0)
    await clock.advance(1.0)

    assert await the_only_key(queue) == "early"


async def test_shorter_delay_for_a_delayed_key_wins(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add_after("a", 10.0)
    await settle()
    queue.add_after("a", 1.0)

    await clock.advance(1.0)
    assert await get_now(queue) == "a"
    queue.done("a")

    # The superseded 10 s entry must not add the key a second time.
    await clock.advance(10.0)
    assert len(queue) == 0


async def test_longer_delay_for_a_delayed_key_does_not_postpone_it(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add_after("a", 1.0)
    queue.add_after("a", 10.0)

    await clock.advance(1.0)

    assert len(queue) == 1


async def test_add_after_with_no_delay_adds_at_once(queue: WorkQueue[str]) -> None:
    queue.add_after("a", 0.0)
    queue.add_after("b", -1.0)

    assert len(queue) == 2


async def test_delayed_key_that_is_already_queued_is_not_queued_twice(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add("a")
    queue.add_after("a", 1.0)

    await clock.advance(1.0)

    assert len(queue) == 1


async def test_add_rate_limited_waits_for_the_backoff_delay(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add_rate_limited("a")  # 5 ms
    assert await arrives_after(queue, clock, 0.004) == "a"
    queue.done("a")

    queue.add_rate_limited("a")  # 10 ms
    assert await arrives_after(queue, clock, 0.009) == "a"


async def test_num_requeues_counts_rate_limited_adds_until_forget(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    for _ in range(3):
        queue.add_rate_limited("a")
    assert queue.num_requeues("a") == 3
    assert queue.num_requeues("b") == 0

    queue.forget("a")
    assert queue.num_requeues("a") == 0

    queue.add_rate_limited("a")  # back to 5 ms
    await clock.advance(0.005)
    assert len(queue) == 1


async def test_queue_uses_the_rate_limiter_it_is_given(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    queue = WorkQueue[str](
        NAME, clock=clock, registry=registry, rate_limiter=ExponentialBackoff(base=2.0)
    )

    queue.add_rate_limited("a")
    await clock.advance(1.999)
    assert len(queue) == 0
    await clock.advance(0.001)
    assert len(queue) == 1


async def test_shut_down_wakes_parked_getters_with_shutdown(queue: WorkQueue[str]) -> None:
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await settle()
    assert not any(g.done() for g in getters)

    queue.shut_down()
    await settle()

    for getter in getters:
        assert getter.done()
        assert isinstance(getter.exception(), ShutDown)


async def test_adds_after_shut_down_are_ignored(queue: WorkQueue[str]) -> None:
    queue.shut_down()

    queue.add("a")
    queue.add_after("b", 0.0)
    queue.add_rate_limited("c")

    assert len(queue) == 0
    assert queue.shutting_down
    with pytest.raises(ShutDown):
        await get_now(queue)


async def test_get_hands_out_no_key_queued_before_shut_down(
    queue: WorkQueue[str], registry: CollectorRegistry
) -> None:
    """A stopping controller finishes what it holds and takes nothing new: the backlog
    is the successor's (it relists and reconciles everything anyway), and working
    through it would hold the Lease past the pod's grace period."""
    queue.add("a")
    queue.add("b")

    queue.shut_down()

    with pytest.raises(ShutDown):
        await get_now(queue)
    assert len(queue) == 0
    assert sample(registry, "workqueue_depth") == 0


async def test_a_key_added_while_processing_is_not_queued_again_after_shut_down(
    queue: WorkQueue[str],
) -> None:
    queue.add("a")
    await get_now(queue)
    queue.add("a")  # dirty: would be queued again on done

    queue.shut_down()
    queue.done("a")

    assert len(queue) == 0
    with pytest.raises(ShutDown):
        await get_now(queue)


async def test_drain_waits_for_the_keys_in_flight_not_for_the_backlog() -> None:
    """Four workers, a backlog of 1,000 keys: after shut_down_with_drain only the (at
    most four) keys already held are finished."""
    queue = WorkQueue[int]("backlog", registry=CollectorRegistry())
    for key in range(1000):
        queue.add(key)
    finished: list[int] = []
    stopping, twenty = asyncio.Event(), asyncio.Event()
    after_stop: list[int] = []

    async def worker() -> None:
        async for key in keys(queue):
            try:
                for _ in range(3):
                    await asyncio.sleep(0)
                finished.append(key)
                if stopping.is_set():
                    after_stop.append(key)
                elif len(finished) == 20:
                    twenty.set()
            finally:
                queue.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    await asyncio.wait_for(twenty.wait(), timeout=1.0)
    stopping.set()
    assert await queue.shut_down_with_drain(timeout=5.0)
    await asyncio.wait_for(asyncio.gather(*workers), timeout=1.0)

    assert len(after_stop) <= 4, f"{len(after_stop)} keys were finished after shut_down"
    assert len(finished) < 100


async def test_shut_down_drops_delayed_keys_and_stops_the_timer(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add_after("a", 1.0)
    await settle()
    assert clock.sleepers == 1

    queue.shut_down()
    await settle()
    await clock.advance(5.0)

    assert len(queue) == 0
    assert clock.sleepers == 0


async def test_shut_down_with_drain_waits_for_keys_being_processed(
    queue: WorkQueue[str],
) -> None:
    queue.add("a")
    queue.add("b")
    await get_now(queue)
    await get_now(queue)

    drain = asyncio.create_task(queue.shut_down_with_drain())
    await settle()
    assert not drain.done()
    queue.done("a")
    await settle()
    assert not drain.done(), "one key is still being processed"

    queue.done("b")
    await settle()
    assert drain.done()
    assert drain.result() is True


async def test_shut_down_with_drain_gives_up_after_its_timeout(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add("a")
    await get_now(queue)

    drain = asyncio.create_task(queue.shut_down_with_drain(timeout=5.0))
    await settle()
    await clock.advance(4.9)
    assert not drain.done()

    await clock.advance(0.1)
    await settle()
    assert drain.done()
    assert drain.result() is False


async def test_shut_down_with_drain_returns_at_once_when_nothing_is_processing(
    queue: WorkQueue[str],
) -> None:
    queue.add("queued-but-not-taken")

    drained = await asyncio.wait_for(queue.shut_down_with_drain(timeout=5.0), timeout=1.0)

    assert drained is True


async def test_adds_total_counts_accepted_adds_only(
    queue: WorkQueue[str], registry: CollectorRegistry
) -> None:
    queue.add("a")
    queue.add("a")  # duplicate of a waiting key
    queue.add("b")
    await get_now(queue)
    queue.add("a")  # dirty while processing: accepted
    queue.add("a")  # duplicate again

    assert sample(registry, "workqueue_adds_total") == 3.0


async def test_depth_counts_keys_waiting_including_those_dirty_while_processing(
    queue: WorkQueue[str], registry: CollectorRegistry
) -> None:
    assert sample(registry, "workqueue_depth") == 0.0
    queue.add("a")
    queue.add("b")
    assert sample(registry, "workqueue_depth") == 2.0

    await get_now(queue)
    assert sample(registry, "workqueue_depth") == 1.0

    queue.add("a")
    assert sample(registry, "workqueue_depth") == 2.0

    queue.done("a")
    await get_now(queue)
    await get_now(queue)
    assert sample(registry, "workqueue_depth") == 0.0


async def test_retries_total_counts_rate_limited_adds(
    queue: WorkQueue[str], registry: CollectorRegistry
) -> None:
    assert sample(registry, "workqueue_retries_total") == 0.0
    queue.add_rate_limited("a")
    queue.add_rate_limited("a")
    queue.add_rate_limited("b")

    assert sample(registry, "workqueue_retries_total") == 3.0


async def test_queue_and_work_durations_measure_add_to_get_and_get_to_done(
    queue: WorkQueue[str], registry: CollectorRegistry, clock: FakeClock
) -> None:
    queue.add("a")
    await clock.advance(2.0)
    await get_now(queue)
    await clock.advance(3.0)
    queue.done("a")

    assert sample(registry, "workqueue_queue_duration_seconds_count") == 1.0
    assert sample(registry, "workqueue_queue_duration_seconds_sum") == pytest.approx(2.0)
    assert sample(registry, "workqueue_work_duration_seconds_count") == 1.0
    assert sample(registry, "workqueue_work_duration_seconds_sum") == pytest.approx(3.0)


async def test_unfinished_and_longest_running_are_computed_when_scraped(
    queue: WorkQueue[str], registry: CollectorRegistry, clock: FakeClock
) -> None:
    assert sample(registry, "workqueue_unfinished_work_seconds") == 0.0
    assert sample(registry, "workqueue_longest_running_processor_seconds") == 0.0

    queue.add("a")
    queue.add("b")
    await get_now(queue)
    await clock.advance(4.0)
    await get_now(queue)
    await clock.advance(1.0)

    assert sample(registry, "workqueue_unfinished_work_seconds") == pytest.approx(5.0 + 1.0)
    assert sample(registry, "workqueue_longest_running_processor_seconds") == pytest.approx(5.0)

    queue.done("a")
    queue.done("b")
    assert sample(registry, "workqueue_unfinished_work_seconds") == 0.0


async def test_queues_sharing_a_registry_report_under_their_own_name(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    first = WorkQueue[str]("first", clock=clock, registry=registry)
    second = WorkQueue[str]("second", clock=clock, registry=registry)

    first.add("a")
    second.add("a")
    second.add("b")

    assert sample(registry, "workqueue_adds_total", "first") == 1.0
    assert sample(registry, "workqueue_adds_total", "second") == 2.0


def test_metric_families_are_created_once_per_registry() -> None:
    one, other = CollectorRegistry(), CollectorRegistry()

    assert QueueMetrics.for_registry(one) is QueueMetrics.for_registry(one)
    assert QueueMetrics.for_registry(one) is not QueueMetrics.for_registry(other)


async def get_p(queue: WorkQueue[str]) -> tuple[str, int]:
    """`get_with_priority` of a key that must already be available."""
    return await asyncio.wait_for(queue.get_with_priority(), timeout=1.0)


async def test_higher_priority_is_served_first_fifo_within_a_priority(
    queue: WorkQueue[str],
) -> None:
    queue.add("low-1", LOW)
    queue.add("low-2", LOW)
    queue.add("a")
    queue.add("b")

    assert [await get_now(queue) for _ in range(4)] == ["a", "b", "low-1", "low-2"]


async def test_a_default_add_is_normal_priority(queue: WorkQueue[str]) -> None:
    queue.add("initial", LOW)
    queue.add("change")

    assert await get_p(queue) == ("change", NORMAL)
    assert await get_p(queue) == ("initial", LOW)


async def test_a_waiting_low_key_added_at_normal_moves_up_once(
    queue: WorkQueue[str], registry: CollectorRegistry
) -> None:
    for k in ("x", "y", "z"):
        queue.add(k, LOW)
    queue.add("a")
    queue.add("z")  # a real change to a key still waiting from the initial list

    assert [await get_now(queue) for _ in range(2)] == ["a", "z"]
    assert [await get_now(queue) for _ in range(2)] == ["x", "y"]
    assert len(queue) == 0  # z's old low entry is not handed out a second time
    assert sample(registry, "workqueue_adds_total") == 4.0  # moving up is no new add


async def test_a_waiting_key_added_at_a_lower_priority_keeps_its_place(
    queue: WorkQueue[str],
) -> None:
    queue.add("a")
    queue.add("b")
    queue.add("a", LOW)

    assert await get_p(queue) == ("a", NORMAL)
    assert await get_p(queue) == ("b", NORMAL)
    assert len(queue) == 0


async def test_a_key_dirty_while_processing_is_queued_at_its_highest_add(
    queue: WorkQueue[str],
) -> None:
    queue.add("k", LOW)
    queue.add("other", LOW)
    assert await get_now(queue) == "k"
    queue.add("k", LOW)
    queue.add("k", NORMAL)  # a real change while the initial reconcile runs
    queue.done("k")

    assert await get_p(queue) == ("k", NORMAL)


async def test_a_key_dirty_while_processing_at_low_stays_behind_normal_keys(
    queue: WorkQueue[str],
) -> None:
    queue.add("k", LOW)
    assert await get_now(queue) == "k"
    queue.add("k", LOW)
    queue.add("user")
    queue.done("k")

    assert [await get_now(queue) for _ in range(2)] == ["user", "k"]


async def test_a_moved_up_key_that_is_got_and_added_low_again_is_handed_out_once(
    queue: WorkQueue[str],
) -> None:
    queue.add("k", LOW)
    queue.add("k")  # moved up: a dead low entry stays behind
    assert await get_now(queue) == "k"
    queue.done("k")
    queue.add("k", LOW)

    assert await get_p(queue) == ("k", LOW)
    assert len(queue) == 0
    queue.done("k")
    assert len(queue) == 0


async def test_a_delayed_key_keeps_its_priority(queue: WorkQueue[str], clock: FakeClock) -> None:
    queue.add_after("retry", 1.0, LOW)
    await clock.advance(1.0)
    await settle()
    queue.add("user")

    assert [await get_p(queue) for _ in range(2)] == [
        ("user", NORMAL),
        ("retry", LOW),
    ]


async def test_a_key_delayed_twice_takes_the_earlier_deadline_and_higher_priority(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add_after("k", 5.0)
    queue.add_after("k", 1.0, LOW)  # earlier, but a lower priority
    queue.add("low", LOW)
    await clock.advance(1.0)
    await settle()

    assert await get_p(queue) == ("k", NORMAL)
    assert queue.delayed == 0


async def test_a_rate_limited_retry_keeps_its_priority(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add_rate_limited("failed", LOW)
    await clock.advance(0.005)  # the first backoff step
    await settle()
    queue.add("user")

    assert [await get_p(queue) for _ in range(2)] == [
        ("user", NORMAL),
        ("failed", LOW),
    ]


async def test_a_zero_delay_add_after_is_an_add_at_that_priority(queue: WorkQueue[str]) -> None:
    queue.add_after("low", 0, LOW)
    queue.add_after("now", 0)

    assert [await get_now(queue) for _ in range(2)] == ["now", "low"]


async def test_a_parked_getter_is_woken_by_a_low_priority_add(queue: WorkQueue[str]) -> None:
    getter = asyncio.create_task(queue.get_with_priority())
    await settle()
    queue.add("k", LOW)

    assert await asyncio.wait_for(getter, 1.0) == ("k", LOW)


def depth(registry: CollectorRegistry, priority: int) -> float | None:
    return registry.get_sample_value(
        "workqueue_depth_by_priority", {"name": NAME, "priority": str(priority)}
    )


async def test_depth_by_priority_follows_adds_moves_gets_and_dirty_keys(
    queue: WorkQueue[str], registry: CollectorRegistry
) -> None:
    assert (depth(registry, NORMAL), depth(registry, LOW)) == (0.0, 0.0)
    queue.add("a", LOW)
    queue.add("b", LOW)
    queue.add("c")
    assert (depth(registry, NORMAL), depth(registry, LOW)) == (1.0, 2.0)
    assert queue.depth_by_priority() == {NORMAL: 1, LOW: 2}

    queue.add("b")  # moved up
    assert (depth(registry, NORMAL), depth(registry, LOW)) == (2.0, 1.0)

    assert await get_now(queue) == "c"
    queue.add("c", LOW)  # dirty while processing counts as waiting
    assert (depth(registry, NORMAL), depth(registry, LOW)) == (1.0, 2.0)
    assert sample(registry, "workqueue_depth") == 3.0  # the total stays client-go's

    queue.shut_down()
    assert (depth(registry, NORMAL), depth(registry, LOW)) == (0.0, 0.0)


async def test_priorities_never_lose_or_duplicate_a_key() -> None:
    """Random adds at random priorities, gets and dones against a model: every key
    added is handed out exactly as often as the dedup rules say, highest first."""
    rng = random.Random(16)
    q = WorkQueue[int]("model", clock=FakeClock(), registry=CollectorRegistry())
    waiting: dict[int, int] = {}  # key -> priority (queued, not processing)
    dirty: dict[int, int] = {}  # processing keys added again -> priority
    processing: set[int] = set()
    for _ in range(3000):
        op = rng.random()
        if op < 0.55:
            key, prio = rng.randrange(12), rng.choice((NORMAL, LOW, 5))
            q.add(key, prio)
            if key in processing:
                dirty[key] = max(dirty.get(key, prio), prio)
            else:
                waiting[key] = max(waiting.get(key, prio), prio)
        elif op < 0.8 and waiting:
            key, prio = await q.get_with_priority()
            assert prio == max(waiting.values())
            assert waiting.pop(key) == prio
            assert key not in processing
            processing.add(key)
        elif processing:
            key = rng.choice(sorted(processing))
            q.done(key)
            processing.discard(key)
            if key in dirty:
                waiting[key] = dirty.pop(key)
        assert len(q) == len(waiting)
        assert q.depth_by_priority() == {
            p: n
            for p in {*waiting.values(), *dirty.values()}
            if (n := sum(1 for v in (*waiting.values(), *dirty.values()) if v == p))
        }


async def test_a_getter_that_takes_normal_keys_leaves_low_ones(queue: WorkQueue[str]) -> None:
    kept = asyncio.ensure_future(queue.get_with_priority(NORMAL))
    queue.add("backlog", LOW)
    await settle()
    assert not kept.done()  # a LOW key does not wake it, nor is it taken
    assert await asyncio.wait_for(queue.get_with_priority(), 1) == ("backlog", LOW)
    queue.add("change", NORMAL)
    assert await asyncio.wait_for(kept, 1) == ("change", NORMAL)


async def test_a_low_key_wakes_a_general_getter_parked_behind_a_kept_one(
    queue: WorkQueue[str],
) -> None:
    kept = asyncio.ensure_future(queue.get_with_priority(NORMAL))
    await settle()
    general = asyncio.ensure_future(queue.get_with_priority())
    await settle()
    queue.add("backlog", LOW)
    assert await asyncio.wait_for(general, 1) == ("backlog", LOW)
    assert not kept.done()
    kept.cancel()


async def test_a_low_key_moved_up_wakes_a_kept_getter(queue: WorkQueue[str]) -> None:
    queue.add("x", LOW)
    kept = asyncio.ensure_future(queue.get_with_priority(NORMAL))
    await settle()
    assert not kept.done()
    queue.add("x", NORMAL)
    assert await asyncio.wait_for(kept, 1) == ("x", NORMAL)
    assert len(queue) == 0


async def test_a_key_dirty_while_processing_is_requeued_for_the_getter_it_fits(
    queue: WorkQueue[str],
) -> None:
    queue.add("x", LOW)
    assert await queue.get_with_priority() == ("x", LOW)
    kept = asyncio.ensure_future(queue.get_with_priority(NORMAL))
    queue.add("x", NORMAL)  # a change while the backlog's reconcile of it runs
    await settle()
    assert not kept.done()
    queue.done("x")
    assert await asyncio.wait_for(kept, 1) == ("x", NORMAL)


async def test_an_add_updates_no_depth_gauge_the_scrape_reads_the_depths(
    queue: WorkQueue[str], registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mass requeue adds every relay in one go on the event loop: two gauge writes an
    add (each behind the client's lock) were two thirds of its cost, a stall of tens of
    milliseconds at 5,000 relays. The depths are read when scraped instead."""
    from prometheus_client import Gauge

    writes: list[float] = []
    real_set = Gauge.set

    def counted(self: Gauge, value: float) -> None:
        writes.append(value)
        real_set(self, value)

    monkeypatch.setattr(Gauge, "set", counted)
    for i in range(100):
        queue.add(f"k{i}", LOW if i % 2 else NORMAL)
    assert writes == []
    assert sample(registry, "workqueue_depth") == 100.0
    assert (depth(registry, NORMAL), depth(registry, LOW)) == (50.0, 50.0)
