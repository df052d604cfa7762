"""The report phase (poolrelay/status.report): what a pass comes to, computed purely.

From a snapshot, its plan and what the writes came to, `report` gives the status to
write, whether it differs from what the relay shows, the Events of its transitions,
the failures to raise and when to look again. Each case here runs the real plan and
the real export contributor on hand-made cached objects: no server, no stubs.
"""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from dynamo_pool_operator.api.dgd import Pool, pool_from_object
from dynamo_pool_operator.api.mcs import ClusterID, Implementation, serviceexports
from dynamo_pool_operator.api.relay import Relay, RelayDefaults, relay_from_object
from dynamo_pool_operator.api.status import (
    ConditionType,
    ExportedReason,
    PublishedReason,
    RelayAvailableReason,
    Status,
)
from dynamo_pool_operator.exports.contributor import ExportCaches, PoolExports
from dynamo_pool_operator.pipeline.model import (
    ActionResult,
    Contributor,
    Outcome,
    Result,
    Snapshot,
    Verb,
)
from dynamo_pool_operator.poolrelay.objects import desired_objects
from dynamo_pool_operator.poolrelay.plan import Plan, make_plan
from dynamo_pool_operator.poolrelay.status import POOL_READY, StatusReport, report
from dynamo_pool_operator.runtime import errors
from dynamo_pool_operator.runtime.conditions import rfc3339
from dynamo_pool_operator.runtime.informer import Informer, InformerClient

NS, NAME, UID = "team", "pool", "relay-uid"
RELAY_SVC, FRONTEND = f"{NAME}-pool-relay", f"{NAME}-chat"
SE = serviceexports("v1beta1")
NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def make_relay(**spec: Any) -> Relay:
    meta = {"name": NAME, "namespace": NS, "uid": UID, "generation": 3, "resourceVersion": "7"}
    return relay_from_object({"metadata": meta, "spec": spec}, RelayDefaults("relay:1", 8090))


def make_pool(*, workers: bool = True) -> Pool:
    components = [{"name": "chat", "type": "frontend"}]
    if workers:
        components.append({"name": "w", "type": "worker"})
    return pool_from_object(
        {
            "apiVersion": "nvidia.com/v1beta1",
            "kind": "DynamoGraphDeployment",
            "metadata": {"name": NAME, "namespace": NS, "uid": "dgd-uid", "resourceVersion": "5"},
            "spec": {"components": components},
        }
    )


def exports_contributor() -> PoolExports:
    """The real export contributor, with caches that are never run (plan and report read
    only the snapshot)."""
    informer = Informer(cast("InformerClient", object()), SE)
    return PoolExports(
        ExportCaches(informer),
        resource=SE,
        implementation=Implementation.MCS,
        about_version=None,
    )


def running(kind: str, relay: Relay, cluster_id: ClusterID | None = None) -> dict[str, Any]:
    """The cached relay object as rendered, ours, and (a Deployment) fully available."""
    snap = Snapshot(relay, make_pool(), {}, cluster_id=cluster_id or ClusterID())
    obj = copy.deepcopy(desired_objects(snap)[kind])
    obj["metadata"].update(uid=f"{kind}-uid", resourceVersion="9", generation=2)
    obj["metadata"]["ownerReferences"] = [relay.owner_reference()]
    if kind == "Deployment":
        obj["status"] = {
            "observedGeneration": 2,
            "availableReplicas": 2,
            "updatedReplicas": 2,
            "replicas": 2,
        }
    return obj


def confirmed_export(name: str, relay: Relay) -> dict[str, Any]:
    return {
        "apiVersion": SE.api_version,
        "kind": SE.kind,
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"{name}-uid",
            "resourceVersion": "11",
            "generation": 1,
            "creationTimestamp": rfc3339(NOW - timedelta(hours=1)),
            "labels": {"nvidia.com/dynamo-graph-deployment-name": NAME},
            "ownerReferences": [relay.owner_reference()],
        },
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Exported"}]},
    }


def steady(relay: Relay) -> Snapshot:
    """A published pool whose relay runs and whose exports the implementation confirmed."""
    return Snapshot(
        relay,
        make_pool(),
        {"Deployment": running("Deployment", relay), "Service": running("Service", relay)},
        {n: confirmed_export(n, relay) for n in (RELAY_SVC, FRONTEND)},
        read_at=NOW,
    )


