"""The events.k8s.io/v1 recorder against the real API server: repeats fold into one
Event with a series count, distinct related objects stay distinct, and a recorder
without permission to write Events drops them (counted) without ever raising."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from prometheus_client import CollectorRegistry

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.events import WARNING, EventRecorder
from dynamo_pool_operator.runtime.objects.resources import CONFIGMAPS, EVENTS
from tests.harness import eventually

CONTROLLER = "dpo.test/runtime-events"


def _cm(name: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}}


def _recorder(client: Client, registry: CollectorRegistry, **kw: Any) -> EventRecorder:
    return EventRecorder(
        client,
        reporting_controller=CONTROLLER,
        reporting_instance="test-instance",
        registry=registry,
        **kw,
    )


async def _our_events(client: Client, ns: str) -> list[dict[str, Any]]:
    items = (await client.list(EVENTS, ns)).items
    return [e for e in items if e.get("reportingController") == CONTROLLER]


def _count(event: dict[str, Any]) -> int:
    return int((event.get("series") or {}).get("count") or 1)


async def test_repeats_fold_into_one_event_with_a_series_count_and_related_objects_stay_distinct(
    client: Client, namespace: str
) -> None:
    """Five identical emits about one ConfigMap are ONE Event whose series.count reaches 5
    (the first repeat is patched at once, the rest on the 0.5 s heartbeat). The same emit
    with two different `related` objects makes two more Events, each with its own count."""
    regarding = CONFIGMAPS.reference(await client.create(CONFIGMAPS, _cm("subject", namespace)))
    rel_x = CONFIGMAPS.reference(await client.create(CONFIGMAPS, _cm("rel-x", namespace)))
    rel_y = CONFIGMAPS.reference(await client.create(CONFIGMAPS, _cm("rel-y", namespace)))
    registry = CollectorRegistry()
    recorder = _recorder(client, registry, heartbeat=0.5)
    await recorder.start()
    try:
        for i in range(5):
            recorder.emit(regarding, None, WARNING, "Broken", "Reconcile", f"attempt {i}")
            await asyncio.sleep(0.05)
        for _ in range(3):
            recorder.emit(regarding, rel_x, WARNING, "Broken", "Reconcile", "about x")
        recorder.emit(regarding, rel_y, WARNING, "Broken", "Reconcile", "about y")

        async def settled() -> list[dict[str, Any]] | None:
            events = await _our_events(client, namespace)
            counts = sorted(_count(e) for e in events)
            return events if counts == [1, 3, 5] else None

        events = await eventually(settled, timeout=5)
    finally:
        await recorder.stop()

    by_related = {(e.get("related") or {}).get("name"): e for e in events}
    assert set(by_related) == {None, "rel-x", "rel-y"}
    assert [_count(by_related[k]) for k in (None, "rel-x", "rel-y")] == [5, 3, 1]
    for e in events:
        assert e["regarding"]["uid"] == regarding["uid"]
        assert e["regarding"]["resourceVersion"] == regarding["resourceVersion"]
        assert (e["type"], e["reason"], e["action"]) == ("Warning", "Broken", "Reconcile")
        assert e["reportingInstance"] == "test-instance"
    single = by_related[None]
    assert single["note"] == "attempt 0", "the first note is kept"
    assert single["series"]["lastObservedTime"] > single["eventTime"]
    assert by_related["rel-x"]["related"]["uid"] == rel_x["uid"]
    assert (
        registry.get_sample_value("events_emitted_total", {"type": "Warning", "reason": "Broken"})
        == 9
    )


async def test_stop_writes_the_repeats_the_heartbeat_has_not_written_yet(
    client: Client, namespace: str
) -> None:
    """With a heartbeat far away, repeats after the first are only in memory; stop()
    writes the latest count before it returns."""
    regarding = CONFIGMAPS.reference(await client.create(CONFIGMAPS, _cm("subject", namespace)))
    recorder = _recorder(client, CollectorRegistry(), heartbeat=600)
    await recorder.start()
    for _ in range(2):
        recorder.emit(regarding, None, WARNING, "Stuck", "Reconcile", "again")

    async def count_two() -> bool:
        return [_count(e) for e in await _our_events(client, namespace)] == [2]

    await eventually(count_two, timeout=5)
    for _ in range(4):
        recorder.emit(regarding, None, WARNING, "Stuck", "Reconcile", "again")
    await asyncio.sleep(0.3)
    assert [_count(e) for e in await _our_events(client, namespace)] == [2], "written early"
    await recorder.stop()
    assert [_count(e) for e in await _our_events(client, namespace)] == [6]


async def test_recorder_without_permission_drops_and_counts_and_never_raises(
    control_plane: ControlPlane, client: Client, namespace: str
) -> None:
    """A user with no RBAC at all: every emit returns normally, the server refuses the
    create (audited as 403), and the refusal is counted as a drop by error class."""
    regarding = CONFIGMAPS.reference(await client.create(CONFIGMAPS, _cm("subject", namespace)))
    user = f"no-events-{uuid.uuid4().hex[:6]}"
    registry = CollectorRegistry()
    since = control_plane.audit.offset()
    async with Client(
        load_kubeconfig(control_plane.user_kubeconfig(user)), user_agent="dpo-tests-noevents"
    ) as restricted:
        recorder = _recorder(restricted, registry, heartbeat=0.5)
        await recorder.start()
        try:
            for _ in range(3):  # returns at once, raises nothing
                recorder.emit(regarding, None, WARNING, "Denied", "Reconcile", "no rbac")
            recorder.emit(regarding, None, "Bogus", "Denied", "Reconcile", "bad type")  # type: ignore[arg-type]
            await asyncio.wait_for(recorder.wait_idle(), 5)
        finally:
            await recorder.stop()

    dropped = registry.get_sample_value("events_dropped_total", {"reason": "Forbidden"})
    assert (dropped or 0) >= 1
    assert registry.get_sample_value("events_dropped_total", {"reason": "invalid"}) == 1
    assert await _our_events(client, namespace) == []
    writes = await asyncio.to_thread(control_plane.audit.writes, since, user=user)
    assert writes, "the recorder never asked the server"
    assert {(w.resource, w.verb, w.code) for w in writes} == {("events", "create", 403)}
