"""EventRecorder: client-go series semantics, bounded memory and queue, never failing a caller.

A fake API records every create/patch and keeps the Events it accepted, so a patch of an
Event the "server" no longer has answers NotFound as the real one would after the TTL.
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.background import in_background
from dynamo_pool_operator.runtime.events import EventRecorder, micro_time, truncate_note
from dynamo_pool_operator.runtime.objects.resources import EVENTS, Resource
from tests.clock import FakeClock
from tests.unit.runtime.client.fake import FakeClient, Obj

START = datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)
POOL = {
    "apiVersion": "dynamo.nvidia.com/v1alpha1",
    "kind": "DynamoPool",
    "namespace": "team-a",
    "name": "pool-a",
    "uid": "11111111-2222-3333-4444-555555555555",
    "resourceVersion": "42",
}
SVC_1 = {"apiVersion": "v1", "kind": "Service", "namespace": "team-a", "name": "svc-1", "uid": "u1"}
SVC_2 = {"apiVersion": "v1", "kind": "Service", "namespace": "team-a", "name": "svc-2", "uid": "u2"}
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class FakeEventsApi(FakeClient):
    """Records calls; answers like the API server, or with errors queued by `fail`."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str, dict[str, Any]]] = []  # (verb, name, body or patch)
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}
        self._errors: dict[str, list[errors.ApiError]] = {"create": [], "patch": []}
        #: Whether each create was sent as a background write (background.py).
        self.background: list[bool] = []

    def fail(self, verb: str, *errs: errors.ApiError) -> None:
        self._errors[verb].extend(errs)

    def verbs(self) -> list[str]:
        return [verb for verb, _, _ in self.calls]

    async def create(
        self, res: Resource, body: dict[str, Any], namespace: str | None = None, **_: Any
    ) -> dict[str, Any]:
        assert res == EVENTS
        assert namespace == body["metadata"]["namespace"]
        self.calls.append(("create", body["metadata"]["name"], copy.deepcopy(body)))
        self.background.append(in_background())
        await asyncio.sleep(0)
        if self._errors["create"]:
            raise self._errors["create"].pop(0)
        key = (namespace or "", body["metadata"]["name"])
        if key in self.stored:
            raise errors.AlreadyExists("exists", status=409, reason="AlreadyExists")
        self.stored[key] = copy.deepcopy(body)
        return body

    async def merge_patch(
        self, res: Resource, name: str, patch: Obj, namespace: str | None = None, **_: Any
    ) -> Obj:
        assert res == EVENTS
        self.calls.append(("patch", name, copy.deepcopy(patch)))
        await asyncio.sleep(0)
        if self._errors["patch"]:
            raise self._errors["patch"].pop(0)
        stored = self.stored.get((namespace or "", name))
        if stored is None:
            raise errors.NotFound("gone", status=404, reason="NotFound")
        stored.update(copy.deepcopy(patch))
        return stored


@pytest.fixture
def api() -> FakeEventsApi:
    return FakeEventsApi()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


RecorderFactory = Callable[..., Awaitable[EventRecorder]]


@pytest.fixture
async def make(
    api: FakeEventsApi, clock: FakeClock, registry: CollectorRegistry
) -> AsyncIterator[RecorderFactory]:
    """Builds recorders (started unless start=False) and stops them after the test."""
    made: list[EventRecorder] = []

    async def factory(*, start: bool = True, **kw: Any) -> EventRecorder:
        rec = EventRecorder(
            api,
            reporting_controller="dynamo.nvidia.com/pool-operator",
            reporting_instance="pool-operator-0",
            clock=clock,
            registry=registry,
            **kw,
        )
        made.append(rec)
        if start:
            await rec.start()
        return rec

    yield factory
    for rec in made:
        await rec.stop()


def warn(rec: EventRecorder, reason: str = "ExportFailed", **kw: Any) -> None:
    """Emit the test's standard Warning; keyword arguments override single fields."""
    args: dict[str, Any] = {
        "regarding": POOL,
        "related": None,
        "type": "Warning",
        "reason": reason,
        "action": "Reconcile",
        "note": "could not export",
    }
    args.update(kw)
    rec.emit(**args)


