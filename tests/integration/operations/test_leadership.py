"""The operator process (`process.run`) around its Lease: how fast it hands over, and
that nothing it writes lands once its leadership has ended.

The audit log is the witness: it records every write with its user agent, so "no
write after the release" is read from what the API server received, not from what
the operator believes it did.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator import process
from dynamo_pool_operator.localcluster.audit import AuditEvent
from dynamo_pool_operator.localcluster.controlplane import ControlPlane, free_port
from dynamo_pool_operator.operator import REPORTING_CONTROLLER
from dynamo_pool_operator.pool.controller import CONTROLLER_NAME
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.leader import LeaderElector, format_micro_time
from dynamo_pool_operator.runtime.objects.resources import LEASES
from dynamo_pool_operator.runtime.registry import REGISTRY
from tests.harness import OPERATOR_AGENT, eventually
from tests.integration.support.export_fixtures import config, events_for
from tests.integration.support.race_fixtures import FRONTEND_SVC, deny_export_writes, make_pool
from tests.integration.support.relay_fixtures import RELAYS, relay_body
from tests.integration.support.under_test import run_until_leading

pytestmark = pytest.mark.timeout(240)

LEASE = "dpo-leadership"
WORKERS = 4
BACKLOG = 1000


def leader_config(namespace: str, **sections: Any) -> Any:
    """One namespace, leader election on with a 1 s retry (so a stolen Lease is seen
    within about a second), no listeners unless asked."""
    doc: dict[str, Any] = {
        "namespace": {"restricted": namespace},
        "leaderElection": {
            "enabled": True,
            "namespace": namespace,
            "name": LEASE,
            "leaseDuration": "4s",
            "renewDeadline": "3s",
            "retryPeriod": "1s",
        },
        "server": {"metricsAddress": "0", "healthProbeAddress": "0"},
        "controller": {"workers": WORKERS},
    }
    doc.update(sections)
    return config("mcs", **doc)


def sample(name: str, labels: dict[str, str]) -> float:
    """A sample of the process-wide registry `process.run` reports to."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


def reconciled() -> float:
    return sum(
        sample("controller_runtime_reconcile_total", {"controller": CONTROLLER_NAME, "result": r})
        for r in ("success", "error", "requeue_after")
    )


def emitted_export_failures() -> float:
    return sample("events_emitted_total", {"type": "Warning", "reason": "ExportFailed"})


async def until(probe: Callable[[], bool], timeout: float, what: str) -> None:
    async def check() -> bool:
        return probe()

    try:
        await eventually(check, timeout=timeout, interval=0.01)
    except AssertionError as e:
        raise AssertionError(what) from e


def stamp(event: AuditEvent, key: str) -> datetime:
    return datetime.fromisoformat(event.raw[key].replace("Z", "+00:00"))


async def operator_writes(cp: ControlPlane, since: int, namespace: str) -> list[AuditEvent]:
    """The operator's writes in `namespace`, in the order the server finished them."""
    writes = await asyncio.to_thread(cp.audit.writes, since, user_agent_prefix=OPERATOR_AGENT)
    return [w for w in writes if w.namespace == namespace]


def lease_writes(writes: list[AuditEvent]) -> list[AuditEvent]:
    return [w for w in writes if w.resource == "leases" and w.name == LEASE]