def run(
    snap: Snapshot,
    contributors: tuple[Contributor, ...],
    results: dict[tuple[str, str], tuple[Result, Exception | None]] | None = None,
) -> tuple[Plan, StatusReport]:
    """Plan, "execute" (each action done unless `results` says otherwise), report."""
    plan = make_plan(snap, contributors, default_discovery_backend="kubernetes")
    outcome = Outcome()
    for a in plan.actions:
        result, error = (results or {}).get((a.resource.kind, a.name), (Result.DONE, None))
        message = f"{a.verb} {a.resource.kind} {a.name}: {error}" if error else ""
        outcome.results.append(ActionResult(a, result, message, error))
    return plan, report(snap, plan, outcome, contributors, now=NOW)


def condition(said: StatusReport, type_: ConditionType) -> dict[str, Any]:
    (found,) = [c for c in said.status["conditions"] if c["type"] == type_]
    return dict(found)


def test_a_steady_pool_is_ready_and_a_status_that_shows_it_needs_no_write() -> None:
    relay, contributors = make_relay(), (exports_contributor(),)
    _, first = run(steady(relay), contributors)
    assert [c["type"] for c in first.status["conditions"]] == [
        "Published",
        "RelayAvailable",
        "Exported",
        "Ready",
    ]
    assert condition(first, ConditionType.READY)["status"] == Status.TRUE
    assert first.changed
    assert [(t.type, t.reason) for t in first.transitions] == [("Normal", POOL_READY)]
    assert (first.failures, first.recheck_at) == ((), None)
    again = dataclasses.replace(steady(relay), shown_status=first.status)
    _, second = run(again, contributors)
    assert second.status == first.status
    assert not second.changed
    assert second.transitions == ()


def test_without_an_implementation_there_is_no_exported_condition() -> None:
    _, said = run(steady(make_relay()), ())
    assert [c["type"] for c in said.status["conditions"]] == [
        "Published",
        "RelayAvailable",
        "Ready",
    ]
    assert said.status["exports"] == []


def test_a_refused_relay_write_is_a_failure_and_keeps_the_pool_not_ready() -> None:
    # The port changed since the relay objects were written: both are applied.
    snap = dataclasses.replace(steady(make_relay()), relay=make_relay(port=9100))
    refused = errors.Forbidden("denied by policy", status=403, reason="Forbidden")
    plan, said = run(
        snap,
        (exports_contributor(),),
        {("Service", RELAY_SVC): (Result.FAILED, refused)},
    )
    assert [(a.resource.kind, a.verb) for a in plan.relay_actions] == [
        ("Deployment", Verb.APPLY),
        ("Service", Verb.APPLY),
    ]
    assert said.failures == (refused,)
    available = condition(said, ConditionType.RELAY_AVAILABLE)
    assert (available["status"], available["reason"]) == (
        Status.FALSE,
        RelayAvailableReason.WRITE_REFUSED,
    )
    assert "denied by policy" in available["message"]
    assert condition(said, ConditionType.READY)["reason"] == RelayAvailableReason.WRITE_REFUSED
    # The refused write has its own Warning (the executor's): none for the condition.
    assert said.transitions == ()


def test_a_withdrawn_pool_warns_once_on_published_about_its_dgd() -> None:
    relay = make_relay()
    snap = dataclasses.replace(steady(relay), pool=make_pool(workers=False))
    _, said = run(snap, (exports_contributor(),))
    assert condition(said, ConditionType.PUBLISHED)["reason"] == PublishedReason.NO_WORKERS
    assert condition(said, ConditionType.EXPORTED)["reason"] == ExportedReason.WITHDRAWN
    warned = [(t.type, t.reason, t.action) for t in said.transitions]
    assert warned == [("Warning", PublishedReason.NO_WORKERS, ConditionType.PUBLISHED)]
    (published,) = said.transitions
    assert published.related == make_pool(workers=False).reference()


def test_an_unreadable_input_fails_a_published_pass_only() -> None:
    unreadable = errors.Reported("cannot read ClusterProperty")
    snap = dataclasses.replace(steady(make_relay()), unreadable=(unreadable,))
    _, said = run(snap, (exports_contributor(),))
    assert said.failures == (unreadable,)
    withdrawn = dataclasses.replace(snap, pool=make_pool(workers=False))
    _, said = run(withdrawn, (exports_contributor(),))
    assert said.failures == ()


def test_a_new_export_is_pending_and_rechecked_when_its_grace_period_ends() -> None:
    relay = make_relay()
    snap = steady(relay)
    snap = dataclasses.replace(snap, exports={RELAY_SVC: snap.exports[RELAY_SVC]})
    plan, said = run(snap, (exports_contributor(),))
    assert [(a.name, a.verb) for a in plan.actions if a.verb is Verb.CREATE] == [
        (FRONTEND, Verb.CREATE)
    ]
    exported = condition(said, ConditionType.EXPORTED)
    assert (exported["status"], exported["reason"]) == (Status.UNKNOWN, ExportedReason.PENDING)
    assert said.recheck_at == NOW + timedelta(seconds=60)


