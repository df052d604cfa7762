"""Unit tests for the store and the list+watch informer: the cache rules controllers rely on.

The informer is driven by a scripted stub client (in the spirit of kube-rs's
watcher tests): each `list` call takes the next scripted answer, each
`watch_lines` call plays the next scripted session of lines and errors. Time is
`FakeClock`; the only real waiting is yielding to the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import gc
import logging
import ssl
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import orjson
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.auth.config import ClusterConfig
from dynamo_pool_operator.runtime.cache.informer import (
    HEALTHY_WATCH_SECONDS,
    EventType,
    Informer,
)
from dynamo_pool_operator.runtime.cache.shared import SharedInformers
from dynamo_pool_operator.runtime.cache.store import (
    CONTROLLER_UID_INDEX,
    Obj,
    Store,
    index_by_controller_uid,
)
from dynamo_pool_operator.runtime.cache.transform import for_cache
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client, ListResult
from dynamo_pool_operator.runtime.client.undecodable import Undecodable
from dynamo_pool_operator.runtime.objects.resources import (
    CONFIGMAPS,
    DEPLOYMENTS,
    NAMESPACES,
    Resource,
)
from dynamo_pool_operator.runtime.ratelimit import Backoff
from tests.clock import FakeClock
from tests.indexes import (
    NAMESPACE_INDEX,
    OWNER_UID_INDEX,
    index_by_namespace,
    index_by_owner_uid,
    label_index,
)
from tests.unit.runtime.client.fake import FakeClient, arguments

RES = CONFIGMAPS


class Gate:
    """A watch step that blocks until the test opens it (a silent connection)."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def open(self) -> None:
        self.event.set()


#: A watch step that blocks until the watch is cancelled (never opened).
HANG = Gate()
Step = bytes | BaseException | Gate


# --------------------------------------------------------------------------- helpers
def obj(
    name: str,
    rv: str = "1",
    *,
    ns: str = "default",
    uid: str | None = None,
    labels: dict[str, str] | None = None,
    owners: list[tuple[str, bool]] | None = None,
    data: str = "",
) -> Obj:
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv, "uid": uid or f"uid-{name}"}
    if ns:
        meta["namespace"] = ns
    if labels:
        meta["labels"] = labels
    if owners:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "X", "name": u, "uid": u, "controller": c}
            for u, c in owners
        ]
    return {"metadata": meta, "data": {"v": data}}


def ev(etype: str, o: Obj) -> bytes:
    return orjson.dumps({"type": etype, "object": o})


def bookmark(rv: str) -> bytes:
    return ev("BOOKMARK", {"kind": "ConfigMap", "metadata": {"resourceVersion": rv}})


def error_event(code: int, reason: str) -> bytes:
    return ev("ERROR", {"kind": "Status", "status": "Failure", "code": code, "reason": reason})


class StubClient(FakeClient):
    """Plays scripted list answers and watch sessions; records every call.

    When the list script runs out, `list` blocks; when the watch script runs out,
    `watch_lines` blocks: the informer then idles as it would on a quiet cluster.
    """

    def __init__(
        self,
        lists: Iterable[ListResult | BaseException] = (),
        watches: Iterable[Iterable[Step]] = (),
    ) -> None:
        super().__init__()
        self.lists = list(lists)
        self.watches = [list(w) for w in watches]
        self.list_calls: list[dict[str, Any]] = []
        self.watch_calls: list[dict[str, Any]] = []
        #: Whether watch-lists are scripted too (else refused, as with WatchList off).
        self.streams = False
        self.closed_watches = 0

    async def list(self, res: Resource, namespace: str | None = None, **kw: Any) -> ListResult:
        call = arguments(Client.list, res, namespace, **kw)
        recorded = ("res", "namespace", "label_selector", "field_selector", "limit")
        self.list_calls.append({name: call[name] for name in recorded})
        each = call["each"]
        await asyncio.sleep(0)
        if not self.lists:
            await asyncio.Event().wait()
        step = self.lists.pop(0)
        if isinstance(step, BaseException):
            raise step
        # Fresh dicts per call, as a real list decodes fresh JSON; `each` per item, as
        # the client applies it page by page.
        items = copy.deepcopy(step.items)
        if each is not None:
            items = [kept for kept in map(each, items) if kept is not None]
        return ListResult(items, step.resource_version, list(step.undecodable))

    async def watch_lines(
        self, res: Resource, namespace: str | None = None, **kw: Any
    ) -> AsyncIterator[bytes]:
        call = arguments(Client.watch_lines, res, namespace, **kw)
        if call["send_initial_events"] and not self.streams:
            # A server without watch-list (these scripts are lists): refused, unrecorded.
            raise errors.Invalid("sendInitialEvents is forbidden")
        del call["res"]
        self.watch_calls.append(call)
        script = self.watches.pop(0) if self.watches else [HANG]
        try:
            for step in script:
                await asyncio.sleep(0)
                if step is HANG:
                    await asyncio.Event().wait()  # a fresh event: HANG outlives test loops
                elif isinstance(step, Gate):
                    await step.event.wait()
                elif isinstance(step, BaseException):
                    raise step
                else:
                    yield step
        finally:
            self.closed_watches += 1


