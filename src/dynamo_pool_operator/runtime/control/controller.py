"""Watches -> keys -> workers -> reconcile, with controller-runtime's contract (`Result`);
its guarantees are listed in docs/runtime.md ("Controller").

A controller declares what it watches: its primary resource (`for_`) and anything else
through a map function (`watches`). Each event becomes a `Request` (namespace, name) on
the work queue (queue.py): at `LOW` from an informer's list, at `NORMAL` from a watch, so
a user's change made during a start, a failover or a mass requeue is served first.

Keys are queued only while the controller runs, that is while this process leads: a key
queued on a follower would never be taken, and its `workqueue_depth` would read as a
backlog that never drains. `start` attaches the watches, and each informer replays its
cache to them (at `LOW`), so every object is reconciled once after a failover. A
reconcile reads only caches: it never depends on having seen a particular event.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.cache.informer import EventHandler, EventType, Informer
from dynamo_pool_operator.runtime.cache.store import Obj
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.background import ChangesFirst, background
from dynamo_pool_operator.runtime.client.undecodable import Undecodable
from dynamo_pool_operator.runtime.clock import Clock, SystemClock
from dynamo_pool_operator.runtime.control.queue import LOW, NORMAL, ShutDown, WorkQueue
from dynamo_pool_operator.runtime.control.reconcile_metrics import ReconcileMetrics
from dynamo_pool_operator.runtime.ratelimit import RateLimiter
from dynamo_pool_operator.runtime.registry import REGISTRY

log = logging.getLogger(__name__)

#: The key of a primary object: (namespace, name); namespace "" for cluster scope.
Request = tuple[str, str]


def by_namespace(request: Request) -> str:
    """The flow of a key for fair queuing: its namespace, i.e. its tenant's."""
    return request[0]


MapFunc = Callable[[Obj], Iterable[Request]]
Predicate = Callable[[EventType, Obj | None, Obj | None], bool]


@dataclass(frozen=True, slots=True)
class Result:
    """What a successful reconcile asks for: nothing, another look after a delay, or
    (`requeue`) another look soon through the key's rate limiter, as for a lost race
    (the first retry comes within milliseconds; a race lost again and again backs off
    instead of hot-looping). Neither is an error.

    `requeue_after` is None for no requeue, and a number of seconds otherwise: 0.0 (or
    less) means now. controller-runtime reads a zero `RequeueAfter` as no requeue, so a
    delay computed down to zero ("the grace period ends now") would silently become
    "never"; here it comes back at once. A reconcile that asks for 0.0 every time loops
    (workers still yield between keys): `requeue=True` is the retry that backs off."""

    requeue_after: float | None = None
    requeue: bool = False


class Reconciler(Protocol):
    async def reconcile(self, request: Request) -> Result | None: ...


@runtime_checkable
class RemembersInputs(Protocol):
    """A reconciler that skips a pass whose inputs are those of an earlier no-op pass;
    told when an input no object shows changed (`Controller.enqueue_all`)."""

    def inputs_changed(self) -> None: ...


# --------------------------------------------------------------------- predicates
def _meta(obj: Obj | None) -> dict[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, dict) else {}


def spec_or_metadata_changed(etype: EventType, old: Obj | None, new: Obj | None) -> bool:
    """Pass creates, deletes, and updates that change anything but status.

    A status-only update of a primary's dependency (a DGD's status, written by
    its own operator many times a minute) must not wake us: it cannot change
    our decision, and reacting to it is how status feedback loops start.
    Generation covers spec; labels, annotations, owners, finalizers and the
    deletion timestamp do not bump it, so they are compared too.
    """
    if etype is not EventType.MODIFIED:
        return True
    a, b = _meta(old), _meta(new)
    keys = ("generation", "labels", "annotations", "ownerReferences", "finalizers")
    if any(a.get(k) != b.get(k) for k in keys):
        return True
    if a.get("deletionTimestamp") != b.get("deletionTimestamp"):
        return True
    if "generation" not in b:  # a kind without generation (core objects): compare spec
        return (old or {}).get("spec") != (new or {}).get("spec")
    return False


