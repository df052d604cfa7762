"""Kubernetes Events (`events.k8s.io/v1`) for reconcilers, folded into series like
client-go's `tools/events`; its guarantees are listed in docs/runtime.md ("Events").

Why a recorder rather than `client.create` in the reconciler: an Event is a side note, so
a reconcile must never wait on it or fail because of it. `emit` only updates an in-memory
cache and a bounded queue; background writers talk to the API server.

Why series: a controller that meets the same problem on every retry would otherwise write
one Event per attempt. `regarding` is keyed on its identity and generation, not its
resourceVersion: a controller writes the status of the object its Events regard, and that
write moves the resourceVersion of every later pass's reference (client-go keys on the
whole reference, so each pass after a status write would start a new Event).

Deliberate differences from client-go: the cache is an LRU of `max_keys` series (client-go's
is unbounded); a series ends exactly `series_window` s after its last occurrence (checked
at each emit; client-go sweeps every 6 min, so its windows last 6 to 12 min); the heartbeat
writes only series that changed since they were last written; repeats that arrive before
the first create is sent are folded into that create.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import uuid
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

from prometheus_client import CollectorRegistry, Counter

from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.background import background
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.clock import Clock, SystemClock
from dynamo_pool_operator.runtime.objects.resources import EVENTS
from dynamo_pool_operator.runtime.registry import per_registry

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]
NORMAL: Final = "Normal"
WARNING: Final = "Warning"
#: `note` limit in bytes (`NoteLengthLimit`); action, reason, reportingInstance limit.
NOTE_LIMIT: Final = 1024
FIELD_LIMIT: Final = 128

_REF_FIELDS = ("apiVersion", "kind", "namespace", "name", "uid", "resourceVersion", "fieldPath")
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN: Final = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_QUALIFIED_NAME: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def micro_time(t: datetime) -> str:
    """`metav1.MicroTime` as the API serialises it: UTC, exactly six fractional digits, 'Z'.
    A naive datetime is taken to be UTC."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def truncate_note(note: str, limit: int = NOTE_LIMIT) -> str:
    """Cut `note` to `limit` UTF-8 bytes (the server counts bytes), never mid-character,
    ending in '...' so a reader sees it was cut rather than the server refusing it."""
    raw = note.encode()
    if len(raw) <= limit:
        return note
    return raw[: limit - 3].decode(errors="ignore") + "..."


def _is_qualified_name(value: str) -> bool:
    prefix, _, name = value.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return len(name) <= 63 and bool(_QUALIFIED_NAME.fullmatch(name))


@dataclass(frozen=True, slots=True)
class _Metrics:
    emitted: Counter
    dropped: Counter


@per_registry
def _metrics_for(registry: CollectorRegistry) -> _Metrics:
    """One set of counters per registry: several recorders may share one."""
    return _Metrics(
        Counter(
            "events_emitted",
            "Events emitted by controllers, repeats folded into a series included.",
            ["type", "reason"],
            registry=registry,
        ),
        Counter(
            "events_dropped",
            "Event writes given up: queue_full, invalid, shutdown, error, or the API "
            "error class (Forbidden, Invalid, ...).",
            ["reason"],
            registry=registry,
        ),
    )


@dataclass(eq=False, slots=True)
class _Series:
    """One cached Event: what was (or will be) created, and how far the server knows it."""

    key: tuple[Any, ...]
    name: str
    namespace: str
    body: dict[str, Any]  # the Event without metadata and series
    last_observed: datetime
    last_seen: float  # monotonic time of the last occurrence
    count: int = 1
    written: int = 0  # the count the server holds; 0 = not created (yet)
    queued: bool = False  # a write for it waits in the queue
    writing: bool = False  # a writer is sending it now: no second writer may touch it
    again: bool = False  # it was dequeued while being written: queue it once more after
    abandoned: bool = False  # its create was refused: nothing left to update