async def warned(rec: EventRecorder, reason: str = "ExportFailed", **kw: Any) -> None:
    """`warn`, then wait until the recorder has written all it will write of it."""
    warn(rec, reason, **kw)
    await rec.wait_idle()


async def until(condition: Callable[[], bool]) -> None:
    """Let the loop run until `condition` holds (the fake API and clock never block)."""
    for _ in range(100):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def writer_backing_off(clock: FakeClock) -> None:
    """Wait until the writer sleeps before a retry (the sweep and heartbeat are 2 sleepers)."""
    await until(lambda: clock.sleepers == 3)


def dropped(registry: CollectorRegistry, reason: str) -> float:
    return registry.get_sample_value("events_dropped_total", {"reason": reason}) or 0.0


# ---------------------------------------------------------------- first occurrence


async def test_first_occurrence_creates_one_event_v1_body(
    make: RecorderFactory, api: FakeEventsApi, registry: CollectorRegistry
) -> None:
    rec = await make()
    await warned(rec, related=SVC_1)

    assert api.verbs() == ["create"]
    _, name, body = api.calls[0]
    assert set(body) == {
        "apiVersion", "kind", "metadata", "eventTime", "reportingController",
        "reportingInstance", "action", "reason", "regarding", "related", "note", "type",
    }  # fmt: skip
    assert body["apiVersion"] == "events.k8s.io/v1"
    assert body["kind"] == "Event"
    assert body["metadata"] == {"name": name, "namespace": "team-a"}
    assert re.fullmatch(r"pool-a\.[0-9a-f]+", name)
    assert body["eventTime"] == "2026-01-01T12:00:00.123456Z"
    assert body["reportingController"] == "dynamo.nvidia.com/pool-operator"
    assert body["reportingInstance"] == "pool-operator-0"
    assert (body["type"], body["reason"], body["action"]) == (
        "Warning",
        "ExportFailed",
        "Reconcile",
    )
    assert body["regarding"] == POOL
    assert body["related"] == SVC_1
    assert body["note"] == "could not export"
    labels = {"type": "Warning", "reason": "ExportFailed"}
    assert registry.get_sample_value("events_emitted_total", labels) == 1.0


async def test_events_are_written_as_background_writes(
    make: RecorderFactory, api: FakeEventsApi
) -> None:
    """Never urgent: during a mass event they wait for the backlog's write slots."""
    rec = await make()
    warn(rec)
    await warned(rec, reason="Other")
    assert api.background == [True, True]


async def test_singleton_has_no_series_and_no_related_when_none(
    make: RecorderFactory, api: FakeEventsApi
) -> None:
    rec = await make()
    await warned(rec)
    body = api.calls[0][2]
    assert "series" not in body
    assert "related" not in body


async def test_cluster_scoped_regarding_records_event_in_default_namespace(
    make: RecorderFactory, api: FakeEventsApi
) -> None:
    rec = await make()
    node = {"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "n1"}
    await warned(rec, regarding=node)
    assert api.calls[0][2]["metadata"]["namespace"] == "default"
    assert ("default", api.calls[0][1]) in api.stored


async def test_event_names_are_unique_within_one_clock_instant(
    make: RecorderFactory, api: FakeEventsApi
) -> None:
    rec = await make()
    for reason in ("A", "B", "C"):
        warn(rec, reason=reason)
    await rec.wait_idle()
    names = [name for _, name, _ in api.calls]
    assert len(set(names)) == 3


async def test_event_name_falls_back_to_uuid_when_not_a_dns_subdomain(
    make: RecorderFactory, api: FakeEventsApi
) -> None:
    rec = await make()
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"}
    await warned(rec, regarding={**role, "name": "system:Controller"})
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", api.calls[0][1]
    )


# ---------------------------------------------------------------- series


