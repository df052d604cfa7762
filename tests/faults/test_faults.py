"""The fault suite: real faults, two operator replicas as processes, one promise.

Each test runs a fleet of 30 pools (two user-owned exports among them) under two
`dynamo-pool-operator run` processes with leader election and exactly the shipped
RBAC, injects one fault through the real control plane, and then changes nothing
else. After the fault:

1. the fleet converges (every relay object, export and status as desired; the
   user's exports untouched, same uid and resourceVersion);
2. the audit log shows no write by any replica to anything it does not own — a
   user's export, another resource, another namespace — whatever its answer;
3. once converged, the replicas go quiet: a window with no write but Lease renewals.

Faults: the leader SIGKILLed mid cold start; kube-apiserver and etcd SIGKILLed
mid-reconcile; both replicas frozen while the API server restarts and events they
never see are compacted away (a real 410 relist); an admission webhook answering 500,
then 429 with Retry-After; an RBAC permission withheld then given back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from dynamo_pool_operator.localcluster.audit import AuditEvent
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.rbac import MANAGER_NAME as MANAGER
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, EVENTS, LEASES
from tests.faults.fleet import EXPORTS, FLEET_SIZE, SELF_REVIEWS, Fleet
from tests.faults.replicas import GROUP, LEASE_NAME, USER_PREFIX, LeaseTiming, Replica, Replicas
from tests.faults.webhook import Mode, Webhook
from tests.harness import eventually

#: Seconds; a 2-core machine under a full test run is slow. About 0.4 s per pool
#: beyond the default 30 (a cold start of 1,000 pools takes ~40 s here, see
#: docs/performance.md, but a fault adds retries and backoff).
CONVERGE = 120.0 + 0.4 * max(FLEET_SIZE - 30, 0)

pytestmark = pytest.mark.timeout(240 + 3 * (CONVERGE - 120))


async def replica_writes(cp: ControlPlane, since: int) -> list[AuditEvent]:
    writes = await asyncio.to_thread(cp.audit.writes, since)
    return [w for w in writes if w.user.startswith(USER_PREFIX)]


async def leader(admin: Client, reps: list[Replica], ns: str) -> Replica:
    """The replica whose current process holds the Lease."""

    async def probe() -> Replica | None:
        lease = await admin.get(LEASES, LEASE_NAME, ns)
        holder = lease["spec"].get("holderIdentity")
        return next((r for r in reps if holder and r.identity() == holder), None)

    found: Replica = await eventually(probe, timeout=60)
    return found


async def converges(fleet: Fleet, what: str) -> None:
    try:
        await eventually(fleet.converged, timeout=CONVERGE, interval=0.5)
    except AssertionError:
        pytest.fail(f"{what}: not converged in {CONVERGE}s: {await fleet.problems()}")


async def owns_only_what_it_should(cp: ControlPlane, fleet: Fleet, since: int) -> list[AuditEvent]:
    writes = await replica_writes(cp, since)
    assert writes, "the replicas wrote nothing: the audit check would prove nothing"
    assert fleet.foreign_writes(writes, LEASE_NAME) == []
    return writes


async def then_quiet(cp: ControlPlane, fleet: Fleet, seconds: float = 4.0) -> None:
    """Converged means done: within 40 s the replicas have a `seconds` window with no
    write but the Lease, and the check ends there.

    Not the first window: convergence is read from the server, and a leader that kept
    its lease through an apiserver restart may still act on caches that have not
    relisted yet (exclusive creates answered 409, a status patch) for a second or two.
    A write loop never goes quiet and fails. Events about what happened *before* a
    window are allowed in it: a failure recorded while the apiserver was down is written
    when it is back (the recorder retries), and its Event says when it was observed.
    """
    await asyncio.sleep(1.0)  # the last status write may still be on its way
    new: list[AuditEvent] = []
    events: dict[str, dict[str, Any]] = {}
    for _ in range(10):
        since = await asyncio.to_thread(cp.audit.sync)
        window_start = datetime.now(UTC)
        await asyncio.sleep(seconds)
        extra = [w for w in await replica_writes(cp, since) if w.resource != "leases"]
        listed = await fleet.client.list(EVENTS, fleet.namespace)
        events = {e["metadata"]["name"]: e for e in listed.items}

        def late_news(
            w: AuditEvent, start: datetime = window_start, events: dict[str, Any] = events
        ) -> bool:
            event = events.get(w.name)
            if w.resource != "events" or event is None:
                return False
            observed = (event.get("series") or {}).get("lastObservedTime") or event["eventTime"]
            return datetime.fromisoformat(observed) < start

        new = [w for w in extra if not late_news(w)]
        if not new:
            return
    what = [
        f"{w.verb} {w.resource} {w.name} {w.code} {(events.get(w.name) or {}).get('note', '')}"
        for w in new
    ]
    pytest.fail(f"never quiet after convergence; last window: {len(new)} writes: {what[:20]}")


def received(w: AuditEvent) -> datetime:
    return datetime.fromisoformat(w.raw["requestReceivedTimestamp"])


async def started(
    reps: Replicas, admin: Client, ns: str, timing: LeaseTiming | None = None
) -> Replica:
    reps.start(timing)
    return await leader(admin, reps.all, ns)


async def poll_until(probe: Callable[[], Awaitable[Any]], timeout: float = 60) -> Any:
    return await eventually(probe, timeout=timeout, interval=0.05)


# ---------------------------------------------------------------------- process faults
async def test_leader_killed_mid_cold_start_the_follower_takes_over_and_converges(
    fault_cp: ControlPlane, admin: Client, fleet: Fleet, replicas: Replicas
) -> None:
    since = fault_cp.audit.offset()
    first = await started(replicas, admin, fleet.namespace)
    follower = next(r for r in replicas.all if r is not first)
    await fleet.create()
    done_at_kill = await poll_until(fleet.count_ours)
    killed_at = datetime.now(UTC)
    first.kill()
    assert done_at_kill < len(fleet.expected_exports()), "killed too late to be mid-run"

    await converges(fleet, "after the leader was killed")
    assert (await leader(admin, replicas.all, fleet.namespace)) is follower
    writes = await owns_only_what_it_should(fault_cp, fleet, since)
    # Only the leader writes: the follower wrote nothing but Lease attempts (and the
    # review of its own RBAC at start, which stores nothing) until the leader died (its
    # first write comes after the kill, once the lease expired).
    early = [
        w for w in writes if w.user == follower.user and w.resource not in ("leases", *SELF_REVIEWS)
    ]
    assert early
    assert min(received(w) for w in early) > killed_at
    await then_quiet(fault_cp, fleet)


@pytest.mark.parametrize("component", ["kube-apiserver", "etcd"])
async def test_control_plane_killed_mid_reconcile_converges_with_no_other_change(
    fault_cp: ControlPlane, admin: Client, fleet: Fleet, replicas: Replicas, component: str
) -> None:
    since = fault_cp.audit.offset()
    await started(replicas, admin, fleet.namespace)
    await fleet.create()
    await poll_until(fleet.count_ours)
    if component == "etcd":
        await asyncio.to_thread(fault_cp.restart_etcd, 1.0, kill=True)
    else:
        await asyncio.to_thread(fault_cp.restart_apiserver, 1.0, kill=True)

    await converges(fleet, f"after {component} was killed")
    await owns_only_what_it_should(fault_cp, fleet, since)
    await then_quiet(fault_cp, fleet)


async def test_events_missed_while_frozen_and_compacted_away_are_recovered_by_a_relist(
    fault_cp: ControlPlane, admin: Client, fleet: Fleet, replicas: Replicas
) -> None:
    since = fault_cp.audit.offset()
    # A lease long enough that the freeze does not cost the leadership: this test is
    # about the watch, and a restarted process would list afresh instead of relisting.
    lead = await started(replicas, admin, fleet.namespace, LeaseTiming(60, 45, 2))
    await fleet.create()
    await converges(fleet, "cold start")

    for r in replicas.all:
        r.freeze()
    try:
        await asyncio.to_thread(fault_cp.restart_apiserver)  # the replicas' watches break
        await fleet.delete_export("p03-frontend")
        await fleet.rename_chat("p04", "Talk")
        await fleet.delete_dgd("p05")
        await asyncio.to_thread(fault_cp.compact_etcd)  # what they missed is gone
    finally:
        for r in replicas.all:
            r.thaw()

    await converges(fleet, "after the relist")
    assert [r.restarts for r in replicas.all] == [0, 0], "a restart would hide the relist"
    assert "failed, relisting" in lead.log_text()
    await owns_only_what_it_should(fault_cp, fleet, since)
    await then_quiet(fault_cp, fleet)


# ---------------------------------------------------------------------- refused writes
async def test_writes_failing_with_500_from_a_webhook_converge_once_it_answers_again(
    fault_cp: ControlPlane, admin: Client, fleet: Fleet, replicas: Replicas
) -> None:
    since = fault_cp.audit.offset()
    with Webhook(fault_cp, fleet.namespace, GROUP) as hook:
        hook.set(Mode.FAIL_500)
        await started(replicas, admin, fleet.namespace)
        await fleet.create()
        await poll_until(lambda: _at_least(hook.refused(Mode.FAIL_500), 3 * fleet.size))
        assert await fleet.count_ours() == 0
        assert (await admin.list(DEPLOYMENTS, fleet.namespace)).items == []

        hook.set(Mode.ALLOW)
        await converges(fleet, "after the webhook recovered")
    writes = await owns_only_what_it_should(fault_cp, fleet, since)
    assert any(w.code == 500 for w in writes), "the refusals should be in the audit log"
    await then_quiet(fault_cp, fleet)


async def test_a_429_with_retry_after_is_honoured_and_converges_when_lifted(
    fault_cp: ControlPlane, admin: Client, fleet: Fleet, replicas: Replicas
) -> None:
    retry_after = 2
    since = fault_cp.audit.offset()
    with Webhook(fault_cp, fleet.namespace, GROUP, retry_after=retry_after) as hook:
        hook.set(Mode.THROTTLE_429)
        lead = await started(replicas, admin, fleet.namespace)
        # The fault is real: the API server itself answers 429 and says when to retry
        # (a probe user in the replicas' group, so RBAC lets it reach admission).
        probe_config = load_kubeconfig(fault_cp.user_kubeconfig("probe-429", groups=(GROUP,)))
        async with Client(probe_config, max_retries=0) as probe:
            with pytest.raises(errors.TooManyRequests) as refused:
                await probe.create(EXPORTS, _export("probe", fleet.namespace))
        assert refused.value.retry_after == retry_after

        await fleet.create()
        await poll_until(lambda: _at_least(hook.refused(), 1))
        window_start, refused_before = time.monotonic(), hook.refused()
        await asyncio.sleep(8)
        refused_in_window = hook.refused() - refused_before
        window = time.monotonic() - window_start
        # Every request waits Retry-After between attempts: at most one refused request
        # per request in flight per `retry_after` seconds (+1 each). A worker sends at
        # most 3 at once for a new pool of two frontends: the Deployment and the two
        # frontends' exports (nothing orders them), then the Service, then its export.
        in_flight = 4 * 3
        assert refused_in_window <= in_flight * (window / retry_after + 1), refused_in_window
        assert lead.restarts == 0

        hook.set(Mode.ALLOW)
        await converges(fleet, "after the throttling was lifted")
    await owns_only_what_it_should(fault_cp, fleet, since)
    await then_quiet(fault_cp, fleet)


async def test_a_withheld_permission_is_reported_and_converges_once_given_back(
    fault_cp: ControlPlane, admin: Client, fleet: Fleet, replicas: Replicas
) -> None:
    since = fault_cp.audit.offset()
    await started(replicas, admin, fleet.namespace)
    manager_role = f"/clusterroles/{MANAGER}-{fleet.namespace}"
    role_path = next(p for p in replicas.rbac_paths if p.endswith(manager_role))
    _, role = await asyncio.to_thread(fault_cp.request, "GET", role_path)
    role["metadata"].pop("resourceVersion")
    await asyncio.to_thread(
        fault_cp.request, "PUT", role_path, _without_verb(role, "serviceexports", "create")
    )

    await fleet.create()

    async def reported() -> bool:
        events = (await admin.list(EVENTS, fleet.namespace)).items
        return sum(1 for e in events if e.get("reason") == "ExportFailed") >= fleet.size

    await eventually(reported, timeout=CONVERGE)
    assert await fleet.count_ours() == 0
    await asyncio.to_thread(fault_cp.request, "PUT", role_path, role)  # given back

    await converges(fleet, "after the permission was given back")
    await owns_only_what_it_should(fault_cp, fleet, since)
    await then_quiet(fault_cp, fleet)


# ---------------------------------------------------------------------- helpers
def _at_least(value: int, n: int) -> Awaitable[bool]:
    async def check() -> bool:
        return value >= n

    return check()


def _export(name: str, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": EXPORTS.api_version,
        "kind": EXPORTS.kind,
        "metadata": {"name": name, "namespace": ns},
    }


def _without_verb(role: dict[str, Any], resource: str, verb: str) -> dict[str, Any]:
    rules = []
    for rule in role["rules"]:
        rule = dict(rule)
        if resource in rule.get("resources", []):
            rule["verbs"] = [v for v in rule["verbs"] if v != verb]
        rules.append(rule)
    return {**role, "rules": rules}
