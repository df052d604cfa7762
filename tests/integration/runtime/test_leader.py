"""Lease-based leader election against the real coordination.k8s.io/v1 Lease.

Short durations keep it fast: lease 2 s, renew deadline 1.5 s, retry 0.4 s (each retry
jittered up to +120 %, so up to 0.88 s). Every 50 ms a monitor asks both electors
whether they lead; they must never both say yes.

The test where the leader loses the API server restarts kube-apiserver, so it runs on a
private control plane of this module (no GC, no CRDs), never the shared one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.leader import LeaderElector, LeadershipLost
from dynamo_pool_operator.runtime.objects.resources import LEASES
from tests.harness import eventually

LEASE = 2.0
RENEW = 1.5
RETRY = 0.4
JITTER = 1.2
#: The longest a follower can sleep between two attempts.
MAX_RETRY = RETRY * (1 + JITTER)


def _elector(client: Client, ns: str, identity: str, *, release: bool) -> LeaderElector:
    return LeaderElector(
        client,
        namespace=ns,
        name="runtime-test",
        identity=identity,
        lease_duration=LEASE,
        renew_deadline=RENEW,
        retry_period=RETRY,
        jitter_factor=JITTER,
        release_on_cancel=release,
        registry=CollectorRegistry(),
    )


class Monitor:
    """Samples every elector's `is_leader` every 50 ms and keeps every sample where more
    than one believed it leads."""

    def __init__(self) -> None:
        self.electors: list[LeaderElector] = []
        self.both: list[tuple[float, list[str]]] = []
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            leaders = [e.identity for e in self.electors if e.is_leader]
            self.samples += 1
            if len(leaders) > 1:
                self.both.append((time.monotonic(), leaders))
            await asyncio.sleep(0.05)

    def leader(self) -> LeaderElector | None:
        leaders = [e for e in self.electors if e.is_leader]
        return leaders[0] if len(leaders) == 1 else None

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[Monitor]:
        self._task = asyncio.create_task(self._run())
        try:
            yield self
        finally:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def _forever() -> None:
    await asyncio.Event().wait()


def _parse(micro_time: str) -> datetime:
    return datetime.fromisoformat(micro_time.replace("Z", "+00:00"))


async def _lease(client: Client, ns: str) -> dict[str, Any]:
    spec: dict[str, Any] = (await client.get(LEASES, "runtime-test", ns))["spec"]
    return spec


async def test_two_electors_never_both_lead_and_failover_follows_a_killed_leader_within_the_lease(
    control_plane: ControlPlane, namespace: str
) -> None:
    """Two contenders start together: exactly one leads. Its task is then killed without
    releasing the lease; the other takes over only after the old leader's renew deadline
    (server timestamps) and within lease duration + two retry periods of the kill. A
    third contender then waits while the new leader stops cleanly: the release hands the
    lease over within about one retry period. The server counts 2 transitions, and at
    no 50 ms sample did two electors believe they lead."""
    cfg = load_kubeconfig(control_plane.kubeconfig)
    async with (
        Client(cfg, user_agent="elector-a") as ca,
        Client(cfg, user_agent="elector-b") as cb,
        Client(cfg, user_agent="elector-c") as cc,
    ):
        a = _elector(ca, namespace, "a", release=False)
        b = _elector(cb, namespace, "b", release=False)
        monitor = Monitor()
        monitor.electors += [a, b]
        async with monitor.watching():
            tasks = {e.identity: asyncio.create_task(e.run(_forever)) for e in (a, b)}

            async def one_leads() -> LeaderElector | None:
                return monitor.leader()

            leader: LeaderElector = await eventually(one_leads, timeout=5)
            follower = b if leader is a else a
            # Both stay in the race: the follower keeps trying through a few renewals.
            await asyncio.sleep(3 * RETRY)
            assert monitor.leader() is leader
            spec = await _lease(ca, namespace)
            assert spec["holderIdentity"] == leader.identity
            assert spec["leaseTransitions"] == 0

            # Kill the leader: no release, the lease just stops being renewed.
            tasks[leader.identity].cancel()
            killed_at = time.monotonic()
            await asyncio.wait({tasks[leader.identity]})
            assert not leader.is_leader
            last_renew = _parse((await _lease(ca, namespace))["renewTime"])

            async def follower_leads() -> bool:
                return follower.is_leader

            await eventually(follower_leads, timeout=LEASE + 3 * MAX_RETRY)
            failover = time.monotonic() - killed_at
            assert failover <= LEASE + 2 * MAX_RETRY + 0.5, f"failover took {failover:.2f}s"
            spec = await _lease(cb, namespace)
            assert spec["holderIdentity"] == follower.identity
            assert spec["leaseTransitions"] == 1
            # Safety: the successor started only after the old leader had stopped believing
            # it leads (renew deadline after its last renewal). In practice it waits about
            # the lease duration from when it saw that renewal.
            waited = (_parse(spec["acquireTime"]) - last_renew).total_seconds()
            assert waited >= RENEW, f"took over {waited:.2f}s after the last renewal"

            # A new contender waits; the leader stops cleanly and releases.
            c = _elector(cc, namespace, "c", release=False)
            monitor.electors.append(c)
            tasks["c"] = asyncio.create_task(c.run(_forever))
            await asyncio.sleep(2 * MAX_RETRY)
            assert not c.is_leader, "c took a lease that was being renewed"
            follower.release_on_cancel = True  # this one stops cleanly
            tasks[follower.identity].cancel()
            stopped_at = time.monotonic()
            await asyncio.wait({tasks[follower.identity]})

            async def c_leads() -> bool:
                return c.is_leader

            await eventually(c_leads, timeout=LEASE + 2 * MAX_RETRY)
            handover = time.monotonic() - stopped_at
            assert handover <= MAX_RETRY + 0.6, f"handover after release took {handover:.2f}s"
            spec = await _lease(cc, namespace)
            assert spec["holderIdentity"] == "c"
            assert spec["leaseTransitions"] == 2

            tasks["c"].cancel()
            await asyncio.wait({tasks["c"]})
        assert monitor.samples > 100
        assert monitor.both == [], f"two leaders at once: {monitor.both}"


@pytest.fixture(scope="module")
def private_cp(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A control plane of this module's own, so a restart disturbs no other test."""
    from dynamo_pool_operator.localcluster.assets import resolve

    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        assets = resolve()
    cp = ControlPlane(assets=assets, garbage_collector=False)
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


