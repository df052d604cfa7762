"""The controller work queue: client-go's workqueue semantics on asyncio.

A level-based controller does not process events, it processes *keys*: "go and
make object X right". The queue is what turns a stream of events into a set of
keys worth reconciling, and its rules are what make reconciling safe:

* **De-duplication.** Ten events for X while X waits are one reconcile, because
  the reconciler reads the current state anyway; queueing X ten times would only
  burn API calls on identical work.
* **In-flight exclusion.** A key handed out by `get` is *processing* until `done`.
  Adding it meanwhile marks it *dirty* instead of queueing it, and `done` queues it
  again. So two workers never reconcile the same object at once (they would race
  each other's writes and both act on stale reads), yet no change is lost: the
  event that arrived mid-reconcile gets a fresh reconcile after the current one.
* **Delays and backoff.** `add_after` parks a key until a deadline (for
  `RequeueAfter`); `add_rate_limited` parks it for a per-key exponential backoff
  so that a failing object retries quickly at first but cannot hot-loop against
  the API server. `forget` resets the backoff once the key succeeds.

Time comes from an injected `Clock`, so tests drive delays with `FakeClock`.

The rate limiter default is controller-runtime's (priority-queue era, v0.23+):
per-key exponential only, 5 ms doubling up to 1000 s (`ratelimit.ExponentialBackoff`).
`TokenBucket` and `MaxOf` there rebuild client-go's older default,
``MaxOf(ExponentialBackoff(), TokenBucket())``.

Metrics use client-go's `workqueue_*` names with a ``name`` label so the usual
dashboards work unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import threading
import weakref
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from . import metrics
from .clock import Clock, SystemClock
from .ratelimit import ExponentialBackoff, RateLimiter

__all__ = [
    "QueueMetrics",
    "ShutDown",
    "WorkQueue",
]

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """Raised by `WorkQueue.get` once the queue is shut down and has nothing left to hand out."""


# --------------------------------------------------------------------------- metrics

#: client-go's buckets for both duration histograms: 10 ns to 1000 s, by decades.
DURATION_BUCKETS: tuple[float, ...] = (
    1e-08,
    1e-07,
    1e-06,
    1e-05,
    1e-04,
    1e-03,
    1e-02,
    1e-01,
    1.0,
    10.0,
    100.0,
    1000.0,
)


class QueueMetrics:
    """The `workqueue_*` metric families of one registry.

    Every queue (one per controller) shares the same families and tells itself
    apart with the ``name`` label, and a family can be registered only once per
    registry, so they are created once per registry via `for_registry`.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ("name",)
        self.depth = Gauge(
            "workqueue_depth",
            "Number of keys waiting in the work queue.",
            labels,
            registry=registry,
        )
        self.adds = Counter(
            "workqueue_adds_total",
            "Number of adds the work queue accepted (duplicates of waiting keys excluded).",
            labels,
            registry=registry,
        )
        self.retries = Counter(
            "workqueue_retries_total",
            "Number of rate-limited re-adds the work queue handled.",
            labels,
            registry=registry,
        )
        self.queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "Seconds a key waits in the work queue between being added and handed to a worker.",
            labels,
            registry=registry,
            buckets=DURATION_BUCKETS,
        )
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "Seconds a worker spends on a key, from get to done.",
            labels,
            registry=registry,
            buckets=DURATION_BUCKETS,
        )
        self.unfinished_work = Gauge(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress not yet observed by work_duration; a steady climb "
            "points at stuck workers.",
            labels,
            registry=registry,
        )
        self.longest_running = Gauge(
            "workqueue_longest_running_processor_seconds",
            "Seconds the longest-running worker of the queue has spent on its current key.",
            labels,
            registry=registry,
        )

    @classmethod
    def for_registry(cls, registry: CollectorRegistry) -> QueueMetrics:
        """The families registered in `registry`, creating them on first use."""
        with _METRICS_LOCK:
            found = _METRICS_BY_REGISTRY.get(registry)
            if found is None:
                found = cls(registry)
                _METRICS_BY_REGISTRY[registry] = found
            return found


# Weak keys: a registry a test throws away must not be kept alive (or, were it keyed
# by id(), mistaken for a new registry that happens to get the same id).
_METRICS_BY_REGISTRY: weakref.WeakKeyDictionary[CollectorRegistry, QueueMetrics] = (
    weakref.WeakKeyDictionary()
)
_METRICS_LOCK = threading.Lock()


