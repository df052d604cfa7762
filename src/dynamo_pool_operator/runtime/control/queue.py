"""The controller work queue: client-go's workqueue semantics on asyncio, with
controller-runtime's priorities and fair queuing across flows (flows.py); its rules and
metrics are listed in docs/runtime.md ("Work queue").

A level-based controller processes keys, not events: "go and make object X right". The
rules are what make that safe. A waiting key is queued once: the reconciler reads the
current state anyway. A key is with one worker at a time, and one added meanwhile is
queued again on `done`: two workers would race each other's writes, and no change is
lost. A failing key backs off on its own: it cannot hot-loop against the API server. A
mass of keys at `LOW` (a start's initial list, a relist, a requeue of every relay) does
not delay a user's change at `NORMAL`, nor does one tenant's mass change another
tenant's single change.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.clock import Clock, SystemClock
from dynamo_pool_operator.runtime.control.flows import FairQueue, FlowOf
from dynamo_pool_operator.runtime.control.reconcile_metrics import QueueMetrics
from dynamo_pool_operator.runtime.ratelimit import ExponentialBackoff, RateLimiter
from dynamo_pool_operator.runtime.registry import REGISTRY

__all__ = [
    "LOW",
    "NORMAL",
    "QueueMetrics",
    "ShutDown",
    "WorkQueue",
]

K = TypeVar("K", bound=Hashable)

#: The priority of an add that names none: a real change, served first.
NORMAL = 0
#: controller-runtime's `handler.LowPriority`: the initial list, relists, mass requeues.
LOW = -100


class ShutDown(Exception):
    """Raised by `WorkQueue.get` once the queue is shut down and has nothing left to hand out."""


# --------------------------------------------------------------------------- the queue


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class WorkQueue(Generic[K]):
    """A de-duplicating, in-flight-exclusive, delayable, rate-limited queue of keys.

    A key is in at most one of three places at a time, which is what the rules in
    the module docstring come down to:

    * *queued*: waiting for a worker (`get` hands out the highest priority first,
      round-robin across flows within a priority, FIFO within a flow);
    * *processing*: with a worker until `done`, maybe also *dirty* (added again
      meanwhile, so it is queued again on `done`);
    * *delayed*: parked by `add_after` until its deadline, then `add`-ed.

    Use from one event loop; the methods are not thread-safe. `add_after` with a
    positive delay needs a running loop (it starts the queue's timer task).

    The worker loop is::

        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            try:
                ...  # reconcile; on error queue.add_rate_limited(key), else queue.forget(key)
            finally:
                queue.done(key)
    """

    def __init__(
        self,
        name: str,
        *,
        clock: Clock | None = None,
        rate_limiter: RateLimiter[K] | None = None,
        registry: CollectorRegistry | None = None,
        flow: FlowOf[K] | None = None,
    ) -> None:
        self.name = name
        self._flow = flow
        self._clock: Clock = clock or SystemClock()
        self._limiter: RateLimiter[K] = (
            rate_limiter if rate_limiter is not None else ExponentialBackoff()
        )

        # Queued keys: one fair queue per priority (`_levels` highest first), and the
        # priority each queued key is at.
        self._ready: dict[int, FairQueue[K]] = {}
        self._levels: list[tuple[int, FairQueue[K]]] = []
        self._queued_at: dict[K, int] = {}
        # Keys that need a (further) reconcile: everything queued, plus keys added
        # again while processing. Its size is the depth client-go reports. The value
        # is the key's priority: the highest it was added with since it was last got.
        self._dirty: dict[K, int] = {}
        self._depth_by_priority: dict[int, int] = {}
        # Processing keys: the monotonic time each was handed out, and the priority it
        # was queued at (that priority's fair queue counts it in flight until `done`).
        self._processing: dict[K, float] = {}
        self._taken_at: dict[K, int] = {}
        # When each dirty key was accepted, for the queue-duration histogram.
        self._added_at: dict[K, float] = {}
        # Parked getters, each with the lowest priority it takes (None: any) and whether
        # it takes only keys of flows with none in flight.
        self._getters: deque[tuple[asyncio.Future[None], int | None, bool]] = deque()
        self._idle = asyncio.Event()
        self._idle.set()
        self._shutting_down = False

        # Delayed keys: a heap of (deadline, seq, key) with lazy deletion; an entry
        # is live only while `_deadline[key]` still equals its deadline.
        self._delayed: list[tuple[float, int, K]] = []
        self._deadline: dict[K, float] = {}
        self._delayed_priority: dict[K, int] = {}
        self._seq = itertools.count()
        self._timer: asyncio.Task[None] | None = None

        family = QueueMetrics.for_registry(registry if registry is not None else REGISTRY)
        self._m_flows_by_priority = family.flows_by_priority
        # The depths are read when scraped, not set on every add and get: a mass
        # requeue adds every relay in one go on the event loop, and two gauge writes an
        # add were two thirds of its cost.
        family.depth.labels(name=name).set_function(lambda: len(self._dirty))
        self._m_depth_by_priority = family.depth_by_priority
        for priority in (NORMAL, LOW):  # the series exist from the start, at 0
            self._depth_by_priority[priority] = 0
            self._gauge(priority)
            self._level(priority)
        self._m_adds = family.adds.labels(name=name)
        self._m_retries = family.retries.labels(name=name)
        self._m_queue_duration = family.queue_duration.labels(name=name)
        self._m_work_duration = family.work_duration.labels(name=name)
        # Computed when scraped rather than kept up to date on a timer.
        family.unfinished_work.labels(name=name).set_function(self._unfinished_work_seconds)
        family.longest_running.labels(name=name).set_function(self._longest_running_seconds)

    # ------------------------------------------------------------------ adding

    def add(self, key: K, priority: int = NORMAL) -> None:
        """Mark `key` as needing a reconcile, at `priority` (higher is served first).

        No-op if it is already waiting at this priority or a higher one, or the queue
        is shutting down. Waiting at a lower one, it moves up (to the back of the higher
        priority): a real change to a key still waiting from a backlog is a real change.
        If a worker has it, it is marked dirty and queued again when that worker calls
        `done`.
        """
        if self._shutting_down:
            return
        current = self._dirty.get(key)
        if current is not None:
            if priority > current:
                self._set_priority(key, current, priority)
                queued_at = self._queued_at.get(key)
                if queued_at is not None:
                    self._ready[queued_at].discard(key)
                    self._push(key, priority)
                    self._wake_one_getter(priority)  # one that takes only this priority
            return
        self._dirty[key] = priority
        self._count(priority, +1)
        self._added_at[key] = self._clock.monotonic()
        self._m_adds.inc()
        if key in self._processing:
            return
        self._push(key, priority)
        self._wake_one_getter(priority)

    def add_after(self, key: K, delay: float, priority: int = NORMAL) -> None:
        """`add` `key` at `priority` once `delay` seconds have passed on the queue's clock.

        If `key` is already delayed the earlier deadline wins, so a short
        `RequeueAfter` is not swallowed by a long backoff scheduled before it, and so
        does the higher priority. A delay <= 0 adds at once. Delayed keys are dropped
        by `shut_down`.
        """
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key, priority)
            return
        deadline = self._clock.monotonic() + delay
        current = self._deadline.get(key)
        if current is not None:
            self._delayed_priority[key] = max(self._delayed_priority[key], priority)
            if current <= deadline:
                return
        else:
            self._delayed_priority[key] = priority
        self._deadline[key] = deadline
        heapq.heappush(self._delayed, (deadline, next(self._seq), key))
        if self._timer is None or self._timer.done() or self._delayed[0][0] == deadline:
            self._arm_timer()

    def add_rate_limited(self, key: K, priority: int = NORMAL) -> None:
        """Retry `key` at `priority` after the rate limiter's delay (which counts as one
        more failure)."""
        self._m_retries.inc()
        self.add_after(key, self._limiter.when(key), priority)

    def forget(self, key: K) -> None:
        """Reset `key`'s backoff; call after it reconciled successfully.

        Does not remove `key` from the queue: it only clears the failure history.
        """
        self._limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        """How many rate-limited retries `key` has had since it was last forgotten."""
        return self._limiter.failures(key)

    # ------------------------------------------------------------------ working

    async def get(self) -> K:
        """Wait for a key and mark it processing; the caller must call `done` with it.

        After `shut_down` this raises `ShutDown` at once, keys still queued or not
        (unlike client-go, whose `Get` hands out the backlog first): see `shut_down`.
        Getters parked at the time of `shut_down` receive it too.
        """
        return (await self.get_with_priority())[0]

    async def get_with_priority(
        self, at_least: int | None = None, *, idle_flow: bool = False
    ) -> tuple[K, int]:
        """`get`, and the priority the key was queued at (to requeue it at the same).

        `at_least`: take only a key queued at this priority or a higher one, and wait
        while there is none (keys of lower priority are left to other getters): a
        worker kept for real changes, so that one is served at once however long the
        backlog of a mass event. `idle_flow` (with a flow function): take only a key of a
        flow with no key in flight at its priority, so that a flow's own mass change at
        that priority never holds this worker either and another flow's change is taken
        at once."""
        idle_flow = idle_flow and self._flow is not None
        while True:
            if self._shutting_down:
                raise ShutDown(self.name)
            if self._ready_at(at_least, idle_flow) is not None:
                break
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            parked = (waiter, at_least, idle_flow)
            self._getters.append(parked)
            try:
                await waiter
            except asyncio.CancelledError:
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._getters.remove(parked)
                # Woken for a key but cancelled before taking it: pass the wake-up on,
                # or the key would sit queued while another getter sleeps.
                ready = self._ready_at(None)
                if ready is not None and not waiter.cancelled():
                    self._wake_one_getter(ready)
                raise
        key = self._pop(at_least, idle_flow)
        now = self._clock.monotonic()
        priority = self._taken_at[key] = self._dirty.pop(key)
        self._count(priority, -1)
        self._processing[key] = now
        self._idle.clear()
        self._m_queue_duration.observe(max(now - self._added_at.pop(key, now), 0.0))
        return key, priority

    def done(self, key: K) -> None:
        """Release `key` from its worker; if it was added meanwhile, queue it again.

        Raises `ValueError` if `key` is not processing: calling `done` twice, or for
        a key never got, is a worker bug that would otherwise silently unlock a key
        another worker holds.
        """
        try:
            started = self._processing.pop(key)
        except KeyError:
            raise ValueError(
                f"workqueue {self.name!r}: done({key!r}) for a key not processing"
            ) from None
        self._m_work_duration.observe(max(self._clock.monotonic() - started, 0.0))
        taken_at = self._taken_at.pop(key)
        if self._ready[taken_at].finished(key) and not self._shutting_down:
            self._wake_one_getter(taken_at)  # its flow's keys now fit an idle-flow getter
        if key in self._dirty and not self._shutting_down:
            self._push(key, self._dirty[key])
            self._wake_one_getter(self._dirty[key])
        if not self._processing:
            self._idle.set()

    def __len__(self) -> int:
        """Number of keys queued and ready for a worker (not processing, not delayed)."""
        return len(self._queued_at)

    def depth_by_priority(self) -> dict[int, int]:
        """Keys waiting (queued, or dirty while processing) per priority."""
        return {p: n for p, n in self._depth_by_priority.items() if n}

    def flows_by_priority(self) -> dict[int, int]:
        """Flows with keys queued, per priority."""
        return {p: level.flows for p, level in self._levels if level.flows}

    @property
    def processing(self) -> int:
        """Number of keys a worker holds right now."""
        return len(self._processing)

    @property
    def delayed(self) -> int:
        """Number of keys waiting for a deadline (add_after, backoff)."""
        return len(self._deadline)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    # ------------------------------------------------------------------ stopping

    def shut_down(self) -> None:
        """Stop handing out keys: `get` raises `ShutDown` from now on, parked getters too.

        Keys being processed stay with their workers until `done`; everything else is
        dropped: queued keys, keys dirty while processing, delayed keys, later adds.
        A stopping controller must not work through its backlog: the next leader
        lists everything and reconciles it anyway, and a backlog of a thousand keys
        would hold the Lease (and its writes) past the pod's termination grace
        period, so the successor would wait for the Lease to expire instead.
        """
        if self._shutting_down:
            return
        self._shutting_down = True
        while self._getters:
            _wake(self._getters.popleft()[0])
        for _, level in self._levels:
            level.clear()
        self._queued_at.clear()
        self._dirty.clear()
        for priority in list(self._depth_by_priority):
            self._depth_by_priority[priority] = 0
        self._added_at.clear()
        self._delayed.clear()
        self._deadline.clear()
        self._delayed_priority.clear()
        if self._timer is not None:
            self._timer.cancel()

    # The bound is measured on the injected clock (so FakeClock tests can expire it),
    # which `asyncio.timeout` cannot do: hence a timeout argument.
    async def shut_down_with_drain(self, timeout: float | None = None) -> bool:
        """`shut_down`, then wait until no key is processing, at most `timeout` seconds.

        Returns True if the keys in flight were finished, False on timeout (None: wait
        for ever). Only those: queued keys are dropped by `shut_down`.
        """
        self.shut_down()
        if timeout is None:
            await self._wait_idle()
            return True
        idle = asyncio.ensure_future(self._wait_idle())
        expiry = asyncio.ensure_future(self._clock.sleep(timeout))
        try:
            await asyncio.wait({idle, expiry}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            idle.cancel()
            expiry.cancel()
        return not self._processing

    # ------------------------------------------------------------------ internals

    def _level(self, priority: int) -> FairQueue[K]:
        """The fair queue of `priority` (made on its first key, with its flows series)."""
        if priority in self._ready:
            return self._ready[priority]
        level = self._ready[priority] = FairQueue(self._flow)
        self._levels.append((priority, level))
        self._levels.sort(key=lambda entry: -entry[0])
        self._m_flows_by_priority.labels(name=self.name, priority=str(priority)).set_function(
            lambda: level.flows
        )
        return level

    def _push(self, key: K, priority: int) -> None:
        self._level(priority).push(key)
        self._queued_at[key] = priority

    def _ready_at(self, at_least: int | None, idle_flow: bool = False) -> int | None:
        """The highest priority with a key queued (of a flow with none in flight, if
        `idle_flow`), if it is at least `at_least`."""
        for priority, level in self._levels:
            if at_least is not None and priority < at_least:
                return None
            if len(level) and (not idle_flow or level.has_idle()):
                return priority
        return None

    def _pop(self, at_least: int | None = None, idle_flow: bool = False) -> K:
        """The key whose turn it is at the highest priority with one that fits."""
        priority = self._ready_at(at_least, idle_flow)
        if priority is None:
            raise AssertionError("workqueue: _pop with nothing queued")
        key = self._ready[priority].pop(idle_flow)
        del self._queued_at[key]
        return key

    def _set_priority(self, key: K, old: int, new: int) -> None:
        self._dirty[key] = new
        self._count(old, -1)
        self._count(new, +1)

    def _count(self, priority: int, delta: int) -> None:
        if priority not in self._depth_by_priority:
            self._gauge(priority)
        self._depth_by_priority[priority] += delta

    def _gauge(self, priority: int) -> None:
        """The depth series of `priority`, read when scraped (from the first key of it)."""
        self._depth_by_priority.setdefault(priority, 0)
        self._m_depth_by_priority.labels(name=self.name, priority=str(priority)).set_function(
            lambda: self._depth_by_priority.get(priority, 0)
        )

    def _wake_one_getter(self, priority: int) -> None:
        """Wake the first parked getter that takes a key of `priority` (an idle-flow
        getter only if such a key is there for it now: woken for nothing, it would park
        again and the getter that could take the key would sleep on)."""
        for parked in self._getters:
            waiter, at_least, idle_flow = parked
            if waiter.done():
                continue
            if idle_flow and self._ready_at(at_least, idle_flow) is None:
                continue
            if at_least is None or priority >= at_least:
                self._getters.remove(parked)
                waiter.set_result(None)
                return
        # Drop getters woken already (by shut_down, or cancelled) from the front.
        while self._getters and self._getters[0][0].done():
            self._getters.popleft()

    async def _wait_idle(self) -> None:
        # Re-check after each wake-up: a worker may have taken another key already.
        while self._processing:
            await self._idle.wait()

    def _arm_timer(self) -> None:
        # Restarting the task is how the timer learns of an earlier deadline: the
        # old one is parked in `Clock.sleep`, and no state changes across that await.
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().create_task(
            self._run_timer(), name=f"workqueue-{self.name}-timer"
        )

    async def _run_timer(self) -> None:
        """Move delayed keys whose deadline has passed into the queue; sleep to the next.

        One task per queue, sleeping until the earliest deadline. It ends when
        nothing is delayed; `add_after` starts it again.
        """
        while self._delayed and not self._shutting_down:
            now = self._clock.monotonic()
            while self._delayed and self._delayed[0][0] <= now:
                deadline, _, key = heapq.heappop(self._delayed)
                if self._deadline.get(key) == deadline:
                    del self._deadline[key]
                    self.add(key, self._delayed_priority.pop(key))
            if self._delayed:
                await self._clock.sleep(self._delayed[0][0] - now)

    def _unfinished_work_seconds(self) -> float:
        now = self._clock.monotonic()
        return sum(now - started for started in tuple(self._processing.values()))

    def _longest_running_seconds(self) -> float:
        now = self._clock.monotonic()
        return max((now - started for started in tuple(self._processing.values())), default=0.0)