def test_the_effective_cluster_id_is_shown() -> None:
    prop = {"metadata": {"name": "cluster.clusterset.k8s.io"}, "spec": {"value": "east"}}
    snap = dataclasses.replace(steady(make_relay()), cluster_id=ClusterID(True, prop, "x/v1"))
    _, said = run(snap, (exports_contributor(),))
    assert said.status["clusterId"] == "east"


PROPERTY = {
    "metadata": {"name": "cluster.clusterset.k8s.io", "uid": "p", "resourceVersion": "2"},
    "spec": {"value": "east"},
}


def with_cluster_id(snap: Snapshot, cid: ClusterID, **spec: Any) -> Snapshot:
    """`snap` for a relay with `spec` on a cluster whose ID reads `cid`, its relay objects
    written for that (nothing to roll out)."""
    relay = make_relay(**spec)
    written = ClusterID() if cid.unreadable else cid  # as an earlier pass wrote them
    objects = {kind: running(kind, relay, written) for kind in ("Deployment", "Service")}
    return dataclasses.replace(snap, cluster_id=cid, relay=relay, relay_objects=objects)


def test_cluster_id_matched_says_whether_discovery_can_join_the_pool() -> None:
    from dynamo_pool_operator.api.status import ClusterIDMatchedReason as R

    readable = ClusterID(True, PROPERTY, "about.k8s.io/v1alpha1")
    cases = [
        (readable, {}, Status.TRUE, R.FROM_CLUSTER_PROPERTY),
        (readable, {"clusterId": "east"}, Status.TRUE, R.MATCHED),
        (readable, {"clusterId": "west"}, Status.FALSE, R.CLUSTER_ID_MISMATCH),
        (ClusterID(True, None, "x/v1"), {"clusterId": "west"}, Status.TRUE, R.NO_CLUSTER_PROPERTY),
        (
            ClusterID(True, None, "x/v1", "cannot read"),
            {},
            Status.UNKNOWN,
            R.CLUSTER_PROPERTY_UNREADABLE,
        ),
    ]
    for cid, spec, status, reason in cases:
        snap = with_cluster_id(steady(make_relay()), cid, **spec)
        _, said = run(snap, (exports_contributor(),))
        got = condition(said, ConditionType.CLUSTER_ID_MATCHED)
        assert (got["status"], got["reason"]) == (status, reason), (spec, got)
        ready = condition(said, ConditionType.READY)
        assert (ready["status"] == Status.TRUE) == (status == Status.TRUE), ready
    _, unchecked = run(steady(make_relay()), (exports_contributor(),))
    assert "ClusterIDMatched" not in [c["type"] for c in unchecked.status["conditions"]]


def test_a_mismatch_names_both_ids_and_is_ready_s_reason() -> None:
    snap = with_cluster_id(
        steady(make_relay()), ClusterID(True, PROPERTY, "about.k8s.io/v1alpha1"), clusterId="west"
    )
    _, said = run(snap, (exports_contributor(),))
    ready = condition(said, ConditionType.READY)
    assert ready["reason"] == "ClusterIDMismatch"
    assert "'west'" in ready["message"]
    assert "'east'" in ready["message"]
    # The plan's advisory warns (a series about the ClusterProperty): no second Warning.
    assert [t.reason for t in said.transitions if t.type == "Warning"] == []


def test_an_unreadable_cluster_id_keeps_the_last_known_one_and_says_so() -> None:
    unreadable = ClusterID(True, None, "about.k8s.io/v1alpha1", "cannot read ClusterProperty")
    snap = dataclasses.replace(
        steady(make_relay()), cluster_id=unreadable, shown_status={"clusterId": "east"}
    )
    _, said = run(snap, (exports_contributor(),))
    assert said.status["clusterId"] == "east"
    matched = condition(said, ConditionType.CLUSTER_ID_MATCHED)
    assert matched["message"] == (
        "cannot read ClusterProperty; the relay keeps its last known cluster ID 'east'"
    )
    never = dataclasses.replace(snap, shown_status=None)
    _, said = run(never, (exports_contributor(),))
    assert "clusterId" not in said.status, "unknown is left out, never written as empty"
    assert condition(said, ConditionType.CLUSTER_ID_MATCHED)["message"].endswith(
        "no cluster ID is known yet: the relay Deployment waits for it"
    )