class Recorder:
    """An event handler that records (type, old name@rv, new name@rv)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str | None, str | None]] = []

    def __call__(self, etype: EventType, old: Obj | None, new: Obj | None) -> None:
        self.events.append((etype.value, _tag(old), _tag(new)))


def _tag(o: Obj | None) -> str | None:
    if o is None:
        return None
    return f"{o['metadata']['name']}@{o['metadata'].get('resourceVersion')}"


class RecordingClock(FakeClock):
    """FakeClock that also records every sleep asked for (the backoff delays)."""

    def __init__(self) -> None:
        super().__init__()
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        await super().sleep(seconds)


async def until(cond: Callable[[], bool], what: str, rounds: int = 500) -> None:
    """Yield to the loop until `cond()` holds; fail (never hang) if it does not."""
    for _ in range(rounds):
        if cond():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


async def settle(rounds: int = 50) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(informer.run())
    try:
        yield task
    finally:
        informer.stop()
        await asyncio.wait_for(task, timeout=1.0)


def no_jitter() -> Backoff:
    return Backoff(rng=lambda: 0.0)


def make(
    client: StubClient, clock: FakeClock | None = None, **kw: Any
) -> tuple[Informer, Recorder]:
    informer = Informer(client, RES, "default", clock=clock or FakeClock(), **kw)
    rec = Recorder()
    informer.add_handler(rec)
    return informer, rec


async def cached_after_listing(listed: Obj, **kw: Any) -> Obj:
    """`listed` (named "a") as an informer made with `kw` caches it from its first list."""
    informer, _ = make(StubClient(lists=[ListResult([listed], "1")]), **kw)
    async with running(informer):
        assert await informer.wait_synced(timeout=5)
    cached = informer.store.get("default", "a")
    assert cached is not None
    return cached


async def run_until(
    client: StubClient, cond: Callable[[], bool], what: str, clock: FakeClock | None = None
) -> tuple[Informer, asyncio.Task[None]]:
    """An informer on `client`, run as a task the test itself ends, once `cond` holds."""
    informer, _ = make(client, clock)
    task = asyncio.create_task(informer.run())
    await until(cond, what)
    return informer, task


async def resumed_without_relisting(
    client: StubClient, clock: FakeClock | None = None, *, at: str
) -> Recorder:
    """Run an informer until it opens its second watch; that watch starts `at` the
    resourceVersion given, and nothing was listed again before it."""
    informer, rec = make(client, clock)
    async with running(informer):
        await until(lambda: len(client.watch_calls) == 2, "second watch")
    assert client.watch_calls[1]["resource_version"] == at
    assert len(client.list_calls) == 1
    return rec


# --------------------------------------------------------------------------- store
def test_store_keys_objects_by_namespace_and_name_with_empty_namespace_for_cluster_scoped() -> None:
    store = Store()
    store.put(obj("a", ns="ns1"))
    store.put(obj("a", ns="ns2"))
    store.put(obj("node-ish", ns=""))
    assert store.get("ns1", "a") is not None
    assert store.get("ns2", "a") is not store.get("ns1", "a")
    assert store.get("", "node-ish") is store.get(None, "node-ish") is not None
    assert {o["metadata"]["name"] for o in store.list_namespace("ns1")} == {"a"}
    assert [o["metadata"]["name"] for o in store.list_namespace(None)] == ["node-ish"]
    assert len(store) == 3
    assert ("ns2", "a") in store
    assert store.delete("ns2", "a") is not None
    assert store.delete("ns2", "a") is None
    assert len(store) == 2
    assert store.list_namespace("ns2") == []


def test_index_registered_after_objects_exist_covers_them() -> None:
    store = Store()
    store.put(obj("a", labels={"app": "x"}))
    store.add_index("app", label_index("app"))
    assert [o["metadata"]["name"] for o in store.by_index("app", "x")] == ["a"]


def test_update_moves_object_between_label_buckets_and_delete_leaves_no_empty_bucket() -> None:
    store = Store()
    store.add_index("app", label_index("app"))
    store.put(obj("a", labels={"app": "x"}))
    store.put(obj("a", "2", labels={"app": "y"}))
    assert store.by_index("app", "x") == []
    assert [o["metadata"]["resourceVersion"] for o in store.by_index("app", "y")] == ["2"]
    store.put(obj("a", "3"))  # label removed
    assert store.index_values("app") == []
    store.put(obj("a", "4", labels={"app": "y"}))
    store.delete("default", "a")
    assert store.index_values("app") == []


def test_controller_uid_index_counts_only_the_controller_reference() -> None:
    store = Store()
    store.add_index(OWNER_UID_INDEX, index_by_owner_uid)
    store.add_index(CONTROLLER_UID_INDEX, index_by_controller_uid)
    store.put(obj("a", owners=[("ctl", True), ("other", False)]))
    assert [o["metadata"]["name"] for o in store.by_index(OWNER_UID_INDEX, "other")] == ["a"]
    assert [o["metadata"]["name"] for o in store.by_index(OWNER_UID_INDEX, "ctl")] == ["a"]
    assert store.by_index(CONTROLLER_UID_INDEX, "other") == []
    assert [o["metadata"]["name"] for o in store.by_index(CONTROLLER_UID_INDEX, "ctl")] == ["a"]


def test_namespace_index_helper_files_cluster_scoped_objects_under_empty_string() -> None:
    store = Store()
    store.add_index(NAMESPACE_INDEX, index_by_namespace)
    store.put(obj("a", ns="ns1"))
    store.put(obj("b", ns=""))
    assert [o["metadata"]["name"] for o in store.by_index(NAMESPACE_INDEX, "ns1")] == ["a"]
    assert [o["metadata"]["name"] for o in store.by_index(NAMESPACE_INDEX, "")] == ["b"]


def test_replace_rebuilds_indexes_and_reports_vanished_objects_first() -> None:
    store = Store()
    store.add_index("app", label_index("app"))
    store.put(obj("gone", labels={"app": "x"}))
    store.put(obj("kept", labels={"app": "x"}))
    changes = store.replace(
        [obj("kept", "2", labels={"app": "y"}), obj("new", labels={"app": "x"})]
    )
    assert [(_tag(o), _tag(n)) for o, n in changes] == [
        ("gone@1", None),
        ("kept@1", "kept@2"),
        (None, "new@1"),
    ]
    assert [o["metadata"]["name"] for o in store.by_index("app", "x")] == ["new"]
    assert [o["metadata"]["name"] for o in store.by_index("app", "y")] == ["kept"]
    assert store.get("default", "gone") is None
    assert len(store) == 2


def test_failing_index_function_leaves_object_stored_but_unindexed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(o: Obj) -> list[str]:
        if o["metadata"]["name"] == "bad":
            raise KeyError("boom")
        return ["v"]

    store = Store("configmaps in namespace default")
    store.add_index("broken", broken)
    with caplog.at_level(logging.ERROR):
        store.put(obj("bad"))
    store.put(obj("good"))
    assert store.get("default", "bad") is not None
    assert [o["metadata"]["name"] for o in store.by_index("broken", "v")] == ["good"]
    assert "configmaps in namespace default" in caplog.text


def test_index_function_returning_a_bare_string_files_one_value() -> None:
    store = Store()

    def name_only(o: Obj) -> Any:
        return o["metadata"]["name"]

    store.add_index("name", name_only)
    store.put(obj("abc"))
    assert store.index_values("name") == ["abc"]


def test_index_names_are_unique_and_unknown_index_is_an_error() -> None:
    store = Store()
    store.add_index("app", label_index("app"))
    with pytest.raises(ValueError, match="already exists"):
        store.add_index("app", label_index("other"))
    with pytest.raises(KeyError):
        store.by_index("nope", "x")


# --------------------------------------------------------------------------- backoff
def test_backoff_doubles_from_initial_caps_at_maximum_and_resets() -> None:
    b = no_jitter()
    delays = [b.next_delay() for _ in range(8)]
    assert delays == pytest.approx([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0])
    b.reset()
    assert b.next_delay() == pytest.approx(0.8)


def test_backoff_jitter_only_shortens_delays_so_maximum_holds() -> None:
    b = Backoff(rng=lambda: 1.0)
    delays = [b.next_delay() for _ in range(10)]
    assert delays[0] == pytest.approx(0.8 * 0.8)
    assert max(delays) <= 30.0


# --------------------------------------------------------------------------- list
async def test_initial_list_fills_store_and_sync_follows_the_initial_events() -> None:
    client = StubClient(lists=[ListResult([obj("a"), obj("b")], "10")])
    informer, rec = make(client)
    synced_during_events: list[bool] = []
    informer.add_handler(lambda t, o, n: synced_during_events.append(informer.has_synced))
    assert not informer.has_synced
    assert informer.last_resource_version is None
    async with running(informer):
        assert await informer.wait_synced(timeout=5)
        assert informer.has_synced
        assert {o["metadata"]["name"] for o in informer.store.list()} == {"a", "b"}
        assert informer.last_resource_version == "10"
        assert rec.events == [("ADDED", None, "a@1"), ("ADDED", None, "b@1")]
        # Handlers can tell the initial objects apart: has_synced turns true after them.
        assert synced_during_events == [False, False]


async def test_no_cached_object_keeps_kubectls_last_applied_copy_of_itself() -> None:
    """A DGD applied with `kubectl apply` carries its whole spec again in an annotation
    (pod templates: kilobytes per pool); the cache keeps the object without it."""
    applied = obj("a")
    applied["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": '{"spec": "large"}',
        "team": "infra",
    }
    cached = await cached_after_listing(applied)
    assert cached["metadata"]["annotations"] == {"team": "infra"}


async def test_list_asks_for_pages_of_500_in_the_namespace_with_both_selectors() -> None:
    client = StubClient(lists=[ListResult([], "1")])
    informer = Informer(
        client, RES, "team", label_selector="app=x", field_selector="a=b", clock=FakeClock()
    )
    async with running(informer):
        await informer.wait_synced(timeout=5)
        await until(lambda: len(client.watch_calls) == 1, "first watch")
    assert client.list_calls == [
        {
            "res": RES,
            "namespace": "team",
            "label_selector": "app=x",
            "field_selector": "a=b",
            "limit": 500,
        }
    ]
    w = client.watch_calls[0]
    assert (w["namespace"], w["label_selector"], w["field_selector"]) == ("team", "app=x", "a=b")


async def test_cached_objects_lose_managed_fields_gain_kind_and_pass_the_transform() -> None:
    listed = obj("a")
    listed["metadata"]["managedFields"] = [{"manager": "x"}]

    def drop_data(o: Obj) -> Obj:
        o.pop("data", None)
        return o

    cached = await cached_after_listing(copy.deepcopy(listed), transform=for_cache(drop_data))
    assert "managedFields" not in cached["metadata"]
    assert "data" not in cached
    assert (cached["apiVersion"], cached["kind"]) == ("v1", "ConfigMap")
    by_default = await cached_after_listing(copy.deepcopy(listed))
    assert "managedFields" not in by_default["metadata"]
    assert "data" in by_default
    # The one hook: a transform given alone is all that runs.
    alone = await cached_after_listing(copy.deepcopy(listed), transform=drop_data)
    assert alone["metadata"]["managedFields"] == [{"manager": "x"}]


async def test_a_transform_may_keep_the_managed_fields_for_its_trim() -> None:
    listed = obj("a")
    listed["metadata"]["managedFields"] = [{"manager": "x"}]
    cached = await cached_after_listing(listed, transform=for_cache(managed_fields=True))
    assert cached["metadata"]["managedFields"] == [{"manager": "x"}]


async def test_failing_transform_caches_the_object_untransformed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(o: Obj) -> Obj:
        raise RuntimeError("boom")

    await cached_after_listing(obj("a"), transform=broken)
    assert "transform failed" in caplog.text


async def test_list_error_backs_off_then_relists() -> None:
    clock = RecordingClock()
    client = StubClient(
        lists=[errors.Forbidden("no rbac", status=403), ListResult([obj("a")], "5")]
    )
    informer, _ = make(client, clock, backoff=no_jitter())
    async with running(informer):
        await until(lambda: clock.sleepers == 1, "backoff after the failed list")
        assert len(client.list_calls) == 1
        assert not informer.has_synced
        await clock.advance(0.8)
        await until(lambda: informer.has_synced, "synced after the retry")
        assert clock.slept == [pytest.approx(0.8)]
        assert len(client.list_calls) == 2


async def test_sync_handlers_run_once_when_a_list_first_completes_even_an_empty_one() -> None:
    """A list with no object dispatches no event: the sync is the only news that a
    failing read now works. Told once, after the initial events; a relist is not news."""
    clock = RecordingClock()
    client = StubClient(
        lists=[errors.Forbidden("no rbac", status=403), ListResult([], "5"), ListResult([], "9")],
        watches=[[error_event(410, "Expired")]],
    )
    informer, rec = make(client, clock, backoff=no_jitter())
    told: list[bool] = []

    def failing() -> None:
        raise RuntimeError("a broken handler")

    informer.add_sync_handler(failing)  # logged; the others are still told
    informer.add_sync_handler(lambda: told.append(informer.has_synced))
    async with running(informer):
        await until(lambda: clock.sleepers == 1, "backoff after the failed list")
        assert told == []
        await clock.advance(0.8)
        await until(lambda: informer.has_synced, "synced after the retry")
        assert told == [True]
        assert rec.events == []
        await until(lambda: clock.sleepers == 1, "backoff after the 410")
        await clock.advance(0.8)
        await until(lambda: informer.last_resource_version == "9", "relisted after the 410")
    assert told == [True]


async def test_a_removed_sync_handler_is_not_told() -> None:
    client = StubClient(lists=[ListResult([], "5")])
    informer, _ = make(client)
    told: list[int] = []

    def handler() -> None:
        told.append(1)

    informer.add_sync_handler(handler)
    informer.remove_sync_handler(handler)
    async with running(informer):
        assert await informer.wait_synced(timeout=5)
    assert told == []


async def test_wait_synced_gives_up_after_timeout_on_the_informers_clock() -> None:
    clock = FakeClock()
    client = StubClient()  # list never answers
    informer, _ = make(client, clock)
    async with running(informer):
        waiter = asyncio.create_task(informer.wait_synced(timeout=10))
        await settle()
        assert not waiter.done()
        await clock.advance(10)
        assert await asyncio.wait_for(waiter, 1) is False


async def test_wait_synced_returns_false_once_stopped() -> None:
    informer, _ = make(StubClient())
    async with running(informer):
        waiter = asyncio.create_task(informer.wait_synced())
        await settle()
        informer.stop()
        assert await asyncio.wait_for(waiter, 1) is False


# --------------------------------------------------------------------------- watch
async def test_first_watch_starts_at_the_list_rv_with_bookmarks_and_a_jittered_45s_timeout() -> (
    None
):
    """45-54 s, so the server ends every healthy watch before the client's 60 s of
    silence would give it up as dead (see WATCH_TIMEOUT_SECONDS)."""
    client = StubClient(lists=[ListResult([], "42")])
    informer, _ = make(client)
    async with running(informer):
        await until(lambda: len(client.watch_calls) == 1, "first watch")
    call = client.watch_calls[0]
    assert call["resource_version"] == "42"
    assert call["allow_bookmarks"] is True
    assert 45 <= call["timeout_seconds"] <= 54


async def test_watch_events_update_the_store_before_handlers_run() -> None:
    client = StubClient(
        lists=[ListResult([obj("a")], "10")],
        watches=[
            [
                ev("ADDED", obj("b", "11")),
                ev("MODIFIED", obj("a", "12", data="new")),
                ev("DELETED", obj("b", "13")),
                HANG,
            ]
        ],
    )
    informer, rec = make(client)
    seen: list[tuple[str, str | None]] = []

    def look(etype: EventType, old: Obj | None, new: Obj | None) -> None:
        name = (new or old or {})["metadata"]["name"]
        cached = informer.store.get("default", name)
        seen.append((etype.value, _tag(cached)))

    informer.add_handler(look)
    async with running(informer):
        await until(lambda: len(rec.events) == 4, "four events")
    assert rec.events == [
        ("ADDED", None, "a@1"),
        ("ADDED", None, "b@11"),
        ("MODIFIED", "a@1", "a@12"),
        ("DELETED", "b@13", None),  # old is the final state the DELETED event carried
    ]
    # Each handler call found the store already holding the state the event describes.
    assert seen == [("ADDED", "a@1"), ("ADDED", "b@11"), ("MODIFIED", "a@12"), ("DELETED", None)]
    cached = informer.store.get("default", "a")
    assert cached is not None
    assert cached["data"] == {"v": "new"}
    assert informer.last_resource_version == "13"


async def test_bookmark_advances_the_resource_version_without_events() -> None:
    client = StubClient(lists=[ListResult([obj("a")], "10")], watches=[[bookmark("99"), HANG]])
    informer, rec = make(client)
    async with running(informer):
        await until(lambda: informer.last_resource_version == "99", "bookmark applied")
        await settle()
    assert rec.events == [("ADDED", None, "a@1")]
    assert len(informer.store) == 1


async def test_dropped_connection_resumes_watch_from_last_rv_without_relisting() -> None:
    clock = RecordingClock()
    client = StubClient(
        lists=[ListResult([], "10")],
        watches=[[ev("ADDED", obj("a", "11")), bookmark("12"), errors.ConnectionFailed("reset")]],
    )
    rec = await resumed_without_relisting(client, clock, at="12")
    assert clock.slept == []  # the watch had made progress: reconnect at once
    assert rec.events == [("ADDED", None, "a@11")]


async def test_clean_watch_end_rewatches_from_last_rv_without_relisting() -> None:
    client = StubClient(lists=[ListResult([], "10")], watches=[[bookmark("20")]])
    await resumed_without_relisting(client, at="20")


async def test_in_stream_410_relists_with_synthesized_delete_and_modified() -> None:
    client = StubClient(
        lists=[
            ListResult([obj("a"), obj("b"), obj("c")], "10"),
            ListResult([obj("a", "30", data="changed"), obj("c"), obj("d", "31")], "40"),
        ],
        watches=[[ev("MODIFIED", obj("c", "11")), error_event(410, "Expired")]],
    )
    informer, rec = make(client)
    async with running(informer):
        await until(lambda: informer.last_resource_version == "40", "relisted")
        await until(lambda: len(client.watch_calls) == 2, "watch after the relist")
    assert rec.events[3:] == [
        ("MODIFIED", "c@1", "c@11"),
        ("DELETED", "b@1", None),
        ("MODIFIED", "a@1", "a@30"),
        ("MODIFIED", "c@11", "c@1"),
        ("ADDED", None, "d@31"),
    ]
    assert sorted(informer.store.keys()) == [("default", "a"), ("default", "c"), ("default", "d")]
    assert client.watch_calls[1]["resource_version"] == "40"
    assert informer.has_synced


async def test_410_on_watch_open_relists_after_a_backoff() -> None:
    clock = RecordingClock()
    client = StubClient(
        lists=[ListResult([obj("a")], "10"), ListResult([], "50")],
        watches=[[errors.Gone("too old", status=410)]],
    )
    informer, rec = make(client, clock, backoff=no_jitter())
    async with running(informer):
        await until(lambda: clock.sleepers == 1, "backoff before relisting")
        assert len(client.list_calls) == 1  # no list storm against a server answering 410
        await clock.advance(0.8)
        await until(lambda: informer.last_resource_version == "50", "relisted")
    assert rec.events == [("ADDED", None, "a@1"), ("DELETED", "a@1", None)]
    assert informer.store.list() == []


async def test_relisted_object_with_a_new_uid_is_a_delete_then_an_add() -> None:
    client = StubClient(
        lists=[
            ListResult([obj("a", uid="u1")], "10"),
            ListResult([obj("a", "20", uid="u2")], "20"),
        ],
        watches=[[bookmark("11"), error_event(410, "Gone")]],
    )
    informer, rec = make(client)
    async with running(informer):
        await until(lambda: informer.last_resource_version == "20", "relisted")
    assert rec.events == [("ADDED", None, "a@1"), ("DELETED", "a@1", None), ("ADDED", None, "a@20")]


async def test_in_stream_non_410_error_resumes_the_watch_without_relisting() -> None:
    client = StubClient(
        lists=[ListResult([], "10")],
        watches=[[bookmark("15"), error_event(500, "InternalError")]],
    )
    await resumed_without_relisting(client, at="15")


async def test_undecodable_watch_line_relists_and_closes_the_watch() -> None:
    client = StubClient(
        lists=[ListResult([], "10"), ListResult([], "20")],
        watches=[[bookmark("11"), b"{not json"]],
    )
    informer, _ = make(client)
    async with running(informer):
        await until(lambda: len(client.list_calls) == 2, "relist")
        assert client.closed_watches == 1


async def test_short_empty_watches_back_off_instead_of_spinning() -> None:
    clock = RecordingClock()
    client = StubClient(lists=[ListResult([], "10")], watches=[[], []])
    informer, _ = make(client, clock, backoff=no_jitter())
    async with running(informer):
        await until(lambda: clock.sleepers == 1, "first backoff")
        assert len(client.watch_calls) == 1
        await clock.advance(0.8)
        await until(lambda: clock.sleepers == 1 and len(client.watch_calls) == 2, "second")
        assert clock.slept == pytest.approx([0.8, 1.6])


async def test_quiet_watch_open_long_enough_counts_as_healthy() -> None:
    clock = RecordingClock()
    quiet, short = Gate(), Gate()
    client = StubClient(lists=[ListResult([], "10")], watches=[[quiet], [short]])
    informer, _ = make(client, clock, backoff=no_jitter())
    async with running(informer):
        await until(lambda: len(client.watch_calls) == 1, "first watch")
        # No event, but open for a while, then the server's timeout ends it cleanly.
        await clock.advance(HEALTHY_WATCH_SECONDS)
        quiet.open()
        await until(lambda: len(client.watch_calls) == 2, "reconnected at once")
        assert clock.slept == []
        # The second watch ends at once with nothing: that one backs off.
        short.open()
        await until(lambda: clock.sleepers == 1, "backoff")
    assert clock.slept == [pytest.approx(0.8)]


async def test_backoff_resets_after_a_healthy_watch() -> None:
    clock = RecordingClock()
    drop = errors.ConnectionFailed
    client = StubClient(
        lists=[ListResult([], "10")],
        watches=[[drop("a")], [drop("b")], [bookmark("11"), drop("c")], [drop("d")]],
    )
    informer, _ = make(client, clock, backoff=no_jitter())
    async with running(informer):
        await until(lambda: clock.sleepers == 1, "backoff 1")
        await clock.advance(0.8)
        await until(lambda: clock.sleepers == 1 and len(client.watch_calls) == 2, "backoff 2")
        await clock.advance(1.6)
        # third watch is healthy, reconnects at once; the fourth fails at once again
        await until(lambda: clock.sleepers == 1 and len(client.watch_calls) == 4, "backoff 3")
    assert clock.slept == pytest.approx([0.8, 1.6, 0.8])
    assert [c["resource_version"] for c in client.watch_calls] == ["10", "10", "10", "11"]


async def test_too_many_requests_waits_at_least_retry_after() -> None:
    clock = RecordingClock()
    client = StubClient(lists=[errors.TooManyRequests("slow down", status=429, retry_after=7.0)])
    informer, _ = make(client, clock, backoff=no_jitter())
    async with running(informer):
        await until(lambda: clock.sleepers == 1, "backoff")
    assert clock.slept == [7.0]


async def test_handler_exception_is_logged_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = StubClient(
        lists=[ListResult([], "10")],
        watches=[[ev("ADDED", obj("a", "11")), ev("ADDED", obj("b", "12")), HANG]],
    )
    informer = Informer(client, RES, "default", clock=FakeClock())

    def explode(etype: EventType, old: Obj | None, new: Obj | None) -> None:
        raise RuntimeError("handler bug")

    rec = Recorder()
    informer.add_handler(explode)
    informer.add_handler(rec)
    with caplog.at_level(logging.ERROR):
        async with running(informer):
            await until(lambda: len(rec.events) == 2, "both events reach the second handler")
            assert informer.running
    assert informer.store.get("default", "b") is not None
    failures = [r for r in caplog.records if r.exc_info and "handler bug" in str(r.exc_info[1])]
    assert len(failures) == 2
    assert all("configmaps in namespace default" in r.getMessage() for r in failures)


async def test_late_handler_first_gets_added_for_every_cached_object() -> None:
    client = StubClient(lists=[ListResult([obj("a"), obj("b")], "10")])
    informer = Informer(client, RES, "default", clock=FakeClock())
    async with running(informer):
        await informer.wait_synced(timeout=5)
        rec = Recorder()
        informer.add_handler(rec)
        quiet = Recorder()
        informer.add_handler(quiet, replay=False)
    assert sorted(rec.events) == [("ADDED", None, "a@1"), ("ADDED", None, "b@1")]
    assert quiet.events == []


async def test_indexes_stay_consistent_through_create_update_delete_and_relist() -> None:
    started, checked = Gate(), Gate()
    client = StubClient(
        lists=[
            ListResult([obj("a", labels={"app": "x"}, owners=[("o1", True)])], "10"),
            ListResult(
                [
                    obj("a", "30", labels={"app": "z"}, owners=[("o3", True)]),
                    obj("c", "30", labels={"app": "x"}, owners=[("o2", True)]),
                ],
                "30",
            ),
        ],
        watches=[
            [
                started,
                ev("ADDED", obj("b", "11", labels={"app": "x"}, owners=[("o1", True)])),
                ev("MODIFIED", obj("a", "12", labels={"app": "y"}, owners=[("o2", True)])),
                ev("DELETED", obj("b", "13", labels={"app": "x"}, owners=[("o1", True)])),
                bookmark("14"),
                checked,
                error_event(410, "Expired"),
            ],
        ],
    )
    informer, _ = make(client)
    store = informer.store
    store.add_index(CONTROLLER_UID_INDEX, index_by_controller_uid)
    store.add_index("app", label_index("app"))

    def names(index: str, value: str) -> list[str]:
        return sorted(o["metadata"]["name"] for o in store.by_index(index, value))

    async with running(informer):
        await informer.wait_synced(timeout=5)
        assert names(CONTROLLER_UID_INDEX, "o1") == ["a"]
        assert names("app", "x") == ["a"]
        started.open()
        await until(lambda: informer.last_resource_version == "14", "watch events applied")
        assert store.index_values(CONTROLLER_UID_INDEX) == ["o2"]
        assert names(CONTROLLER_UID_INDEX, "o2") == ["a"]
        assert store.index_values("app") == ["y"]
        checked.open()  # now the in-stream 410 forces a relist
        await until(lambda: informer.last_resource_version == "30", "relisted")
    assert names(CONTROLLER_UID_INDEX, "o2") == ["c"]
    assert names(CONTROLLER_UID_INDEX, "o3") == ["a"]
    assert sorted(store.index_values(CONTROLLER_UID_INDEX)) == ["o2", "o3"]
    assert names("app", "x") == ["c"]
    assert names("app", "z") == ["a"]
    assert sorted(store.index_values("app")) == ["x", "z"]


# --------------------------------------------------------------------------- lifecycle
async def test_stop_ends_run_promptly_while_the_watch_is_silent() -> None:
    client = StubClient(lists=[ListResult([], "10")])
    informer, task = await run_until(client, lambda: len(client.watch_calls) == 1, "watching")
    informer.stop()
    await asyncio.wait_for(task, timeout=1.0)
    assert task.result() is None
    assert client.closed_watches == 1
    assert not informer.running


async def test_stop_ends_run_promptly_during_a_backoff_sleep() -> None:
    clock = FakeClock()
    client = StubClient(lists=[errors.ConnectionFailed("refused")])
    informer, task = await run_until(client, lambda: clock.sleepers == 1, "backing off", clock)
    informer.stop()
    await asyncio.wait_for(task, timeout=1.0)
    assert len(client.list_calls) == 1


async def test_run_after_stop_returns_at_once_and_double_run_is_refused() -> None:
    client = StubClient(lists=[ListResult([], "1")])
    informer, task = await run_until(client, lambda: len(client.list_calls) == 1, "listing")
    with pytest.raises(RuntimeError, match="already running"):
        await informer.run()
    informer.stop()
    await asyncio.wait_for(task, 1)
    await asyncio.wait_for(informer.run(), 1)
    assert len(client.list_calls) == 1


async def test_cancelling_the_caller_of_run_propagates_cancellation() -> None:
    client = StubClient(lists=[ListResult([], "1")])
    informer, task = await run_until(client, lambda: len(client.watch_calls) == 1, "watching")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 1)
    assert not informer.running


async def test_every_log_line_names_resource_and_namespace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    client = StubClient(
        lists=[errors.ServerError("boom", status=500), ListResult([obj("a")], "10")],
        watches=[[ev("ADDED", obj("b", "11")), errors.Gone("old", status=410)]],
    )
    informer = Informer(client, DEPLOYMENTS, "team", clock=clock, backoff=no_jitter())
    with caplog.at_level(logging.DEBUG, logger="dynamo_pool_operator.runtime"):
        async with running(informer):
            await until(lambda: clock.sleepers == 1, "list backoff")
            await clock.advance(1)
            await until(lambda: len(client.list_calls) == 3, "relist after 410")
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("dynamo_pool_operator")]
    assert len(lines) >= 4
    assert all("deployments.apps in namespace team" in m for m in lines), lines


# --------------------------------------------------------------------------- shared informers
def test_shared_informers_return_one_instance_per_resource_namespace_and_selector() -> None:
    shared = SharedInformers(StubClient(), clock=FakeClock())
    a = shared.get(RES, "ns1")
    assert shared.get(RES, "ns1") is a
    assert shared.get(RES, "ns2") is not a
    assert shared.get(RES, "ns1", "app=x") is not a
    assert shared.get(RES, "ns1", "app=x") is shared.get(RES, "ns1", "app=x")
    assert shared.get(RES) is shared.get(RES, "")
    assert shared.get(DEPLOYMENTS, "ns1") is not a
    # a namespace means nothing for a cluster-scoped resource
    assert shared.get(NAMESPACES, "ns1") is shared.get(NAMESPACES)
    assert len(shared.informers()) == 6


def test_shared_informers_refuse_a_second_different_transform() -> None:
    def t1(o: Obj) -> Obj:
        return o

    def t2(o: Obj) -> Obj:
        return o

    shared = SharedInformers(StubClient(), clock=FakeClock())
    inf = shared.get(RES, "ns", transform=t1)
    assert shared.get(RES, "ns", transform=t1) is inf
    assert shared.get(RES, "ns") is inf
    with pytest.raises(ValueError, match="another transform"):
        shared.get(RES, "ns", transform=t2)


def test_shared_informers_tell_equal_cache_transforms_apart_from_others() -> None:
    shared = SharedInformers(StubClient(), clock=FakeClock())
    words = [("status", "phase")]
    inf = shared.get(RES, "ns", transform=for_cache(vocabulary=words, shared=[("spec",)]))
    assert (
        shared.get(RES, "ns", transform=for_cache(vocabulary=iter(words), shared=[("spec",)]))
        is inf
    )
    assert shared.get(RES, "ns") is inf
    with pytest.raises(ValueError, match="another transform"):
        shared.get(RES, "ns", transform=for_cache(vocabulary=[("status", "other")]))
    with pytest.raises(ValueError, match="another transform"):
        shared.get(RES, "ns", transform=for_cache(vocabulary=words, shared=[("status",)]))


async def test_shared_informers_start_sync_late_start_and_stop_all() -> None:
    client = StubClient(lists=[ListResult([obj("a")], "1"), ListResult([obj("d")], "2")])
    shared = SharedInformers(client, clock=FakeClock())
    cms = shared.get(RES, "default")
    shared.start_all()
    assert await shared.wait_for_sync(timeout=5)
    deps = shared.get(DEPLOYMENTS, "default")  # asked for after start: starts at once
    await until(lambda: deps.has_synced, "late informer synced")
    assert cms.store.get("default", "a") is not None
    assert deps.store.get("default", "d") is not None
    await asyncio.wait_for(shared.stop_all(), 1)
    assert not cms.running
    assert not deps.running
    with pytest.raises(RuntimeError):
        shared.start_all()


async def test_shared_wait_for_sync_is_false_when_one_informer_cannot_list() -> None:
    clock = FakeClock()
    client = StubClient(lists=[ListResult([], "1")])  # the second list never answers
    shared = SharedInformers(client, clock=clock)
    shared.get(RES, "a")
    shared.get(RES, "b")
    shared.start_all()
    waiter = asyncio.create_task(shared.wait_for_sync(timeout=30))
    await settle()
    await clock.advance(30)
    assert await asyncio.wait_for(waiter, 1) is False
    await shared.stop_all()


# --------------------------------------------------------------------------- real client
class _PlainHttp:
    """Credentials for a plain-HTTP test server: no headers, an unused TLS context."""

    async def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context()

    async def headers(self) -> dict[str, str]:
        return {}

    def invalidate(self) -> None:
        pass


async def test_informer_runs_unchanged_on_the_real_client_over_http() -> None:
    """Wiring check against `runtime.client.Client` and a fake API server: query
    parameters, pagination, line splitting and the in-stream 410 all meet the informer."""
    requests: list[dict[str, str]] = []
    lists = [
        {"items": [obj("a")], "metadata": {"continue": "p2"}},
        {"items": [obj("b")], "metadata": {"resourceVersion": "10"}},
        {"items": [obj("b", "20")], "metadata": {"resourceVersion": "20"}},
    ]
    watches = [
        [ev("ADDED", obj("c", "11")), error_event(410, "Expired")],
    ]
    hang = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        q = dict(request.query)
        requests.append(q)
        if q.get("watch") != "true":
            return web.json_response(lists.pop(0), dumps=lambda o: orjson.dumps(o).decode())
        resp = web.StreamResponse()
        await resp.prepare(request)
        if not watches:
            await hang.wait()
            return resp
        for line in watches.pop(0):
            # split each line across two writes to exercise the client's buffering
            await resp.write(line[:7])
            await resp.write(line[7:] + b"\n")
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/configmaps", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with Client(ClusterConfig(f"http://127.0.0.1:{port}", _PlainHttp())) as client:
            informer = Informer(client, RES, "default", label_selector="app=x", watch_list=False)
            rec = Recorder()
            informer.add_handler(rec)
            task = asyncio.create_task(informer.run())
            assert await informer.wait_synced(timeout=5)
            for _ in range(200):
                if informer.last_resource_version == "20" and len(requests) >= 5:
                    break
                await asyncio.sleep(0.01)
            informer.stop()
            hang.set()
            await asyncio.wait_for(task, 5)
    finally:
        await runner.cleanup()
    assert requests[0] == {"labelSelector": "app=x", "limit": "500"}
    assert requests[1]["continue"] == "p2"
    watch = requests[2]
    assert (watch["watch"], watch["resourceVersion"], watch["allowWatchBookmarks"]) == (
        "true",
        "10",
        "true",
    )
    assert watch["labelSelector"] == "app=x"
    assert rec.events == [
        ("ADDED", None, "a@1"),
        ("ADDED", None, "b@1"),
        ("ADDED", None, "c@11"),
        ("DELETED", "a@1", None),
        ("DELETED", "c@11", None),
        ("MODIFIED", "b@1", "b@20"),
    ]
    assert requests[4]["resourceVersion"] == "20"


# --------------------------------------------------------------------------- filter, relist
async def test_keep_filter_treats_rejected_objects_as_absent_in_list_and_watch() -> None:
    def keep(o: Obj) -> bool:
        return str(o["metadata"]["name"]).endswith("-pool-relay")

    client = StubClient(
        lists=[ListResult([obj("a-pool-relay"), obj("other")], "10")],
        watches=[
            [
                ev("ADDED", obj("b-pool-relay", "11")),
                ev("ADDED", obj("noise", "12")),
                ev("DELETED", obj("other", "13")),
            ]
        ],
    )
    informer, rec = make(client, keep=keep)
    async with running(informer):
        await until(lambda: informer.last_resource_version == "13", "watch consumed")
    assert sorted(informer.store.keys()) == [
        ("default", "a-pool-relay"),
        ("default", "b-pool-relay"),
    ]
    assert rec.events == [("ADDED", None, "a-pool-relay@1"), ("ADDED", None, "b-pool-relay@11")]


async def test_relist_does_not_report_objects_whose_resource_version_did_not_change() -> None:
    client = StubClient(
        lists=[
            ListResult([obj("a", "5"), obj("b", "6")], "10"),
            ListResult([obj("a", "5"), obj("b", "20")], "30"),
        ],
        watches=[[bookmark("11"), error_event(410, "Expired")]],
    )
    informer, rec = make(client)
    async with running(informer):
        await until(lambda: informer.last_resource_version == "30", "relisted")
    assert rec.events[2:] == [("MODIFIED", "b@6", "b@20")]


async def test_a_first_410_after_failures_relists_after_the_base_delay_not_the_built_up() -> None:
    """Behind a restarted API server, connection failures build the backoff up; the first
    answer, a 410, means the server is back: relist after the base delay. A second 410 in
    a row backs off further (no list storm)."""
    clock = RecordingClock()
    drop = errors.ConnectionFailed
    gone = errors.Gone("too old", status=410)
    client = StubClient(
        lists=[ListResult([], "10"), ListResult([], "50")],
        watches=[[drop("a")], [drop("b")], [drop("c")], [gone], [gone]],
    )
    informer, _ = make(client, clock, backoff=no_jitter())
    async with running(informer):
        for n, delay in enumerate([0.8, 1.6, 3.2], start=1):
            await until(lambda n=n: clock.sleepers == 1 and len(client.watch_calls) == n, "drop")
            await clock.advance(delay)
        await until(lambda: clock.sleepers == 1 and len(client.watch_calls) == 4, "first 410")
        await clock.advance(0.8)
        await until(lambda: clock.sleepers == 1 and len(client.watch_calls) == 5, "second 410")
    assert clock.slept == pytest.approx([0.8, 1.6, 3.2, 0.8, 1.6])
    assert len(client.list_calls) == 2


# --------------------------------------------------------------------------- watch-list


def initial_end(rv: str) -> bytes:
    return ev(
        "BOOKMARK",
        {
            "kind": "ConfigMap",
            "metadata": {
                "resourceVersion": rv,
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        },
    )


def streaming(watches: Iterable[Iterable[Step]], lists: Iterable[ListResult] = ()) -> StubClient:
    client = StubClient(lists=lists, watches=watches)
    client.streams = True
    return client


async def test_a_watch_list_replaces_the_store_at_its_end_bookmark_and_goes_on_watching(
    clock: FakeClock,
) -> None:
    gate = Gate()
    client = streaming(
        [
            [
                ev("ADDED", obj("a", "5")),
                bookmark("6"),  # a bookmark inside the initial events is no end
                ev("ADDED", obj("b", "7")),
                gate,
                initial_end("9"),
                ev("MODIFIED", obj("a", "10")),
            ]
        ]
    )
    informer = Informer(client, RES, clock=clock)
    rec = Recorder()
    informer.add_handler(rec)
    async with running(informer):
        await settle()
        assert not informer.has_synced
        assert len(informer.store) == 0
        gate.open()
        await until(lambda: informer.has_synced, "synced (the list's end)")
        await until(lambda: informer.last_resource_version == "10", "the live event")
    assert client.list_calls == []  # no list request at all
    call = client.watch_calls[0]
    assert call["resource_version"] == ""
    assert call["send_initial_events"] is True
    assert rec.events == [
        ("ADDED", None, "a@5"),
        ("ADDED", None, "b@7"),
        ("MODIFIED", "a@5", "a@10"),
    ]


async def test_a_watch_list_keeps_only_admitted_trimmed_objects(clock: FakeClock) -> None:
    big = obj("a", "5")
    big["metadata"]["managedFields"] = [{"manager": "x"}]
    client = streaming([[ev("ADDED", big), ev("ADDED", obj("skip", "6")), initial_end("6")]])
    informer = Informer(client, RES, clock=clock, keep=lambda o: o["metadata"]["name"] != "skip")
    async with running(informer):
        await until(lambda: informer.has_synced, "synced (the list's end)")
    assert [o["metadata"]["name"] for o in informer.store.list()] == ["a"]
    assert "managedFields" not in informer.store.get("default", "a")["metadata"]


async def test_a_410_relists_by_watch_list_with_deletes_for_what_vanished(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    client = streaming(
        [
            [
                ev("ADDED", obj("a", "5")),
                ev("ADDED", obj("b", "6")),
                initial_end("6"),
                error_event(410, "Expired"),
            ],
            [ev("ADDED", obj("b", "6")), initial_end("20")],
        ]
    )
    informer = Informer(client, RES, clock=clock, registry=registry)
    rec = Recorder()
    informer.add_handler(rec)
    async with running(informer):
        await until(lambda: informer.last_resource_version == "20", "the relist")
    assert [c["send_initial_events"] for c in client.watch_calls[:2]] == [True, True]
    assert [c["resource_version"] for c in client.watch_calls[:2]] == ["", ""]
    assert rec.events[-1] == ("DELETED", "a@5", None)
    label = {"resource": "configmaps"}
    assert registry.get_sample_value("informer_gone_total", label) == 1.0
    assert registry.get_sample_value("informer_watch_restarts_total", label) == 2.0  # both ended
    assert (
        registry.get_sample_value("informer_relists_total", {**label, "mode": "watch-list"}) == 1.0
    )


async def test_a_server_refusing_watch_list_gets_paginated_lists_for_good(
    clock: FakeClock,
) -> None:
    """WatchList off (422 Invalid for sendInitialEvents): list now and on every relist."""

    class Refusing(StubClient):
        def watch_lines(self, res: Resource, namespace: str | None = None, **kw: Any) -> Any:
            if kw.get("send_initial_events"):
                self.refused += 1
            return super().watch_lines(res, namespace, **kw)

    client = Refusing(
        lists=[ListResult([obj("a", "5")], "5"), ListResult([obj("a", "5")], "30")],
        watches=[[bookmark("10"), error_event(410, "Expired")]],
    )
    client.refused = 0  # type: ignore[attr-defined]
    informer = Informer(client, RES, clock=clock)
    async with running(informer):
        await until(lambda: informer.has_synced, "synced (the list's end)")
        for _ in range(20):  # the relist comes after the backoff of an empty watch
            await clock.advance(1.0)
            await settle()
        assert informer.last_resource_version == "30"
    assert client.refused == 1  # type: ignore[attr-defined]
    assert len(client.list_calls) == 2
    assert not informer.watch_list


async def test_a_watch_list_that_ends_before_its_bookmark_lists_by_pages_that_time_only(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    """A watch-list that ends cleanly before its initial-events-end bookmark (its timeout
    came first, the server began a graceful shutdown, a proxy ended the response) says
    nothing about the server: a server without WatchList refuses the request (422).
    That one list is made by pages, at once; the next one (after a 410 here) is
    streamed again."""
    client = streaming(
        [
            [ev("ADDED", obj("a", "5"))],  # the stream ends: no end bookmark
            [error_event(410, "Expired")],  # the watch from the paged list's RV
            [ev("ADDED", obj("b", "19")), initial_end("20")],
        ],
        lists=[ListResult([obj("a", "5")], "5")],
    )
    informer = Informer(client, RES, clock=clock, registry=registry)
    async with running(informer):
        await until(lambda: informer.has_synced, "synced (the paged list)")
        assert [o["metadata"]["name"] for o in informer.store.list()] == ["a"]
        for _ in range(20):  # the relist comes after the backoff of an empty watch
            await clock.advance(1.0)
            await settle()
        assert informer.last_resource_version == "20", "the relist was not streamed"
    assert len(client.list_calls) == 1
    assert [c["send_initial_events"] for c in client.watch_calls[:3]] == [True, False, True]
    assert [o["metadata"]["name"] for o in informer.store.list()] == ["b"]
    assert informer.watch_list
    label = {"resource": "configmaps"}
    assert (
        registry.get_sample_value("informer_relists_total", {**label, "mode": "watch-list"}) == 1.0
    )


@pytest.mark.parametrize(
    "answer",
    [errors.Invalid("sendInitialEvents is forbidden"), ev("ADDED", obj("a", "5"))],
    ids=["refused", "cut short"],
)
async def test_a_watch_list_that_falls_back_lists_by_pages_at_once(
    answer: Step, registry: CollectorRegistry
) -> None:
    """A refused or cut-short watch-list is no failed watch: the paged list follows
    without a backoff, and no watch restart is counted."""
    clock = RecordingClock()
    client = streaming([[answer]], lists=[ListResult([obj("a", "5")], "5")])
    informer = Informer(client, RES, clock=clock, registry=registry, backoff=no_jitter())
    async with running(informer):
        await until(lambda: informer.has_synced, "synced (the paged list)")
    assert clock.slept == []
    label = {"resource": "configmaps"}
    assert registry.get_sample_value("informer_watch_restarts_total", label) == 0.0


# --------------------------------------------------------------------------- undecodable
def too_deep(etype: str, name: str, rv: str) -> bytes:
    """A watch event whose object nests 1,100 levels in a field (orjson stops at 1,024)."""
    meta = orjson.dumps({"name": name, "namespace": "default", "resourceVersion": rv})
    nested = b'{"a":' * 1100 + b"{}" + b"}" * 1100
    return (
        b'{"type":"'
        + etype.encode()
        + b'","object":{"metadata":'
        + meta
        + b',"spec":'
        + nested
        + b"}}"
    )


def undecodable_listed(name: str, rv: str) -> Undecodable:
    return Undecodable("default", name, f"uid-{name}", rv, "depth limit exceeded")


def gauge(registry: CollectorRegistry, metric: str) -> float | None:
    return registry.get_sample_value(metric, {"resource": "configmaps default"})


async def test_an_undecodable_watch_event_keeps_the_last_version_and_the_watch_goes_on(
    registry: CollectorRegistry,
) -> None:
    client = StubClient(
        lists=[ListResult([obj("a", "1"), obj("b", "1")], "10")],
        watches=[
            [
                too_deep("MODIFIED", "a", "11"),
                too_deep("ADDED", "c", "12"),
                ev("MODIFIED", obj("b", "13")),
                too_deep("DELETED", "b", "14"),
            ]
        ],
    )
    informer, rec = make(client, registry=registry)
    async with running(informer):
        await until(lambda: informer.last_resource_version == "14", "the last event")
        assert _tag(informer.store.get("default", "a")) == "a@1", "the last decodable version"
        assert informer.store.get("default", "c") is None
        assert informer.store.get("default", "b") is None, "a deletion still deletes"
        assert gauge(registry, "informer_undecodable_objects") == 2
        assert gauge(registry, "informer_undecodable_total") == 2
        assert len(client.list_calls) == 1, "no relist"
        await until(lambda: len(client.watch_calls) == 2, "the next watch")
        assert client.watch_calls[1]["resource_version"] == "14", "resumed, not relisted"
    assert rec.events[-2:] == [("MODIFIED", "b@1", "b@13"), ("DELETED", "b@13", None)]


async def test_an_object_that_decodes_again_is_no_longer_counted(
    registry: CollectorRegistry,
) -> None:
    client = StubClient(
        lists=[ListResult([obj("a", "1")], "10")],
        watches=[[too_deep("MODIFIED", "a", "11"), ev("MODIFIED", obj("a", "12"))]],
    )
    informer, _ = make(client, registry=registry)
    async with running(informer):
        await until(lambda: informer.last_resource_version == "12", "the fixed version")
        assert _tag(informer.store.get("default", "a")) == "a@12"
        assert gauge(registry, "informer_undecodable_objects") == 0


async def test_a_relist_keeps_the_cached_version_of_an_item_it_could_not_decode(
    registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    client = StubClient(
        lists=[
            ListResult([obj("a", "1"), obj("b", "1")], "10"),
            ListResult(
                [obj("b", "2")],
                "20",
                [undecodable_listed("a", "15"), undecodable_listed("n", "16")],
            ),
        ],
        watches=[[bookmark("10"), error_event(410, "Expired")]],
    )
    informer, rec = make(client, registry=registry)
    with caplog.at_level(logging.WARNING):
        async with running(informer):
            await until(
                lambda: len(client.list_calls) == 2 and informer.last_resource_version == "20",
                "relist",
            )
            assert _tag(informer.store.get("default", "a")) == "a@1"
            assert informer.store.get("default", "n") is None
            assert gauge(registry, "informer_undecodable_objects") == 2
    assert ("DELETED", "a@1", None) not in rec.events, "never dispatched as deleted"
    named = [r.getMessage() for r in caplog.records if "cannot be decoded" in r.getMessage()]
    assert any("default/a at resourceVersion 15" in m for m in named), named


async def test_a_streamed_list_skips_an_undecodable_object_and_syncs(
    clock: FakeClock, registry: CollectorRegistry
) -> None:
    client = streaming(
        [[ev("ADDED", obj("a", "5")), too_deep("ADDED", "deep", "6"), initial_end("9")]]
    )
    informer = Informer(client, RES, clock=clock, registry=registry)
    async with running(informer):
        await until(lambda: informer.has_synced, "synced past the undecodable object")
        assert informer.store.keys() == [("default", "a")]
        assert gauge(registry, "informer_undecodable_objects") is None  # other label
        assert (
            registry.get_sample_value("informer_undecodable_objects", {"resource": "configmaps"})
            == 1
        )


async def test_an_informer_that_keeps_failing_says_so_until_it_lists_again(
    registry: CollectorRegistry,
) -> None:
    clock = RecordingClock()
    client = StubClient(
        lists=[errors.ServerError("boom", status=500), ListResult([], "10")],
    )
    informer, _ = make(client, clock, registry=registry, backoff=no_jitter())
    async with running(informer):
        await until(lambda: clock.sleepers == 1, "backing off")
        assert gauge(registry, "informer_failing") == 1
        await clock.advance(0.8)
        await until(lambda: informer.has_synced, "listed")
        assert gauge(registry, "informer_failing") == 0


async def test_a_skip_handler_hears_of_each_undecodable_version_once(
    registry: CollectorRegistry,
) -> None:
    """No event carries an undecodable object; whoever maps objects to work by their
    identity hears of it once per version, from a list and from the watch."""
    client = StubClient(
        lists=[ListResult([], "10", [undecodable_listed("a", "9")])],
        watches=[
            [
                too_deep("ADDED", "b", "11"),
                too_deep("MODIFIED", "b", "11"),
                too_deep("MODIFIED", "b", "12"),
            ]
        ],
    )
    informer, _ = make(client, registry=registry)
    heard: list[tuple[str, str]] = []
    informer.add_skip_handler(lambda bad: heard.append((bad.name, bad.resource_version)))
    async with running(informer):
        await until(lambda: informer.last_resource_version == "12", "the last event")
    assert heard == [("a", "9"), ("b", "11"), ("b", "12")]
    bad = informer.undecodable("default", "b")
    assert bad is not None
    assert bad.resource_version == "12"
    assert informer.undecodable("default", "c") is None


async def test_a_skip_handler_hears_when_an_undecodable_object_goes_with_nothing_cached(
    registry: CollectorRegistry,
) -> None:
    """A key held only as undecodable (nothing cached under it) that is deleted, or
    that a relist no longer shows, reaches the same handlers: whoever waited on it
    decides again (it is gone) instead of saying "cannot be read" for ever."""
    client = StubClient(
        lists=[
            ListResult([], "10", [undecodable_listed("a", "9"), undecodable_listed("b", "9")]),
            ListResult([], "20"),
        ],
        watches=[[too_deep("DELETED", "a", "11"), error_event(410, "Expired")]],
    )
    informer, rec = make(client, registry=registry)
    heard: list[tuple[str, str]] = []
    informer.add_skip_handler(lambda bad: heard.append((bad.name, bad.resource_version)))
    async with running(informer):
        await until(
            lambda: len(client.list_calls) == 2 and informer.last_resource_version == "20",
            "relist",
        )
        assert informer.undecodable("default", "a") is None
        assert informer.undecodable("default", "b") is None
        assert gauge(registry, "informer_undecodable_objects") == 0
    assert heard == [("a", "9"), ("b", "9"), ("a", "11"), ("b", "9")]
    assert rec.events == [], "nothing was cached: no object event"


def test_an_object_nested_past_the_interpreters_recursion_is_still_cached() -> None:
    """orjson decodes up to 1,024 levels; Python recurses to about 1,000. An object nested
    in between, in a part the cache shares, must fail no list (that would hold the
    informer unsynced for ever): every listed or watched object goes through the same
    preparation (`as_cached`), and keeps this one as it is, unshared."""
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(1010):
        node["a"] = {}
        node = node["a"]
    informer = Informer(StubClient(), RES, "default", transform=for_cache(shared=[("spec",)]))
    # No collection meanwhile: one started at the limit could not even call a pause
    # callback an earlier test registered (an unraisable error, not this test's subject).
    gc.disable()
    try:
        kept = informer.as_cached({**obj("a", "1"), "spec": deep})
    finally:
        gc.enable()
    assert kept["spec"] is deep