async def test_leader_that_cannot_renew_stops_leading_within_the_renew_deadline_and_writes_no_more(
    private_cp: ControlPlane,
) -> None:
    """The API server goes away for ~3 s (its shutdown, then 2 s down). The leader's
    renewals fail, and no later than the renew deadline after the start of its last
    successful renewal it stops believing it leads (well before the lease could expire
    for a follower), cancels its work and raises LeadershipLost. After the server is
    back, the audit log shows no write from it."""
    cp = private_cp
    ns = f"p-{uuid.uuid4().hex[:10]}"
    cp.create_namespace(ns)
    work_cancelled = asyncio.Event()

    async def work() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            work_cancelled.set()

    async with Client(load_kubeconfig(cp.kubeconfig), user_agent="elector-lost") as c:
        elector = _elector(c, ns, "lost", release=True)
        run = asyncio.create_task(elector.run(work))
        await asyncio.wait_for(elector.leading.wait(), 5)
        await asyncio.sleep(2 * RETRY)  # a few renewals

        restart = asyncio.create_task(asyncio.to_thread(cp.restart_apiserver, 2.0))
        last_believed: datetime | None = None  # wall time of the last sample saying "leader"
        while not run.done():  # bounded: run ends by the renew deadline or the check below
            if elector.is_leader:
                last_believed = datetime.now(UTC)
            assert not restart.done(), "still leading after the server was back"
            await asyncio.sleep(0.05)
        audit_offset = cp.audit.offset()
        with pytest.raises(LeadershipLost):
            run.result()
        assert work_cancelled.is_set()
        assert elector.lost.is_set()
        assert not elector.is_leader
        await restart

        spec = await _lease(c, ns)
    assert spec["holderIdentity"] == "lost", "the lease was not released: it expires"
    assert last_believed is not None
    after_renewal = (last_believed - _parse(spec["renewTime"])).total_seconds()
    assert after_renewal < RENEW + 0.02, f"believed it led {after_renewal:.2f}s after renewing"
    await asyncio.sleep(RETRY)  # time for a stray renewal to show up, were there one
    late = await asyncio.to_thread(cp.audit.writes, audit_offset, user_agent_prefix="elector-lost")
    assert late == [], f"wrote after losing the lease: {late}"
