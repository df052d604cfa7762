"""List+watch reflector feeding a `Store` (shared by `cache.shared.SharedInformers`), as
client-go's reflector and kube-rs's `watcher`; the states are in watcher.py, and its
guarantees are listed in docs/runtime.md ("Informer and store").

* **list**, replacing the store in one step, with a synthesized DELETED for each object
  gone since, so a 410 never loses a delete (what lightkube and kr8s miss). A streamed
  watch-list where the server has it (from the watch cache, one object at a time, so no
  page of untrimmed objects is held), paginated lists otherwise. Never
  `resourceVersion=0`: it ignores `limit` (the memory peak) and may be older than what we
  saw (a lagging server after failover).
* **watch** from the list's resourceVersion, with bookmarks; an ended or dropped watch
  resumes from the last version seen, without relisting (a relist reads etcd, and many
  informers relisting after a network blip hurt the API server).
* **410 Gone**: events may be lost, so only a relist is safe.
* **any other error**: exponential backoff with jitter, reset by a healthy watch.

Handlers run synchronously after the store is updated, so they see the state the event
describes or newer; they must not block (they enqueue a key). `from_list` says an event
comes from a list or a replay, which a controller queues at low priority, as
controller-runtime does with `isInInitialList`.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter, Gauge

from dynamo_pool_operator.runtime.cache import watcher
from dynamo_pool_operator.runtime.cache.store import Obj, Store, object_key
from dynamo_pool_operator.runtime.cache.transform import DEFAULT_TRANSFORM, Transform
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client, jittered
from dynamo_pool_operator.runtime.client.undecodable import Undecodable, named, skim
from dynamo_pool_operator.runtime.clock import Clock, SystemClock
from dynamo_pool_operator.runtime.objects.meta import object_version
from dynamo_pool_operator.runtime.objects.resources import Resource
from dynamo_pool_operator.runtime.ratelimit import Backoff
from dynamo_pool_operator.runtime.registry import REGISTRY, per_registry

log = logging.getLogger(__name__)

#: Page size of the list; the client follows `continue` tokens.
PAGE_SIZE = 500
#: Server-side watch timeout, plus up to 20 % jitter so informers do not reconnect in
#: step. Shorter than client-go's 5-10 min: a dead middlebox can keep a watch open and
#: silent for good. The server bookmarks about once a minute and 2 s before it ends a
#: watch, so a healthy watch is never silent for the client's WATCH_IDLE_TIMEOUT (60 s).
WATCH_TIMEOUT_SECONDS = 45.0
WATCH_TIMEOUT_JITTER = 0.2
#: The annotation of the BOOKMARK that ends a watch-list's initial events.
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
#: A watch that delivered an event or stayed open this long is healthy (resets the
#: backoff); one that ends at once with nothing (a proxy, a shutdown) backs off.
HEALTHY_WATCH_SECONDS = 5.0


class EventType(enum.StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


#: `handler(type, old, new)`: ADDED (None, obj), MODIFIED (old, new), DELETED (last known, None).
EventHandler = Callable[[EventType, Obj | None, Obj | None], None]
#: `keep(obj)` False: the object is treated as absent (never cached, never dispatched).
#: It may read only fields that never change (name, namespace).
Keep = Callable[[Obj], bool]


@per_registry
def _metrics(
    registry: CollectorRegistry,
) -> tuple[Counter, Counter, Counter, Gauge, Counter, Gauge]:
    """Per informer (`resource` label: group/resource, namespace or selector if any)."""
    return (
        Counter(
            "informer_watch_restarts_total",
            "Watches that ended (server timeout, dropped connection, error) and were opened again.",
            ["resource"],
            registry=registry,
        ),
        Counter(
            "informer_relists_total",
            "Lists after the first one (410 Gone, an undecodable event), by how: "
            "watch-list (streamed from the watch cache) or list (paginated).",
            ["resource", "mode"],
            registry=registry,
        ),
        Counter(
            "informer_gone_total",
            "410 Gone answers (HTTP or in-stream): the resourceVersion watched from was "
            "compacted, so the informer relists.",
            ["resource"],
            registry=registry,
        ),
        Gauge(
            "informer_undecodable_objects",
            "Objects the informer keeps out of its cache because they cannot be decoded "
            "(nested too deep, say): their last decodable version, if any, stays cached.",
            ["resource"],
            registry=registry,
        ),
        Counter(
            "informer_undecodable_total",
            "Listed items and watch events that could not be decoded and were skipped.",
            ["resource"],
            registry=registry,
        ),
        Gauge(
            "informer_failing",
            "1 while the informer's list or watch fails and it backs off, else 0.",
            ["resource"],
            registry=registry,
        ),
    )


class Informer:
    """Keeps `store` in step with one resource (optionally one namespace and selector),
    from `run()` until `stop()`. Act on the store only once `has_synced`, or "not cached
    yet" reads as "does not exist"."""

    def __init__(
        self,
        client: Client,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform = DEFAULT_TRANSFORM,
        keep: Keep | None = None,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        page_size: int = PAGE_SIZE,
        watch_timeout: float = WATCH_TIMEOUT_SECONDS,
        watch_list: bool = True,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        # A namespace means nothing for a cluster-scoped resource; "" means all namespaces.
        self.namespace = namespace if namespace and resource.namespaced else None
        self.label_selector = label_selector or None
        self.field_selector = field_selector or None
        #: Every listed and watched object passes it before it is stored (`transform.py`).
        self.transform = transform
        self.keep = keep
        self.store = Store()
        self._clock: Clock = clock or SystemClock()
        self._backoff = backoff or Backoff()
        self._page_size = page_size
        self._watch_timeout = watch_timeout
        self._handlers: list[EventHandler] = []
        #: True while the events being dispatched come from a list or a replay.
        self.from_list = False
        #: Where the list+watch stands (watcher.py decides every step from it).
        self._w = watcher.Watcher(streams=watch_list)
        self._lists = 0
        self._synced = asyncio.Event()
        self._halted = asyncio.Event()  # set by stop() and when run() ends
        self._stop_requested = False
        self._task: asyncio.Task[None] | None = None
        #: Called with each error a list or watch backs off from (its owner notices a
        #: resource gone, NotFound, at once).
        self.on_failure: Callable[[BaseException | None], None] | None = None
        #: Called once the first list has been applied (see `add_sync_handler`).
        self._sync_handlers: list[Callable[[], None]] = []
        #: Called with each object newly kept out as undecodable (`add_skip_handler`).
        self._skip_handlers: list[Callable[[Undecodable], None]] = []

        where = (
            f"namespace {self.namespace}"
            if self.namespace
            else ("all namespaces" if resource.namespaced else "cluster scope")
        )
        sel = "".join(
            f" {k}={v!r}"
            for k, v in (("labels", self.label_selector), ("fields", self.field_selector))
            if v
        )
        #: Names resource, namespace and selectors; starts every log line.
        self.description = f"{resource.group_resource} in {where}{sel}"
        self.store.description = self.description
        restarts, relists, gone, held, skipped, failing = _metrics(
            registry if registry is not None else REGISTRY
        )
        label = resource.group_resource + (f" {self.namespace}" if self.namespace else "") + sel
        self._m_restarts = restarts.labels(label)
        self._m_relists = relists
        self._m_gone = gone.labels(label)
        self._m_label = label
        self._m_held = held.labels(label)
        self._m_skipped = skipped.labels(label)
        self._m_failing = failing.labels(label)
        self._m_held.set(0)
        self._m_failing.set(0)
        #: Objects kept out of the cache because they cannot be decoded, by key.
        self._undecodable: dict[tuple[str, str], Undecodable] = {}

    # ------------------------------------------------------------ state
    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    @property
    def last_resource_version(self) -> str | None:
        """The resourceVersion the next watch resumes from (None before the first list)."""
        return self._w.rv

    @property
    def watch_list(self) -> bool:
        """Lists are streamed (watch-list) until the server refuses one."""
        return self._w.streams

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until synced; False on timeout or if stopped first. The timeout runs on
        the informer's clock, so tests drive it."""
        if self._synced.is_set():
            return True
        waits: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(self._synced.wait()),
            asyncio.ensure_future(self._halted.wait()),
        ]
        if timeout is not None:
            waits.append(asyncio.ensure_future(self._clock.sleep(timeout)))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        return self._synced.is_set()

    # ------------------------------------------------------------ handlers
    def add_handler(self, handler: EventHandler, *, replay: bool = True) -> None:
        """Register `handler`. With `replay`, it first gets ADDED for every object already
        cached, so a controller that joins a running shared informer misses nothing."""
        self._handlers.append(handler)
        if replay:
            self.from_list = True
            try:
                for obj in self.store.list():
                    self._call(handler, EventType.ADDED, None, obj)
            finally:
                self.from_list = False

    def remove_handler(self, handler: EventHandler) -> None:
        if handler in self._handlers:
            self._handlers.remove(handler)

    def add_sync_handler(self, handler: Callable[[], None]) -> None:
        """Call `handler` when the informer syncs, if it has not yet: a list with no
        object dispatches no event, yet a reader that found it unsynced can now read."""
        self._sync_handlers.append(handler)

    def remove_sync_handler(self, handler: Callable[[], None]) -> None:
        if handler in self._sync_handlers:
            self._sync_handlers.remove(handler)

    def add_skip_handler(self, handler: Callable[[Undecodable], None]) -> None:
        """Call `handler` with each object kept out as undecodable, once per version, and
        once more when it goes with nothing cached under its key: no event carries that."""
        self._skip_handlers.append(handler)

    def remove_skip_handler(self, handler: Callable[[Undecodable], None]) -> None:
        if handler in self._skip_handlers:
            self._skip_handlers.remove(handler)

    def undecodable(self, namespace: str, name: str) -> Undecodable | None:
        """The object of that key kept out of the cache as undecodable, if it is."""
        return self._undecodable.get((namespace, name))

    # ------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        """List and watch until `stop()`. The loop runs in an inner task so that `stop()`
        can interrupt what it awaits without cancelling the caller's task."""
        if self._task is not None:
            raise RuntimeError(f"informer {self.description} is already running")
        if self._stop_requested:
            return
        self._halted.clear()
        self._task = asyncio.create_task(self._loop(), name=f"informer {self.description}")
        try:
            await self._task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if self._stop_requested and (me is None or me.cancelling() == 0):
                return  # the inner task was cancelled by stop(), not our caller
            raise
        finally:
            self._task = None
            self._halted.set()
            log.info("informer %s: stopped", self.description)

    def stop(self) -> None:
        """Stop for good: `run()` returns promptly. The store keeps its last content."""
        self._stop_requested = True
        self._halted.set()
        if self._task is not None and not self._task.done():
            self._task.cancel()

    # ------------------------------------------------------------ the loop
    async def _loop(self) -> None:
        while not self._stop_requested:
            self._w, request = watcher.start(self._w)
            if isinstance(request, watcher.ListPages):
                try:
                    await self._list()
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    await self._back_off("list failed", e)
                    continue
                self._w, request = watcher.start(self._w)
            assert not isinstance(request, watcher.ListPages)  # listed: a watch follows
            error, healthy = await self._watch(request)
            if healthy:
                self._m_failing.set(0)
            self._w, after = watcher.after_watch(self._w, request, error, healthy)
            if after.at_once:
                continue  # no streamed list (this time): list by pages at once, no backoff
            self._m_restarts.inc()
            if after.gone:
                self._m_gone.inc()
            if after.reset_backoff:
                self._backoff.reset()
            if after.back_off:
                await self._back_off(after.what, error)
            elif error is not None:
                log.info("informer %s: %s: %s", self.description, after.what, error)
            else:
                log.debug("informer %s: %s", self.description, after.what)

    async def _back_off(self, what: str, error: BaseException | None) -> None:
        delay = self._backoff.next_delay()
        if isinstance(error, errors.TooManyRequests) and error.retry_after:
            delay = max(delay, error.retry_after)
        reason = f"{type(error).__name__}: {error}" if error is not None else "no events"
        self._m_failing.set(1)
        log.warning(
            "informer %s: %s (%s); retrying in %.1fs", self.description, what, reason, delay
        )
        if self.on_failure is not None:
            self.on_failure(error)
        await self._clock.sleep(delay)

    def _count_list(self, mode: str) -> None:
        self._lists += 1
        if self._lists > 1:
            self._m_relists.labels(self._m_label, mode).inc()

    async def _list(self) -> None:
        result = await self.client.list(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            limit=self._page_size,
            each=self._admit,
        )
        self._count_list("list")
        self._replace(result.items, result.resource_version, "listed", result.undecodable)

    def _replace(
        self, items: list[Obj], rv: str, how: str, undecodable: Sequence[Undecodable] = ()
    ) -> None:
        """Replace the store with a list's items (at `rv`) and dispatch the difference. An
        undecodable item keeps its last cached version: what cannot be read changes nothing."""
        held: dict[tuple[str, str], Undecodable] = {}
        for bad in undecodable:
            self._skip(bad, "listed")
            held[bad.key] = bad
            if (last := self.store.get(*bad.key)) is not None:
                items.append(last)
        listed = {object_key(o) for o in items}
        gone = [b for k, b in self._undecodable.items() if k not in held and k not in listed]
        self._undecodable = held
        for bad in gone:
            self._tell(bad)
        self._m_held.set(len(held))
        self._m_failing.set(0)
        changes = self.store.replace(items)
        self._w = watcher.listed(self._w, rv)
        log.info(
            "informer %s: %s %d objects at resourceVersion %s (%d changes)",
            self.description,
            how,
            len(self.store),
            self._w.rv,
            len(changes),
        )
        self.from_list = True
        try:
            for old, new in changes:
                if old is not None and new is not None and _same_version(old, new):
                    continue  # unchanged across a relist: nothing to tell
                self._dispatch(old, new)
        finally:
            self.from_list = False
        # Only after the initial events, so a handler tells them from later changes.
        if self._synced.is_set():
            return
        self._synced.set()
        for handler in tuple(self._sync_handlers):
            try:
                handler()
            except Exception:
                log.exception("informer %s: sync handler %r failed", self.description, handler)

    async def _watch(
        self, request: watcher.WatchList | watcher.Watch
    ) -> tuple[Exception | None, bool]:
        """One watch request (a watch-list: the list, streamed). Returns (error or None
        for a clean end, healthy)."""
        streaming = isinstance(request, watcher.WatchList)
        # "": the current state (a consistent read, from the watch cache).
        rv = request.rv if isinstance(request, watcher.Watch) else ""
        started = self._clock.monotonic()
        events = 0
        error: Exception | None = None
        lines: AsyncIterator[bytes] | None = None
        try:
            try:
                if streaming:
                    self._count_list("watch-list")
                lines = self.client.watch_lines(
                    self.resource,
                    self.namespace,
                    resource_version=rv,
                    allow_bookmarks=True,
                    timeout_seconds=int(jittered(self._watch_timeout, WATCH_TIMEOUT_JITTER)),
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    **({"send_initial_events": True} if streaming else {}),
                )
                async for line in lines:
                    self._handle_line(line)
                    events += 1
            except Exception as e:  # an HTTP or in-stream error, an undecodable line, a bug
                error = e
            self._w, fallback = watcher.watch_ended(self._w, error)
            if fallback is watcher.Fallback.CUT_SHORT:
                log.info(
                    "informer %s: the streaming list ended before its initial-events-end "
                    "bookmark; listing page by page this time",
                    self.description,
                )
            elif fallback is watcher.Fallback.REFUSED:
                log.info(
                    "informer %s: no streaming list (%s); listing page by page instead",
                    self.description,
                    f"the server refused it: {error}",
                )
        finally:
            self._w = watcher.interrupted(self._w)
            if lines is not None:
                await _aclose(lines, self.description)
        healthy = events > 0 or self._clock.monotonic() - started >= HEALTHY_WATCH_SECONDS
        return error, healthy

    def _skip(self, bad: Undecodable, how: str) -> None:
        """Count and name an object kept out of the cache; once per version."""
        self._m_skipped.inc()
        known = self._undecodable.get(bad.key)
        if known is None or known.resource_version != bad.resource_version:
            self._tell(bad)
            log.warning(
                "informer %s: skipped %s object %s, which cannot be decoded (%s); its "
                "last decodable version stays cached",
                self.description,
                how,
                bad,
                bad.error,
                extra={"namespace": bad.namespace, "object": bad.name},
            )

    def _tell(self, bad: Undecodable) -> None:
        """Tell the skip handlers: a key held as undecodable has a new version, or left."""
        for handler in tuple(self._skip_handlers):
            try:
                handler(bad)
            except Exception:
                log.exception("informer %s: skip handler failed", self.description)

    def _undecodable_line(self, line: bytes, error: orjson.JSONDecodeError) -> None:
        """A well-formed watch event whose object cannot be decoded: the watch goes on. A
        deletion still deletes; an addition or change keeps the last decodable version."""
        bad = named(line, error, wrapped=True)
        try:
            etype = (orjson.loads(skim(line)) or {}).get("type")
        except (orjson.JSONDecodeError, AttributeError):
            etype = None
        if not bad.name or etype not in ("ADDED", "MODIFIED", "DELETED"):
            # A broken stream, not a deep object: an event may be lost, so relist.
            raise error
        initial = self._w.initial
        if initial is not None:
            # `_replace` keeps its last decodable version when the list ends.
            initial.objects.pop(bad.key, None)
            initial.bad[:] = [b for b in initial.bad if b.key != bad.key]
            if etype != "DELETED":
                initial.bad.append(bad)
            return
        self._w = watcher.seen(self._w, bad.resource_version)
        if etype == "DELETED":
            held = self._undecodable.pop(bad.key, None)
            gone = self.store.get(*bad.key)
            if gone is not None:
                self.store.delete(*bad.key)
                self._emit(EventType.DELETED, gone, None)
            elif held is not None:
                self._tell(bad)
        else:
            self._skip(bad, "watched")
            self._undecodable[bad.key] = bad
        self._m_held.set(len(self._undecodable))

    def _handle_line(self, line: bytes) -> None:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            self._undecodable_line(line, e)
            return
        etype = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise ValueError(f"watch event {etype!r} without an object")
        if etype == "ERROR":
            raise errors.classify(int(obj.get("code") or 500), obj)
        meta = obj.get("metadata") or {}
        rv = meta.get("resourceVersion")
        initial = self._w.initial
        if etype == "BOOKMARK":
            if initial is not None:
                if (meta.get("annotations") or {}).get(INITIAL_EVENTS_END) == "true":
                    objects = list(initial.objects.values())
                    self._replace(objects, str(rv or ""), "streamed", tuple(initial.bad))
                return  # a bookmark within the initial events: not a version to resume at
            self._w = watcher.seen(self._w, str(rv) if rv else None)
            return
        if etype not in ("ADDED", "MODIFIED", "DELETED"):
            log.warning("informer %s: ignoring watch event of type %r", self.description, etype)
            return
        if self._undecodable and self._undecodable.pop(object_key(obj), None) is not None:
            self._m_held.set(len(self._undecodable))
        if initial is not None:
            # The list, streamed: kept (trimmed) until the end bookmark replaces the store.
            if initial.bad:
                key = object_key(obj)
                initial.bad[:] = [b for b in initial.bad if b.key != key]
            admitted = self._admit(obj)
            key = object_key(obj)
            if admitted is None or etype == "DELETED":
                initial.objects.pop(key, None)
            else:
                initial.objects[key] = admitted
            return
        self._w = watcher.seen(self._w, str(rv) if rv else None)
        if self.keep is not None and not self.keep(obj):
            return
        obj = self._prepare(obj)
        if etype == "DELETED":
            self.store.delete(*object_key(obj))
            # The event carries the object's final state, newer than the cached one.
            self._emit(EventType.DELETED, obj, None)
        else:
            old = self.store.put(obj)
            self._dispatch(old, obj)

    def _admit(self, obj: Obj) -> Obj | None:
        """A listed object as the cache keeps it, or None when `keep` rejects it."""
        if self.keep is not None and not self.keep(obj):
            return None
        return self._prepare(obj)

    def as_cached(self, obj: Obj) -> Obj:
        """`obj`, read from the server, as this cache would keep it (the same transform)."""
        return self._prepare(obj)

    def _prepare(self, obj: Obj) -> Obj:
        # List items come without apiVersion/kind; watch events have them. Make both alike.
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        try:
            return self.transform(obj)
        except Exception:
            log.exception(
                "informer %s: transform failed on %s/%s; caching it untransformed",
                self.description,
                *object_key(obj),
            )
            return obj

    def _dispatch(self, old: Obj | None, new: Obj | None) -> None:
        """Turn a store change into events. A different UID under the same name is a
        deletion and a new object (possible across a relist), not an update."""
        if old is None:
            if new is not None:
                self._emit(EventType.ADDED, None, new)
        elif new is None:
            self._emit(EventType.DELETED, old, None)
        elif _uid(old) and _uid(new) and _uid(old) != _uid(new):
            self._emit(EventType.DELETED, old, None)
            self._emit(EventType.ADDED, None, new)
        else:
            self._emit(EventType.MODIFIED, old, new)

    def _emit(self, etype: EventType, old: Obj | None, new: Obj | None) -> None:
        for handler in tuple(self._handlers):
            self._call(handler, etype, old, new)

    def _call(
        self, handler: EventHandler, etype: EventType, old: Obj | None, new: Obj | None
    ) -> None:
        try:
            handler(etype, old, new)
        except Exception:
            ns, name = object_key(new if new is not None else old or {})
            log.exception(
                "informer %s: handler %r failed on %s %s/%s",
                self.description,
                handler,
                etype.value,
                ns,
                name,
            )


def _same_version(old: Obj, new: Obj) -> bool:
    version = object_version(old)
    return bool(version[1]) and version == object_version(new)


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


async def _aclose(lines: AsyncIterator[bytes], description: str) -> None:
    """Close the watch generator now (and with it the HTTP response), not at GC time."""
    aclose = getattr(lines, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception as e:
        log.debug("informer %s: closing the watch failed: %s", description, e)