# --------------------------------------------------------------------- controller
class Controller:
    """One named controller: its watches, its queue and its workers.

    Workers are supervised. A reconcile's failure never ends a worker (a stray
    CancelledError included), but should a worker task die anyway it is replaced at
    once and counted (`controller_worker_restarts_total`). Workers that die more than
    `max_worker_restarts` times within `worker_restart_window` seconds are not
    replaced: something is broken for good, and `healthy` turns False so that
    /healthz fails and kubelet restarts the process rather than leaving a leader
    that holds the Lease and reconciles nothing.
    """

    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        *,
        workers: int = 1,
        cache_sync_timeout: float = 120.0,
        clock: Clock | None = None,
        rate_limiter: RateLimiter[Request] | None = None,
        registry: CollectorRegistry | None = None,
        max_worker_restarts: int = 5,
        worker_restart_window: float = 60.0,
        kept_for_changes: int = 0,
        flow: Callable[[Request], Hashable] | None = None,
        changes_first: ChangesFirst | None = None,
    ) -> None:
        self.name = name
        self.reconciler = reconciler
        self.workers = workers
        #: Workers that take only `NORMAL` keys (or higher) and, with a flow function,
        #: only of flows with no key being reconciled at that priority: a real change is
        #: taken at once, however long the `LOW` backlog of a mass event or another
        #: flow's mass change at `NORMAL` (at most workers - 1).
        self.kept_for_changes = max(0, min(kept_for_changes, workers - 1))
        #: With a flow function, a kept worker's pass is a lone change's: its writes go
        #: first (`ChangesFirst`, which the client given it also asks before each write).
        self.changes_first = changes_first if flow is not None else None
        self.cache_sync_timeout = cache_sync_timeout
        self.max_worker_restarts = max_worker_restarts
        self.worker_restart_window = worker_restart_window
        self._clock = clock or SystemClock()
        registry = registry if registry is not None else REGISTRY
        #: The queue's flows (`by_namespace`: each namespace in turn within a priority);
        #: None: one flow, FIFO within a priority.
        self.queue: WorkQueue[Request] = WorkQueue(
            name, clock=self._clock, rate_limiter=rate_limiter, registry=registry, flow=flow
        )
        self._m = ReconcileMetrics.for_registry(registry)
        # This controller's series, labelled once (series exist from the start, at 0):
        # `labels()` costs more than the update it serves, four times a pass.
        self._m_total = {
            result: self._m.total.labels(name, result)
            for result in ("success", "error", "requeue", "requeue_after")
        }
        self._m_active = self._m.active.labels(name)
        self._m_time = self._m.time.labels(name)
        self._m_errors = self._m.errors.labels(name)
        self._m_restarts = self._m.worker_restarts.labels(name)
        self._m.max_workers.labels(name).set(workers)
        self._informers: list[Informer] = []
        #: Caches worth a short wait at start, but whose failure must not stop us.
        self._optional: list[Informer] = []
        self.optional_sync_grace = 10.0
        #: Every watch declared; attached to its informer only while `_queueing`.
        self._handlers: list[tuple[Informer, EventHandler]] = []
        #: The `on_sync` of each watch whose informer had not synced when declared.
        self._sync_handlers: list[tuple[Informer, Callable[[], None]]] = []
        #: The skip handler of each watch (`Informer.add_skip_handler`).
        self._skip_handlers: list[tuple[Informer, Callable[[Undecodable], None]]] = []
        #: True from `start` to `stop`: events and `enqueue_all` queue keys.
        self._queueing = False
        #: The running worker of each slot (0..workers-1).
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._stopping = False
        self._deaths: deque[float] = deque()  # monotonic times workers died, in the window
        self._lost_workers = 0  # slots whose worker died and was not replaced

    # ------------------------------------------------------------ watches
    def watches(
        self,
        informer: Informer,
        mapper: MapFunc,
        predicate: Predicate | None = None,
        *,
        wait_for_sync: bool = True,
        priority: int | None = None,
        on_sync: Callable[[], Iterable[Request]] | None = None,
    ) -> Controller:
        """Enqueue the keys `mapper` returns for each (old and new) object of an event.

        `wait_for_sync=False` for an optional dependency whose cache may never sync
        (e.g. no permission): the reconciler must then check `has_synced` itself, and
        `on_sync` returns the keys whose reconcile may have found it unsynced. When it
        syncs late they are reconciled again (`enqueue_all`) at once: the sync is the
        only news of a read that recovered when its list brought no object (no event),
        and a key that reported the read as failed without an error is otherwise never
        looked at again, one that raised only at its next backoff retry.
        `priority`: the queue priority of every key this watch adds; by default `LOW`
        for events from the informer's list and `NORMAL` for events from its watch.
        A watch whose every event maps to every object (a mass requeue) passes `LOW`,
        so that a real change to one object is not served after all of them.

        Nothing is queued before `start` (a follower keeps no queue); a watch added
        while the controller runs replays its informer's cache at once.
        """

        def handle(etype: EventType, old: Obj | None, new: Obj | None) -> None:
            if predicate is not None and not predicate(etype, old, new):
                return
            keys: set[Request] = set()
            for obj in (old, new):
                if obj is not None:
                    keys.update(mapper(obj))
            level = priority
            if level is None:
                level = LOW if informer.from_list else NORMAL
            for key in keys:
                self.queue.add(key, level)

        def skipped(bad: Undecodable) -> None:
            # No object to map, only its identity: the keys that map from it learn that
            # it cannot be read (their reconciler asks the informer `undecodable`).
            if not self._queueing:
                return
            meta = {"namespace": bad.namespace, "name": bad.name, "uid": bad.uid}
            for key in mapper({"metadata": meta}):
                self.queue.add(key, NORMAL)

        informer.add_skip_handler(skipped)
        self._skip_handlers.append((informer, skipped))
        if wait_for_sync and informer not in self._informers:
            self._informers.append(informer)
        elif not wait_for_sync and informer not in self._optional:
            self._optional.append(informer)
        self._handlers.append((informer, handle))
        if on_sync is not None and not informer.has_synced:

            def synced() -> None:
                self.enqueue_all(on_sync())

            informer.add_sync_handler(synced)
            self._sync_handlers.append((informer, synced))
        if self._queueing:
            informer.add_handler(handle)
        return self

    def unwatch(self, informer: Informer) -> None:
        """Drop every watch on `informer` (its API went away): its events no longer
        enqueue anything, and a later start does not wait for it."""
        for watched, handler in [h for h in self._handlers if h[0] is informer]:
            watched.remove_handler(handler)
        self._handlers = [h for h in self._handlers if h[0] is not informer]
        for watched, synced in [h for h in self._sync_handlers if h[0] is informer]:
            watched.remove_sync_handler(synced)
        self._sync_handlers = [h for h in self._sync_handlers if h[0] is not informer]
        for watched, skip in [h for h in self._skip_handlers if h[0] is informer]:
            watched.remove_skip_handler(skip)
        self._skip_handlers = [h for h in self._skip_handlers if h[0] is not informer]
        self._informers = [i for i in self._informers if i is not informer]
        self._optional = [i for i in self._optional if i is not informer]

    def enqueue_all(self, keys: Iterable[Request]) -> None:
        """Reconcile each of `keys` (what they depend on changed without an event): a mass
        requeue, so at low priority, behind any change a user makes meanwhile. Before
        `start` it does nothing: the start reconciles every key anyway."""
        if isinstance(self.reconciler, RemembersInputs):
            self.reconciler.inputs_changed()
        if not self._queueing:
            return
        for key in keys:
            self.queue.add(key, LOW)

    def for_(self, informer: Informer, predicate: Predicate | None = None) -> Controller:
        """The primary resource: an event on X enqueues X."""

        def own_key(obj: Obj) -> Iterable[Request]:
            meta = _meta(obj)
            return [(str(meta.get("namespace") or ""), str(meta.get("name") or ""))]

        return self.watches(informer, own_key, predicate)

    @property
    def healthy(self) -> bool:
        """False once a worker died and was not replaced (see the class docstring)."""
        return self._lost_workers == 0

    @property
    def settled(self) -> bool:
        """No key queued or being reconciled (delayed retries may still be pending)."""
        return len(self.queue) == 0 and self.queue.processing == 0

    # ------------------------------------------------------------ running
    async def wait_for_caches(self) -> None:
        """Wait until every watched informer has synced, or fail like controller-runtime."""
        results = await asyncio.gather(
            *(i.wait_synced(self.cache_sync_timeout) for i in self._informers)
        )
        missing = [i.description for i, ok in zip(self._informers, results, strict=True) if not ok]
        if missing:
            raise TimeoutError(
                f"controller {self.name}: caches not synced within "
                f"{self.cache_sync_timeout:.0f}s: {', '.join(missing)}"
            )
        # Optional caches get a short grace, so a normal start never reconciles before
        # they filled (their absence would read as a failure); one that does not sync
        # in time is failing (e.g. Forbidden) and the reconciler reports it.
        grace = min(self.optional_sync_grace, self.cache_sync_timeout)
        late = await asyncio.gather(*(i.wait_synced(grace) for i in self._optional))
        for informer, ok in zip(self._optional, late, strict=True):
            if not ok:
                log.warning(
                    "controller %s: optional cache %s not synced after %.0fs; continuing",
                    self.name,
                    informer.description,
                    grace,
                )

    async def start(self) -> None:
        """Queue events from now on, wait for caches, then start the workers (returns
        once they run).

        Each watch is attached to its informer here, so the informer replays its cache
        to it (`LOW`, `from_list`) and what its list has not delivered yet follows:
        every key is queued once, as at a cold start, and a change made from now on
        is queued at `NORMAL`, ahead of them."""
        if not self._queueing:
            self._queueing = True
            if isinstance(self.reconciler, RemembersInputs):
                self.reconciler.inputs_changed()  # a new term decides everything afresh
            for informer, handler in self._handlers:
                informer.add_handler(handler)
        await self.wait_for_caches()
        self._stopping = False
        for slot in range(self.workers):
            self._spawn(slot)
        log.info("controller started", extra={"controller": self.name, "workers": self.workers})

    async def stop(self, drain_timeout: float = 30.0) -> None:
        """Hand out no more keys, let the reconciles in flight finish (at most
        `drain_timeout` seconds; 0 cancels them at once), then stop the workers.
        Keys still queued are dropped: the next leader reconciles everything."""
        self._stopping = True
        self._queueing = False
        for informer, handler in self._handlers:
            informer.remove_handler(handler)
        drained = await self.queue.shut_down_with_drain(drain_timeout)
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        if not drained:
            log.warning(
                "controller %s: reconciles still running after %.0fs", self.name, drain_timeout
            )

    # ------------------------------------------------------------ workers
    def _spawn(self, slot: int) -> None:
        kept = slot < self.kept_for_changes
        task = asyncio.create_task(
            self._worker(NORMAL if kept else None, kept), name=f"{self.name}-worker-{slot}"
        )
        self._tasks[slot] = task
        task.add_done_callback(functools.partial(self._worker_ended, slot))

    def _worker_ended(self, slot: int, task: asyncio.Task[None]) -> None:
        """Replace a worker that died while the controller runs (see the class docstring)."""
        if self._stopping or self._tasks.get(slot) is not task:
            return
        error = None if task.cancelled() else task.exception()
        if error is None and not task.cancelled() and self.queue.shutting_down:
            return  # ShutDown: the queue was stopped under us, the normal end
        now = self._clock.monotonic()
        self._deaths.append(now)
        while self._deaths and now - self._deaths[0] > self.worker_restart_window:
            self._deaths.popleft()
        how = "was cancelled" if task.cancelled() else f"died: {error!r}"
        if len(self._deaths) > self.max_worker_restarts:
            del self._tasks[slot]
            self._lost_workers += 1
            log.error(
                "controller %s: worker %d %s; %d deaths in %.0fs, not replacing it "
                "(/healthz now fails)",
                self.name,
                slot,
                how,
                len(self._deaths),
                self.worker_restart_window,
                exc_info=error,
            )
            return
        log.error("controller %s: worker %d %s; replacing it", self.name, slot, how, exc_info=error)
        self._m_restarts.inc()
        self._spawn(slot)

    async def _worker(self, at_least: int | None = None, idle_flow: bool = False) -> None:
        while True:
            try:
                key, priority = await self.queue.get_with_priority(at_least, idle_flow=idle_flow)
            except ShutDown:
                return
            try:
                await self._reconcile_handler(key, priority, change=idle_flow)
            except asyncio.CancelledError as e:
                if _cancel_requested():
                    raise  # the controller is stopping this worker
                self._failed(key, priority, e, "a CancelledError not sent to this worker")
            except Exception as e:
                # Never lose a worker (or its key) to a bug outside the reconcile itself.
                self._failed(key, priority, e, "the worker failed")
            except BaseException:
                # The worker dies (and is replaced); its key must not die with it.
                self.queue.add_rate_limited(key, priority)
                raise
            finally:
                self.queue.done(key)
            # Let the rest of the loop run between keys. A no-op reconcile reads caches
            # only and never suspends, and `get` does not suspend while keys wait, so
            # without this a worker drains a mass requeue of thousands of keys in one
            # go: no watch is read meanwhile, and a user's change is not even queued
            # (so not served first) until the backlog is through.
            await asyncio.sleep(0)

    def _count_error(self) -> None:
        self._m_errors.inc()
        self._m_total["error"].inc()

    def _failed(self, key: Request, priority: int, error: BaseException, what: str) -> None:
        """Count, log (with the traceback) and retry a reconcile that failed unexpectedly."""
        self._count_error()
        log.error(
            "Reconciler error: %s/%s: %s: %r",
            key[0],
            key[1],
            what,
            error,
            exc_info=error,
            extra={"controller": self.name, "namespace": key[0], "object": key[1]},
        )
        self.queue.add_rate_limited(key, priority)

    async def _reconcile_handler(
        self, key: Request, priority: int = NORMAL, *, change: bool = False
    ) -> None:
        name, total = self.name, self._m_total
        started = time.monotonic()
        self._m_active.inc()
        first = self.changes_first
        in_pass = first.pass_of(change) if first is not None else contextlib.nullcontext()
        try:
            # Its writes are capped at LOW, and go first for a lone change (background.py).
            with background(priority < NORMAL):
                async with in_pass:
                    result = await self.reconciler.reconcile(key)
        except asyncio.CancelledError as e:
            if _cancel_requested():
                raise
            # Not sent to us (the reconcile awaited something another task cancelled):
            # a failed reconcile like any other, or it would end the worker silently.
            self._failed(key, priority, e, "a CancelledError not sent to this worker")
            return
        except Exception as e:
            self._count_error()
            # Expected failures are one line; anything else (a bug) gets its traceback.
            log.error(
                "Reconciler error: %s/%s: %s",
                key[0],
                key[1],
                e,
                exc_info=not isinstance(e, errors.Reported),
                extra={"controller": name, "namespace": key[0], "object": key[1]},
            )
            self.queue.add_rate_limited(key, priority)
            return
        finally:
            self._m_active.dec()
            self._m_time.observe(time.monotonic() - started)
        if result is not None and result.requeue:
            total["requeue"].inc()
            self.queue.add_rate_limited(key, priority)
            return
        self.queue.forget(key)
        # `is not None`, not truth: 0.0 asks for another look now (see `Result`).
        if result is not None and result.requeue_after is not None:
            total["requeue_after"].inc()
            self.queue.add_after(key, result.requeue_after, priority)
        else:
            total["success"].inc()


def _cancel_requested() -> bool:
    """Whether the running task itself is being cancelled (by `stop`, say), as opposed
    to having caught a CancelledError raised by something it awaited."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