async def test_first_repeat_patches_existing_event_with_series_count_two(
    make: RecorderFactory, api: FakeEventsApi, clock: FakeClock
) -> None:
    rec = await make()
    await warned(rec)
    await clock.advance(5)
    await warned(rec)

    assert api.verbs() == ["create", "patch"]
    created, patched = api.calls[0][1], api.calls[1][1]
    assert patched == created
    assert api.calls[1][2] == {
        "series": {"count": 2, "lastObservedTime": "2026-01-01T12:00:05.123456Z"}
    }


async def test_later_repeats_stay_in_memory_until_heartbeat_writes_latest_count(
    make: RecorderFactory, api: FakeEventsApi, clock: FakeClock
) -> None:
    rec = await make(heartbeat=60)
    for _ in range(5):
        await warned(rec)
        await clock.advance(1)
    assert api.verbs() == ["create", "patch"]  # repeats 3..5 cost no API call

    await clock.advance(55)  # t=60: heartbeat
    await rec.wait_idle()
    assert api.verbs() == ["create", "patch", "patch"]
    assert api.calls[2][2] == {
        "series": {"count": 5, "lastObservedTime": "2026-01-01T12:00:04.123456Z"}
    }

    await clock.advance(60)  # nothing new since: the heartbeat writes nothing
    await rec.wait_idle()
    assert len(api.calls) == 3


async def test_repeats_before_the_create_is_sent_fold_into_the_create(
    make: RecorderFactory, api: FakeEventsApi
) -> None:
    rec = await make(start=False)
    warn(rec)
    warn(rec)
    warn(rec)
    await rec.start()
    await rec.wait_idle()
    assert api.verbs() == ["create"]
    assert api.calls[0][2]["series"]["count"] == 3


async def test_series_end_writes_final_count_and_next_occurrence_creates_new_event(
    make: RecorderFactory, api: FakeEventsApi, clock: FakeClock
) -> None:
    rec = await make()  # client-go defaults: window 6 min, heartbeat 30 min
    for _ in range(3):
        await warned(rec)
    await clock.advance(6 * 60 + 1)
    await rec.wait_idle()
    await clock.advance(6 * 60)  # the sweep after the window found the series ended
    await rec.wait_idle()
    assert api.verbs() == ["create", "patch", "patch"]
    assert api.calls[2][2]["series"]["count"] == 3

    await warned(rec)
    assert api.verbs()[-1] == "create"
    assert api.calls[-1][1] != api.calls[0][1]
    assert "series" not in api.calls[-1][2]


async def test_repeat_after_window_of_singleton_creates_new_event(
    make: RecorderFactory, api: FakeEventsApi, clock: FakeClock
) -> None:
    rec = await make()
    await warned(rec)
    await clock.advance(6 * 60 + 0.5)  # the sweep at 6 min found it live: emit checks too
    await warned(rec)
    assert api.verbs() == ["create", "create"]
    assert api.calls[0][1] != api.calls[1][1]


async def test_repeat_just_inside_window_joins_series(
    make: RecorderFactory, api: FakeEventsApi, clock: FakeClock
) -> None:
    rec = await make()
    await warned(rec)
    await clock.advance(6 * 60 - 1)
    await warned(rec)
    assert api.verbs() == ["create", "patch"]


async def test_series_window_restarts_at_each_repeat(
    make: RecorderFactory, api: FakeEventsApi, clock: FakeClock
) -> None:
    rec = await make(heartbeat=24 * 3600)
    for _ in range(4):  # 15 minutes of repeats, never 6 min apart
        await warned(rec)
        await clock.advance(5 * 60)
    assert api.verbs() == ["create", "patch"]


@pytest.mark.parametrize(
    "change",
    [
        {"related": SVC_2},
        {"reason": "OtherReason"},
        {"type": "Normal"},
        {"action": "Delete"},
        {"regarding": {**POOL, "name": "pool-b"}},
        {"regarding": {**POOL, "uid": "another-incarnation"}},
    ],
    ids=["related", "reason", "type", "action", "regarding-name", "regarding-uid"],
)
async def test_each_key_field_separates_series(
    make: RecorderFactory, api: FakeEventsApi, change: dict[str, Any]
) -> None:
    rec = await make()
    await warned(rec, related=SVC_1)
    await warned(rec, **{"related": SVC_1, **change})
    assert api.verbs() == ["create", "create"]