# ---------------------------------------------------------------- handover
async def test_a_stopping_leader_with_a_backlog_of_1000_keys_hands_over_in_seconds(
    control_plane: ControlPlane, client: Client, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """1,000 relays are queued when the leader is told to stop (SIGTERM): it finishes
    only the reconciles in flight (about one per worker), writes its Events,
    releases the Lease, and a waiting successor acquires it at its next retry.
    Measured from the stop to the successor leading. (Before: the leader worked
    through the whole backlog first; with enough of it the pod's grace period ran out
    before the release and the successor waited out the Lease.)"""
    caplog.set_level(logging.INFO)
    sem = asyncio.Semaphore(16)

    async def create(i: int) -> None:
        async with sem:
            await client.create(RELAYS, relay_body(f"r{i:04d}", namespace))

    await asyncio.gather(*(create(i) for i in range(BACKLOG)))

    before = reconciled()
    stop, task = await run_until_leading(leader_config(namespace), control_plane, caplog, 60)
    cfg = load_kubeconfig(control_plane.kubeconfig)
    async with Client(cfg, user_agent="dpo-tests-successor") as successor_client:
        successor = LeaderElector(
            successor_client,
            namespace=namespace,
            name=LEASE,
            identity="successor",
            lease_duration=1,
            renew_deadline=0.5,
            retry_period=0.1,
            registry=CollectorRegistry(),
        )
        acquired = asyncio.create_task(successor.acquire())
        try:
            await until(lambda: reconciled() - before >= 20, 60, "the leader reconciles")
            await asyncio.sleep(0.3)  # the successor has tried, and waits
            assert not acquired.done(), "the successor took a Lease that was held"
            at_stop = reconciled() - before
            assert at_stop < BACKLOG / 2, f"{at_stop:.0f} of {BACKLOG} done: no backlog left"
            stopped_at = time.monotonic()
            stop.set()
            await asyncio.wait_for(acquired, 60)
            handover = time.monotonic() - stopped_at
            code = await asyncio.wait_for(task, 30)
        finally:
            stop.set()
            acquired.cancel()
    after_stop = reconciled() - before - at_stop
    print(
        f"handover with {BACKLOG - at_stop:.0f} keys queued: {handover:.2f} s, "
        f"{after_stop:.0f} reconciles finished after the stop"
    )
    assert code == process.EXIT_OK
    # One in flight per worker, plus the few a worker may take while the stop signal
    # travels from the signal handler to the queue (a handful of loop turns): far
    # from the backlog, which the successor reconciles.
    assert after_stop <= 3 * WORKERS, f"{after_stop:.0f} reconciles finished after the stop"
    assert handover < 10, f"handover took {handover:.1f}s"


# ---------------------------------------------------------------- writes after leadership
async def pool_with_repeating_warning(
    cp: ControlPlane, client: Client, namespace: str, caplog: pytest.LogCaptureFixture
) -> tuple[asyncio.Event, asyncio.Task[int], float]:
    """A leading operator whose pool's frontend export is refused by the API server, so
    the reconcile fails and retries, each time emitting the same ExportFailed Warning:
    an Event whose later repeats wait in memory for the heartbeat (or the stop)."""
    await make_pool(client, namespace)
    before = emitted_export_failures()
    stop, task = await run_until_leading(leader_config(namespace), cp, caplog, 60)
    await until(lambda: emitted_export_failures() - before >= 4, 30, "repeated ExportFailed")

    async def patched_once() -> bool:
        events = await events_for(client, namespace, "ExportFailed")
        return any((e.get("series") or {}).get("count", 1) >= 2 for e in events)

    await eventually(patched_once, timeout=20)
    return stop, task, before


def series_count(events: list[dict[str, Any]]) -> int:
    """Occurrences written, over the operator's Events of one warning. The relay is named
    at the version read, and the first pass's status write makes a new version: the
    warning may be two series (one Event each), never more."""
    ours = [e for e in events if e.get("reportingController") == REPORTING_CONTROLLER]
    assert 1 <= len(ours) <= 2, ours
    return sum(int((e.get("series") or {}).get("count") or 1) for e in ours)


async def test_a_stopping_leader_writes_its_events_before_the_release_and_nothing_after(
    control_plane: ControlPlane, client: Client, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """On a clean stop the pending repeats of a series are written while the Lease is
    still held; the release is the operator's last write. (Before, the recorder
    flushed after the release: the successor could already be writing.)"""
    caplog.set_level(logging.INFO)
    since = control_plane.audit.offset()
    async with deny_export_writes(control_plane, client, namespace, FRONTEND_SVC, "CREATE"):
        stop, task, before = await pool_with_repeating_warning(
            control_plane, client, namespace, caplog
        )
        stop.set()
        code = await asyncio.wait_for(task, 30)
        emitted = emitted_export_failures() - before
        flushed = series_count(await events_for(client, namespace, "ExportFailed"))
    assert code == process.EXIT_OK
    writes = await operator_writes(control_plane, since, namespace)
    leases = lease_writes(writes)
    release = leases[-1]
    assert release.verb == "update"
    assert release.code == 200
    last = writes[-1]
    late = [
        (w.verb, w.resource, w.name)
        for w in writes
        if stamp(w, "requestReceivedTimestamp") > stamp(release, "stageTimestamp")
    ]
    assert late == [], f"written after the Lease was released: {late}"
    assert last is release, f"the last write was {(last.verb, last.resource, last.name)}"
    assert flushed == emitted, "the stop wrote the latest count of the series"


async def test_a_leader_whose_lease_is_taken_writes_nothing_more(
    control_plane: ControlPlane, client: Client, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Another holder takes the Lease. At its next renewal the leader sees it, cancels
    its reconciles, drops the Events it has not written (counted) and exits 1. Only a
    request already on the wire may land after the moment it noticed (there is no
    fencing); nothing is written later, the Events' pending repeats included. (Before,
    the recorder flushed them on the way out.)"""
    caplog.set_level(logging.INFO)
    since = control_plane.audit.offset()
    dropped_before = sample("events_dropped_total", {"reason": "not_leader"})
    async with deny_export_writes(control_plane, client, namespace, FRONTEND_SVC, "CREATE"):
        _, task, before = await pool_with_repeating_warning(
            control_plane, client, namespace, caplog
        )
        lease = await client.get(LEASES, LEASE, namespace)
        now = datetime.now(UTC)
        lease["spec"].update(
            holderIdentity="thief",
            leaseDurationSeconds=60,
            acquireTime=format_micro_time(now),
            renewTime=format_micro_time(now),
        )
        await client.replace(LEASES, lease)
        code = await asyncio.wait_for(task, 30)
        noticed = [r.created for r in caplog.records if r.getMessage().startswith("lost lease")]
        emitted = emitted_export_failures() - before
        written = series_count(await events_for(client, namespace, "ExportFailed"))
    assert code == process.EXIT_FAILURE
    assert len(noticed) == 1
    noticed_at = datetime.fromtimestamp(noticed[0], UTC)
    writes = await operator_writes(control_plane, since, namespace)
    late = [
        (w.verb, w.resource, w.name, w.code)
        for w in writes
        if stamp(w, "requestReceivedTimestamp") > noticed_at + timedelta(seconds=0.5)
    ]
    assert late == [], f"written after the Lease was lost: {late}"
    assert written < emitted, f"the pending repeats were written ({written} of {emitted})"
    assert sample("events_dropped_total", {"reason": "not_leader"}) > dropped_before


# ---------------------------------------------------------------- liveness
async def test_healthz_checks_that_the_controller_has_its_workers(
    control_plane: ControlPlane, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The liveness probe includes the controller's workers (see docs/runtime.md)."""
    caplog.set_level(logging.INFO)
    port = free_port()
    cfg = leader_config(
        namespace, server={"metricsAddress": "0", "healthProbeAddress": f"127.0.0.1:{port}"}
    )
    stop, task = await run_until_leading(cfg, control_plane, caplog, 60)
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{port}/healthz") as resp,
        ):
            status, text = resp.status, await resp.text()
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 30)
    assert code == process.EXIT_OK
    assert status == 200
    assert "[+]workers ok" in text, text