class EventRecorder:
    """Records `events.k8s.io/v1` Events without ever blocking or failing its caller.

    `emit` must be called from the event loop's thread (reconcilers are coroutines on it).
    Emits made before `start()` wait in the queue; `stop()` writes what is pending.
    """

    def __init__(
        self,
        client: Client,
        *,
        reporting_controller: str,
        reporting_instance: str,
        clock: Clock | None = None,
        registry: CollectorRegistry | None = None,
        max_keys: int = 4096,
        max_queue: int = 1000,
        heartbeat: float = 30 * 60.0,
        series_window: float = 6 * 60.0,
        max_tries: int = 12,
        retry_delay: float = 10.0,
        stop_timeout: float = 10.0,
        writers: int = 4,
    ) -> None:
        # Refused here, at start-up, rather than by the server on every single Event.
        if not _is_qualified_name(reporting_controller):
            raise ValueError(
                f"reporting_controller {reporting_controller!r} is not a qualified name "
                "(like 'example.com/my-controller')"
            )
        if not 0 < len(reporting_instance) <= FIELD_LIMIT:
            raise ValueError(f"reporting_instance must be 1..{FIELD_LIMIT} characters")
        if registry is None:
            from dynamo_pool_operator.runtime.registry import REGISTRY

            registry = REGISTRY
        self._client = client
        self.reporting_controller = reporting_controller
        self.reporting_instance = reporting_instance
        self._clock: Clock = clock or SystemClock()
        self._metrics = _metrics_for(registry)
        self._max_keys = max(max_keys, 1)
        self._max_queue = max(max_queue, 1)
        self._heartbeat = heartbeat
        self._window = series_window
        self._max_tries = max(max_tries, 1)
        self._retry_delay = retry_delay
        self._stop_timeout = stop_timeout
        # Several writers, so Events keep up with several reconcile workers (one writer
        # fell behind 16 workers and, at 5,000 pools, filled the queue). One series is
        # never written by two at once: a create and its series patch stay in order.
        self._writer_count = max(writers, 1)
        self._busy = 0
        self._cache: OrderedDict[tuple[Any, ...], _Series] = OrderedDict()
        self._ops: deque[_Series] = deque()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._writers: list[asyncio.Task[None]] = []
        self._tickers: list[asyncio.Task[None]] = []
        self._stopping = False
        # Set by stop() and abandon(): later emits are dropped, so nothing is written
        # once the leader has let go of (or lost) its Lease.
        self._closed = False
        self._last_ns = 0
        self._warned: set[str] = set()

    # ------------------------------------------------------------ emitting
    def emit(
        self,
        regarding: Mapping[str, Any],
        related: Mapping[str, Any] | None,
        type: EventType,
        reason: str,
        action: str,
        note: str,
    ) -> None:
        """Record one occurrence. Returns at once; never raises (a failure is counted).
        `regarding` may carry the object's `generation`: it separates series (see the
        module's docstring) and is not written."""
        if self._closed:
            self._drop("shutdown")
            return
        try:
            if type not in (NORMAL, WARNING) or not (reason and action and regarding.get("name")):
                what = f"type={type!r} reason={reason!r} action={action!r}"
                self._drop("invalid", f"invalid event {what} about {regarding.get('name')!r}")
                return
            reason, action = reason[:FIELD_LIMIT], action[:FIELD_LIMIT]
            reg = _reference(regarding)
            rel = _reference(related) if related else None
            refs = (_regarding_key(regarding), _identity(rel) if rel is not None else None)
            key = (type, action, reason, self.reporting_controller, self.reporting_instance, *refs)
            now, mono = self._clock.now(), self._clock.monotonic()
            self._metrics.emitted.labels(type, reason).inc()

            series = self._cache.get(key)
            if series is not None and mono - series.last_seen > self._window:
                self._retire(series)
                series = None
            if series is not None:
                series.count += 1
                series.last_observed, series.last_seen = now, mono
                self._cache.move_to_end(key)
                if series.count == 2:
                    # The first repeat is written now; later ones wait for a heartbeat. A full
                    # queue loses nothing here: the heartbeat carries the count.
                    self._enqueue(series, bounded=True)
                return

            body: dict[str, Any] = {
                "apiVersion": EVENTS.api_version,
                "kind": EVENTS.kind,
                "eventTime": micro_time(now),
                "reportingController": self.reporting_controller,
                "reportingInstance": self.reporting_instance,
                "action": action,
                "reason": reason,
                "regarding": reg,
                "note": truncate_note(note),
                "type": type,
            }
            if rel is not None:
                body["related"] = rel
            series = _Series(
                key=key,
                name=self._new_name(reg["name"]),
                namespace=reg.get("namespace") or "default",
                body=body,
                last_observed=now,
                last_seen=mono,
            )
            if not self._enqueue(series, bounded=True):
                self._drop("queue_full", f"{type} {reason} about {reg['name']} (queue full)")
                return
            self._cache[key] = series
            while len(self._cache) > self._max_keys:
                self._retire(next(iter(self._cache.values())))
        except Exception:
            log.exception("event recorder: emit failed")
            self._drop("error")

    def _new_name(self, regarding_name: str) -> str:
        """`<name>.<hex unix-nanos>` as client-go names Events, made strictly increasing so
        two Events in one clock tick (or under a fake clock) never collide."""
        now = self._clock.now()
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
        ns = (now - _EPOCH) // timedelta(microseconds=1) * 1000
        self._last_ns = max(ns, self._last_ns + 1)
        name = f"{regarding_name}.{self._last_ns:x}"
        if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
            name = str(uuid.uuid4())
        return name

    # ------------------------------------------------------------ cache and queue
    def _enqueue(self, series: _Series, *, bounded: bool) -> bool:
        """Queue a write of `series`' current state. Internal writes (heartbeat, series end)
        are not bounded by `max_queue`: at most one per cached series can wait."""
        if series.queued:
            return True
        if bounded and len(self._ops) >= self._max_queue:
            return False
        series.queued = True
        self._ops.append(series)
        self._idle.clear()
        self._wake.set()
        return True

    def _retire(self, series: _Series) -> None:
        """Forget a series (ended or evicted), writing its last count if the server lacks it."""
        if self._cache.get(series.key) is series:
            del self._cache[series.key]
        if series.written and series.count > series.written:
            self._enqueue(series, bounded=False)

    def _finish_expired(self) -> None:
        mono = self._clock.monotonic()
        # The LRU order is last-occurrence order, so expired series are all at the front.
        for series in list(self._cache.values()):
            if mono - series.last_seen <= self._window:
                break
            self._retire(series)

    def _enqueue_dirty(self) -> None:
        for series in self._cache.values():
            if series.written and series.count > series.written:
                self._enqueue(series, bounded=False)

    def _drop(self, reason: str | errors.ApiError, detail: str = "") -> None:
        label = reason if isinstance(reason, str) else type(reason).__name__
        self._metrics.dropped.labels(label).inc()
        if detail:
            # The first refusal of each kind is loud (say RBAC is missing); repeats are not.
            # A namespace being deleted takes its Events with it: nothing to report.
            quiet = label in self._warned or isinstance(reason, errors.NamespaceTerminating)
            level = logging.DEBUG if quiet else logging.WARNING
            self._warned.add(label)
            log.log(level, "event recorder: dropped %s: %s", detail, reason)

    # ------------------------------------------------------------ writing
    async def _write(self, series: _Series) -> None:
        sent = series.count
        if not series.written:
            if not series.abandoned:
                await self._create(series, sent)
            return
        if sent <= series.written:
            return
        patch = {"series": {"count": sent, "lastObservedTime": micro_time(series.last_observed)}}
        try:
            await self._call(
                lambda: self._client.merge_patch(EVENTS, series.name, patch, series.namespace)
            )
        except errors.NotFound:
            # The server's event TTL removed it: the series continues in a new Event.
            series.name = self._new_name(series.body["regarding"]["name"])
            await self._create(series, sent)
            return
        except errors.ApiError as e:
            # Left dirty: the next heartbeat (or the series' end) tries again.
            self._drop(e, f"series update of {series.namespace}/{series.name}")
            return
        series.written = max(series.written, sent)

    async def _create(self, series: _Series, sent: int) -> None:
        body = {**series.body, "metadata": {"name": series.name, "namespace": series.namespace}}
        if sent >= 2:
            body["series"] = {"count": sent, "lastObservedTime": micro_time(series.last_observed)}
        try:
            await self._call(lambda: self._client.create(EVENTS, body, series.namespace))
        except errors.ApiError as e:
            series.abandoned = True
            if self._cache.get(series.key) is series:
                del self._cache[series.key]  # the next occurrence tries a fresh create
            self._drop(e, f"event {series.namespace}/{series.name} ({body['reason']})")
            return
        series.written = max(series.written, sent)

    async def _call(self, request: Callable[[], Awaitable[object]]) -> None:
        """Send, retrying only what may succeed unchanged later; no retries when stopping."""
        attempt = 1
        while True:
            try:
                await request()
                return
            except errors.ApiError as e:
                if not e.retryable or self._stopping or attempt >= self._max_tries:
                    raise
            attempt += 1
            await self._clock.sleep(self._retry_delay * random.uniform(0.75, 1.25))

    async def _run_writer(self) -> None:
        while True:
            while not self._ops:
                if self._busy == 0:
                    self._idle.set()
                self._wake.clear()
                await self._wake.wait()
            series = self._ops.popleft()
            series.queued = False
            if series.writing:
                series.again = True  # its writer queues it again when done
                continue
            series.writing = True
            self._busy += 1
            try:
                await self._write(series)
            except Exception:
                log.exception("event recorder: write failed")
                self._drop("error")
            finally:
                series.writing = False
                self._busy -= 1
                if series.again:
                    series.again = False
                    self._enqueue(series, bounded=False)
                elif not self._ops and self._busy == 0:
                    self._idle.set()

    async def _every(self, seconds: float, job: Callable[[], None]) -> None:
        while True:
            await self._clock.sleep(seconds)
            try:
                job()
            except Exception:
                log.exception("event recorder: periodic job failed")

    # ------------------------------------------------------------ lifecycle
    def _start_writers(self) -> None:
        # An Event is never urgent: its writes are background ones (background.py), so
        # during a mass event they share the backlog's slots and leave the API server's
        # queue to a user's change (a cold start writes 3 Events a pool).
        with background(True):
            self._writers = [
                asyncio.create_task(self._run_writer(), name=f"event-writer-{i}")
                for i in range(self._writer_count)
            ]

    async def start(self) -> None:
        """Start the writers, the series sweep and the heartbeat (idempotent)."""
        if self._writers:
            return
        self._stopping = False
        self._closed = False
        self._start_writers()
        self._tickers = [
            asyncio.create_task(self._every(self._window, self._finish_expired)),
            asyncio.create_task(self._every(self._heartbeat, self._enqueue_dirty)),
        ]

    async def wait_idle(self) -> None:
        """Wait until every queued write has been attempted (needs `start()`)."""
        await self._idle.wait()

    async def stop(self) -> None:
        """Write pending Events and every series' latest count, once each (no retries),
        for at most `stop_timeout` seconds; then stop the background tasks. Emits from
        then on are dropped ("shutdown"). Call it while still leading: the operator
        stops its recorder before it releases the Lease."""
        if self._closed:
            return
        self._closed = True
        self._stopping = True
        for task in self._tickers:
            task.cancel()
        await asyncio.gather(*self._tickers, return_exceptions=True)
        self._tickers = []
        self._enqueue_dirty()
        if not self._writers and self._ops:
            self._start_writers()
        if not self._writers:
            return
        try:
            await asyncio.wait_for(self._idle.wait(), self._stop_timeout)
        except TimeoutError:
            while self._ops:
                self._ops.popleft().queued = False
                self._drop("shutdown")
        for task in self._writers:
            task.cancel()
        await asyncio.gather(*self._writers, return_exceptions=True)
        self._writers = []

    async def abandon(self) -> None:
        """Stop at once and write nothing more: for a leader that lost its Lease, whose
        writes a successor may already be making. Writes in flight are cancelled (one
        already on the wire may still land); queued Events and unwritten series
        counts are dropped and counted ("not_leader"), and so are later emits
        ("shutdown"). `stop()` afterwards does nothing."""
        self._closed = True
        self._stopping = True
        tasks = self._tickers + self._writers
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tickers, self._writers = [], []
        while self._ops:
            self._ops.popleft().queued = False
            self._drop("not_leader")
        for series in self._cache.values():
            if series.written and series.count > series.written:
                self._drop("not_leader")
        self._cache.clear()
        self._busy = 0
        self._idle.set()


def _reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The ObjectReference fields of `obj`, empty ones left out, values as strings."""
    return {f: str(obj[f]) for f in _REF_FIELDS if obj.get(f)}


def _identity(ref: Mapping[str, Any]) -> tuple[str, ...]:
    """The hashable form of a related reference in the isomorphic key (every field)."""
    return tuple(str(ref.get(f, "")) for f in _REF_FIELDS)


def _regarding_key(regarding: Mapping[str, Any]) -> tuple[str, ...]:
    """The regarding object in the key: its identity and generation (see above)."""
    ident = tuple(str(regarding.get(f) or "") for f in _REF_FIELDS if f != "resourceVersion")
    return (*ident, str(regarding.get("generation") or ""))