async def test_distinct_related_objects_stay_distinct_series(
    make: RecorderFactory, api: FakeEventsApi
) -> None:
    rec = await make()
    for related in (SVC_1, SVC_2, SVC_1, SVC_2):
        await warned(rec, related=related)
    assert api.verbs() == ["create", "create", "patch", "patch"]
    assert api.calls[2][1] == api.calls[0][1]
    assert api.calls[3][1] == api.calls[1][1]


async def test_the_regarding_object_is_keyed_by_uid_and_generation_not_resource_version(
    make: RecorderFactory, api: FakeEventsApi
) -> None:
    """A controller writes the status of the object its Events regard: that moves the
    resourceVersion, not the problem. The body keeps the first occurrence's version."""
    rec = await make()
    await warned(rec, regarding={**POOL, "generation": 1})
    await warned(rec, regarding={**POOL, "resourceVersion": "43", "generation": 1})
    assert api.verbs() == ["create", "patch"]
    assert api.calls[0][2]["regarding"]["resourceVersion"] == "42"
    assert "generation" not in api.calls[0][2]["regarding"]

    await warned(rec, regarding={**POOL, "resourceVersion": "44", "generation": 2})
    assert api.verbs() == ["create", "patch", "create"], "a spec change starts a new Event"


async def test_the_related_object_is_keyed_at_its_resource_version(
    make: RecorderFactory, api: FakeEventsApi
) -> None:
    """The related object is what the problem is about, at the version read: an edit of
    it is a new problem, so a new Event."""
    rec = await make()
    await warned(rec, related={**SVC_1, "resourceVersion": "7"})
    await warned(rec, related={**SVC_1, "resourceVersion": "7"})
    await warned(rec, related={**SVC_1, "resourceVersion": "8"})
    assert api.verbs() == ["create", "patch", "create"]


async def test_note_is_not_part_of_the_key_and_first_note_is_kept(
    make: RecorderFactory, api: FakeEventsApi
) -> None:
    rec = await make()
    await warned(rec, note="first")
    await warned(rec, note="second")
    assert api.verbs() == ["create", "patch"]
    assert "note" not in api.calls[1][2]
    assert next(iter(api.stored.values()))["note"] == "first"


async def test_lru_bound_evicts_least_recent_series(
    make: RecorderFactory, api: FakeEventsApi
) -> None:
    rec = await make(max_keys=2)
    for reason in ("A", "B", "A", "A", "C"):  # C evicts B (A was used more recently)
        await warned(rec, reason=reason)
    assert api.verbs() == ["create", "create", "patch", "create"]
    await warned(rec, reason="A")
    await warned(rec, reason="B")
    assert api.verbs()[4:] == ["create"]  # A still cached (no write), B forgotten: new Event


async def test_evicted_series_writes_its_unwritten_count(
    make: RecorderFactory, api: FakeEventsApi
) -> None:
    rec = await make(max_keys=1)
    for _ in range(4):
        await warned(rec, reason="A")
    await warned(rec, reason="B")
    assert api.verbs() == ["create", "patch", "create", "patch"]  # B created, A finished
    patches = [c for c in api.calls if c[0] == "patch"]
    assert patches[-1][2]["series"]["count"] == 4


async def test_stop_flushes_unwritten_series_counts(
    make: RecorderFactory, api: FakeEventsApi
) -> None:
    rec = await make()
    for _ in range(4):
        await warned(rec)
    await rec.stop()
    assert api.verbs() == ["create", "patch", "patch"]
    assert api.calls[-1][2]["series"]["count"] == 4


async def test_stop_writes_events_emitted_before_start(
    make: RecorderFactory, api: FakeEventsApi
) -> None:
    rec = await make(start=False)
    warn(rec)
    await rec.stop()
    assert api.verbs() == ["create"]