# --------------------------------------------------------------------------- the queue


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class WorkQueue(Generic[K]):
    """A de-duplicating, in-flight-exclusive, delayable, rate-limited queue of keys.

    A key is in at most one of three places at a time, which is what the rules in
    the module docstring come down to:

    * *queued*: waiting for a worker (`get` hands these out in FIFO order);
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
    ) -> None:
        self.name = name
        self._clock: Clock = clock or SystemClock()
        self._limiter: RateLimiter[K] = (
            rate_limiter if rate_limiter is not None else ExponentialBackoff()
        )

        self._queue: deque[K] = deque()
        # Keys that need a (further) reconcile: everything queued, plus keys added
        # again while processing. Its size is the depth client-go reports.
        self._dirty: set[K] = set()
        # Processing keys and the monotonic time each was handed out.
        self._processing: dict[K, float] = {}
        # When each dirty key was accepted, for the queue-duration histogram.
        self._added_at: dict[K, float] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._idle = asyncio.Event()
        self._idle.set()
        self._shutting_down = False

        # Delayed keys: a heap of (deadline, seq, key) with lazy deletion; an entry
        # is live only while `_deadline[key]` still equals its deadline.
        self._delayed: list[tuple[float, int, K]] = []
        self._deadline: dict[K, float] = {}
        self._seq = itertools.count()
        self._timer: asyncio.Task[None] | None = None

        family = QueueMetrics.for_registry(registry if registry is not None else metrics.REGISTRY)
        self._m_depth = family.depth.labels(name=name)
        self._m_adds = family.adds.labels(name=name)
        self._m_retries = family.retries.labels(name=name)
        self._m_queue_duration = family.queue_duration.labels(name=name)
        self._m_work_duration = family.work_duration.labels(name=name)
        # Computed when scraped rather than kept up to date on a timer.
        family.unfinished_work.labels(name=name).set_function(self._unfinished_work_seconds)
        family.longest_running.labels(name=name).set_function(self._longest_running_seconds)
        self._m_depth.set(0)

    # ------------------------------------------------------------------ adding

    def add(self, key: K) -> None:
        """Mark `key` as needing a reconcile.

        No-op if it is already waiting or the queue is shutting down. If a worker
        has it, it is marked dirty and queued again when that worker calls `done`.
        """
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        self._added_at[key] = self._clock.monotonic()
        self._m_adds.inc()
        self._m_depth.set(len(self._dirty))
        if key in self._processing:
            return
        self._queue.append(key)
        self._wake_one_getter()

    def add_after(self, key: K, delay: float) -> None:
        """`add` `key` once `delay` seconds have passed on the queue's clock.

        If `key` is already delayed the earlier deadline wins, so a short
        `RequeueAfter` is not swallowed by a long backoff scheduled before it.
        A delay <= 0 adds at once. Delayed keys are dropped by `shut_down`.
        """
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        deadline = self._clock.monotonic() + delay
        current = self._deadline.get(key)
        if current is not None and current <= deadline:
            return
        self._deadline[key] = deadline
        heapq.heappush(self._delayed, (deadline, next(self._seq), key))
        if self._timer is None or self._timer.done() or self._delayed[0][0] == deadline:
            self._arm_timer()

    def add_rate_limited(self, key: K) -> None:
        """Retry `key` after the rate limiter's delay (which counts as one more failure)."""
        self._m_retries.inc()
        self.add_after(key, self._limiter.when(key))

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
        while True:
            if self._shutting_down:
                raise ShutDown(self.name)
            if self._queue:
                break
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._getters.remove(waiter)
                # Woken for a key but cancelled before taking it: pass the wake-up on,
                # or the key would sit queued while another getter sleeps.
                if self._queue and not waiter.cancelled():
                    self._wake_one_getter()
                raise
        key = self._queue.popleft()
        now = self._clock.monotonic()
        self._dirty.discard(key)
        self._processing[key] = now
        self._idle.clear()
        self._m_queue_duration.observe(max(now - self._added_at.pop(key, now), 0.0))
        self._m_depth.set(len(self._dirty))
        return key

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
        if key in self._dirty and not self._shutting_down:
            self._queue.append(key)
            self._wake_one_getter()
        if not self._processing:
            self._idle.set()

    def __len__(self) -> int:
        """Number of keys queued and ready for a worker (not processing, not delayed)."""
        return len(self._queue)

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
            _wake(self._getters.popleft())
        self._queue.clear()
        self._dirty.clear()
        self._added_at.clear()
        self._m_depth.set(0)
        self._delayed.clear()
        self._deadline.clear()
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

    def _wake_one_getter(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

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
                    self.add(key)
            if self._delayed:
                await self._clock.sleep(self._delayed[0][0] - now)

    def _unfinished_work_seconds(self) -> float:
        now = self._clock.monotonic()
        return sum(now - started for started in tuple(self._processing.values()))

    def _longest_running_seconds(self) -> float:
        now = self._clock.monotonic()
        return max((now - started for started in tuple(self._processing.values())), default=0.0)