async def test_emit_after_stop_is_dropped_and_never_written(
    make: RecorderFactory, api: FakeEventsApi, registry: CollectorRegistry
) -> None:
    """stop() is final: it ran before the Lease was released, so anything emitted
    later would be written by a replica that no longer leads."""
    rec = await make()
    await rec.stop()
    warn(rec)
    await rec.stop()
    await asyncio.sleep(0)
    assert api.calls == []
    assert dropped(registry, "shutdown") == 1


async def test_abandon_writes_nothing_more_and_counts_what_it_dropped(
    make: RecorderFactory, api: FakeEventsApi, registry: CollectorRegistry
) -> None:
    """For a leader that lost its Lease: no flush. The unwritten repeats of a series and
    an Event still queued are dropped and counted; nothing is sent, then or later."""
    rec = await make()
    for _ in range(2):
        await warned(rec)
    assert api.verbs() == ["create", "patch"]
    warn(rec)  # count 3, in memory until a heartbeat or stop()
    warn(rec, reason="Other")  # queued, not yet taken by a writer
    await rec.abandon()
    warn(rec, reason="Late")
    await rec.stop()
    for _ in range(10):
        await asyncio.sleep(0)
    assert api.verbs() == ["create", "patch"]
    assert dropped(registry, "not_leader") == 2
    assert dropped(registry, "shutdown") == 1


# ---------------------------------------------------------------- failures


async def test_patch_not_found_creates_new_event_carrying_the_series(
    make: RecorderFactory, api: FakeEventsApi, clock: FakeClock
) -> None:
    rec = await make(heartbeat=60)
    await warned(rec)
    api.stored.clear()  # the server's event TTL removed it
    await clock.advance(1)
    await warned(rec)

    assert api.verbs() == ["create", "patch", "create"]
    first, recreated = api.calls[0][1], api.calls[2][1]
    assert recreated != first
    body = api.calls[2][2]
    assert body["series"] == {"count": 2, "lastObservedTime": "2026-01-01T12:00:01.123456Z"}
    assert body["eventTime"] == api.calls[0][2]["eventTime"]

    warn(rec)
    await clock.advance(60)
    await rec.wait_idle()
    assert api.calls[-1][:2] == ("patch", recreated)  # the series now lives in the new Event
    assert api.calls[-1][2]["series"]["count"] == 3


@pytest.mark.parametrize(
    "error",
    [
        errors.Forbidden("no RBAC", status=403, reason="Forbidden"),
        errors.Invalid("bad", status=422, reason="Invalid"),
        errors.ApiError("odd", status=418),
    ],
    ids=["Forbidden", "Invalid", "ApiError"],
)
async def test_api_refusal_drops_event_counts_it_and_never_raises(
    make: RecorderFactory,
    api: FakeEventsApi,
    registry: CollectorRegistry,
    error: errors.ApiError,
) -> None:
    rec = await make()
    api.fail("create", error)
    warn(rec)  # must not raise
    await rec.wait_idle()
    assert dropped(registry, type(error).__name__) == 1.0

    warn(rec)  # the refused Event does not exist: no patch of it, a fresh create
    await rec.wait_idle()
    assert api.verbs() == ["create", "create"]
    assert len(api.stored) == 1


async def test_repeat_during_a_refused_create_does_not_create_again(
    make: RecorderFactory, api: FakeEventsApi, registry: CollectorRegistry
) -> None:
    rec = await make()
    api.fail("create", errors.Forbidden("no RBAC", status=403, reason="Forbidden"))
    warn(rec)
    await until(lambda: bool(api.calls))  # the create is on its way to the server
    warn(rec)  # the first repeat queues a write of the same Event
    await rec.wait_idle()
    assert api.verbs() == ["create"]
    assert dropped(registry, "Forbidden") == 1.0


async def test_refused_series_update_is_counted_and_retried_at_heartbeat(
    make: RecorderFactory, api: FakeEventsApi, clock: FakeClock, registry: CollectorRegistry
) -> None:
    rec = await make(heartbeat=60)
    await warned(rec)
    api.fail("patch", errors.Forbidden("no patch", status=403, reason="Forbidden"))
    await warned(rec)
    assert dropped(registry, "Forbidden") == 1.0

    await clock.advance(60)
    await rec.wait_idle()
    assert api.verbs() == ["create", "patch", "patch"]
    assert next(iter(api.stored.values()))["series"]["count"] == 2


async def test_transient_error_is_retried_after_backoff(
    make: RecorderFactory, api: FakeEventsApi, clock: FakeClock, registry: CollectorRegistry
) -> None:
    rec = await make(retry_delay=10.0)
    api.fail("create", errors.ServerError("etcd slow", status=500))
    warn(rec)
    await writer_backing_off(clock)
    assert api.verbs() == ["create"]
    await clock.advance(12.5)  # past the longest jittered delay (10 s + 25 %)
    await rec.wait_idle()
    assert api.verbs() == ["create", "create"]
    assert len(api.stored) == 1
    assert dropped(registry, "ServerError") == 0.0


async def test_transient_error_is_dropped_after_max_tries(
    make: RecorderFactory, api: FakeEventsApi, clock: FakeClock, registry: CollectorRegistry
) -> None:
    rec = await make(max_tries=2, retry_delay=1.0)
    api.fail("create", *(errors.ConnectionFailed("refused") for _ in range(2)))
    warn(rec)
    await writer_backing_off(clock)
    await clock.advance(2)
    await rec.wait_idle()
    assert api.verbs() == ["create", "create"]
    assert dropped(registry, "ConnectionFailed") == 1.0


async def test_emit_never_blocks_or_raises_when_queue_is_full(
    make: RecorderFactory, api: FakeEventsApi, registry: CollectorRegistry
) -> None:
    rec = await make(start=False, max_queue=2)
    for reason in ("A", "B", "C", "D", "E"):
        warn(rec, reason=reason)  # the writer is not running: nothing drains the queue
    assert dropped(registry, "queue_full") == 3.0
    await rec.start()
    await rec.wait_idle()
    assert [c[2]["reason"] for c in api.calls] == ["A", "B"]

    warn(rec, reason="C")  # a dropped first occurrence was not cached: it is created now
    await rec.wait_idle()
    assert api.verbs() == ["create", "create", "create"]


async def test_invalid_type_is_dropped_not_raised(
    make: RecorderFactory, api: FakeEventsApi, registry: CollectorRegistry
) -> None:
    rec = await make()
    warn(rec, type="Error")
    warn(rec, reason="")
    await warned(rec, regarding={"kind": "Pod"})
    assert api.calls == []
    assert dropped(registry, "invalid") == 3.0


async def test_unexpected_client_exception_does_not_kill_the_writer(
    make: RecorderFactory, api: FakeEventsApi, registry: CollectorRegistry
) -> None:
    rec = await make()

    async def broken(*_: Any, **__: Any) -> dict[str, Any]:
        raise RuntimeError("bug")

    original = api.create
    api.create = broken  # type: ignore[method-assign]
    await warned(rec, reason="A")
    api.create = original  # type: ignore[method-assign]
    await warned(rec, reason="B")
    assert dropped(registry, "error") == 1.0
    assert [c[2]["reason"] for c in api.calls] == ["B"]


# ---------------------------------------------------------------- formats and config


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        (datetime(2026, 1, 1, tzinfo=UTC), "2026-01-01T00:00:00.000000Z"),
        (datetime(2026, 3, 4, 5, 6, 7, 89, tzinfo=UTC), "2026-03-04T05:06:07.000089Z"),
        (
            datetime(2026, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=2))),
            "2026-01-01T00:00:00.000000Z",
        ),
        (datetime(2026, 1, 1, 0, 0, 0, 999999), "2026-01-01T00:00:00.999999Z"),
    ],
    ids=["utc", "micros", "offset", "naive"],
)
def test_micro_time_has_six_fraction_digits_utc_and_z(when: datetime, expected: str) -> None:
    assert micro_time(when) == expected
    assert MICRO_TIME.fullmatch(micro_time(when))


def test_note_is_truncated_to_1024_bytes_without_splitting_characters() -> None:
    long = "é" * 1000  # 2000 bytes
    cut = truncate_note(long)
    assert len(cut.encode()) <= 1024
    assert cut.endswith("...")
    assert cut[:-3] == "é" * len(cut[:-3])
    assert truncate_note("x" * 1024) == "x" * 1024


async def test_emitted_note_is_truncated(make: RecorderFactory, api: FakeEventsApi) -> None:
    rec = await make()
    await warned(rec, note="y" * 5000)
    assert len(api.calls[0][2]["note"].encode()) == 1024


@pytest.mark.parametrize(
    "controller", ["", "bad controller", "-leading-dash", "Example.com/x", "a/" + "b" * 64]
)
def test_reporting_controller_must_be_a_qualified_name(
    controller: str, api: FakeEventsApi, registry: CollectorRegistry
) -> None:
    with pytest.raises(ValueError, match="qualified name"):
        EventRecorder(
            api, reporting_controller=controller, reporting_instance="i", registry=registry
        )


def test_recorders_can_share_one_registry(api: FakeEventsApi, registry: CollectorRegistry) -> None:
    for name in ("example.com/a", "example.com/b"):
        EventRecorder(api, reporting_controller=name, reporting_instance="i", registry=registry)


# ---------------------------------------------------------------- concurrent writers
class GatedApi(FakeEventsApi):
    """Holds every call until `gate` opens, counting how many are in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.in_flight = 0
        self.most_in_flight = 0

    async def _held(self) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.gate.wait()
        finally:
            self.in_flight -= 1

    async def create(
        self, res: Resource, body: dict[str, Any], namespace: str | None = None, **_: Any
    ) -> dict[str, Any]:
        await self._held()
        return await super().create(res, body, namespace)

    async def merge_patch(
        self, res: Resource, name: str, patch: Obj, namespace: str | None = None, **_: Any
    ) -> Obj:
        await self._held()
        return await super().merge_patch(res, name, patch, namespace)


def gated_recorder(api: GatedApi, clock: FakeClock, writers: int) -> EventRecorder:
    return EventRecorder(
        api,
        reporting_controller="dynamo.nvidia.com/pool-operator",
        reporting_instance="pool-operator-0",
        clock=clock,
        registry=CollectorRegistry(),
        writers=writers,
    )


@pytest.mark.parametrize("writers", [1, 2, 4])
async def test_events_about_different_objects_are_written_by_up_to_writers_at_once(
    clock: FakeClock, writers: int
) -> None:
    api = GatedApi()
    rec = gated_recorder(api, clock, writers)
    await rec.start()
    for i in range(6):
        warn(rec, regarding={**POOL, "name": f"pool-{i}", "uid": f"u{i}"})
    await until(lambda: api.in_flight == writers)
    for _ in range(20):
        await asyncio.sleep(0)
    assert api.most_in_flight == writers
    api.gate.set()
    await rec.wait_idle()
    assert api.verbs() == ["create"] * 6
    await rec.stop()


async def test_a_series_is_never_written_by_two_writers_at_once(clock: FakeClock) -> None:
    """A repeat emitted while the series' create is in flight waits for that create: its
    patch must not race the create (it would answer NotFound and start a new Event)."""
    api = GatedApi()
    rec = gated_recorder(api, clock, writers=4)
    await rec.start()
    warn(rec)
    await until(lambda: api.in_flight == 1)
    warn(rec)  # count 2: the first repeat is written at once — after the create
    for _ in range(20):
        await asyncio.sleep(0)
    assert api.most_in_flight == 1  # the repeat did not start a second write
    api.gate.set()
    await rec.wait_idle()
    assert api.verbs() == ["create", "patch"]
    assert api.calls[1][2]["series"]["count"] == 2
    assert len(api.stored) == 1
    await rec.stop()


async def test_wait_idle_waits_for_writes_in_flight_not_only_the_queue(clock: FakeClock) -> None:
    api = GatedApi()
    rec = gated_recorder(api, clock, writers=2)
    await rec.start()
    warn(rec)
    await until(lambda: api.in_flight == 1)
    idle = asyncio.create_task(rec.wait_idle())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not idle.done()  # the queue is empty, but a write is still on its way
    api.gate.set()
    await asyncio.wait_for(idle, 1)
    await rec.stop()
