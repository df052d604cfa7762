"""The report phase (pool/status.report): what a pass comes to, computed purely.

From a snapshot, its plan and what the writes came to, `report` gives the status to
write, whether it differs from what the relay shows, the Events of its transitions,
the failures to raise and when to look again. Each case here runs the real plan and
the real export rules on hand-made cached objects: no server, no stubs.
"""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from dynamo_pool_operator.api.conditions import (
    ConditionType,
    ExportedReason,
    PublishedReason,
    RelayAvailableReason,
    Status,
)
from dynamo_pool_operator.api.dgd import Pool, pool_from_object
from dynamo_pool_operator.api.event_reasons import ExportWarning
from dynamo_pool_operator.api.mcs import ClusterID, Implementation, serviceexports
from dynamo_pool_operator.api.relay import Relay, RelayDefaults, relay_from_object
from dynamo_pool_operator.pool.execute import waiting_for
from dynamo_pool_operator.pool.exports.feature import ExportCaches, PoolExports
from dynamo_pool_operator.pool.exports.plan import ExportRules
from dynamo_pool_operator.pool.model import (
    ActionResult,
    Outcome,
    Result,
    Snapshot,
    Verb,
)
from dynamo_pool_operator.pool.plan import Plan, make_plan
from dynamo_pool_operator.pool.relay.objects import desired_objects
from dynamo_pool_operator.pool.report import POOL_READY, StatusReport, report
from dynamo_pool_operator.runtime.cache.informer import Informer
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.objects.meta import rfc3339
from tests.unit.pool.support import dgds_services
from tests.unit.runtime.client.fake import FakeClient

NS, NAME, UID = "team", "pool", "relay-uid"
RELAY_SVC, FRONTEND = f"{NAME}-pool-relay", f"{NAME}-chat"
SE = serviceexports("v1beta1")
NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


ONE_POD = RelayDefaults("relay:1", 8090, replicas=1)


def make_relay(**spec: Any) -> Relay:
    meta = {"name": NAME, "namespace": NS, "uid": UID, "generation": 3, "resourceVersion": "7"}
    # One relay pod: no PodDisruptionBudget (it has tests of its own).
    return relay_from_object({"metadata": meta, "spec": spec}, ONE_POD)


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


def export_rules() -> ExportRules:
    """The rules of the real export feature, whose caches are never run (plan and report
    read only the snapshot)."""
    informer = Informer(FakeClient(), SE)
    return PoolExports(
        ExportCaches(informer),
        resource=SE,
        implementation=Implementation.MCS,
        about_version=None,
    ).rules


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
    """A published pool whose relay runs, whose frontend's Service is the DGD's and
    whose exports the implementation confirmed."""
    return Snapshot(
        relay,
        make_pool(),
        {"Deployment": running("Deployment", relay), "Service": running("Service", relay)},
        {n: confirmed_export(n, relay) for n in (RELAY_SVC, FRONTEND)},
        read_at=NOW,
        services=dgds_services(make_pool()),
    )


def run(
    snap: Snapshot,
    exports: ExportRules | None,
    results: dict[tuple[str, str], tuple[Result, Exception | None]] | None = None,
    answers: dict[tuple[str, str], dict[str, Any]] | None = None,
) -> tuple[Plan, StatusReport]:
    """Plan, "execute" (each action done unless `results` says otherwise; an apply
    answered with `answers`' object for it), report."""
    plan = make_plan(snap, exports, default_discovery_backend="kubernetes")
    outcome = Outcome()
    done: dict[tuple[str, str], ActionResult] = {}
    for a in plan.actions:
        # What the executor skips, it skips here too (its pure rule).
        got = waiting_for(a, done)
        if got is None:
            result, error = (results or {}).get((a.resource.kind, a.name), (Result.DONE, None))
            message = f"{a.verb} {a.resource.kind} {a.name}: {error}" if error else ""
            written = (answers or {}).get((a.resource.kind, a.name))
            got = ActionResult(a, result, message, error, written=written)
        done[a.key] = got
        outcome.results.append(got)
    return plan, report(snap, plan, outcome, exports, now=NOW)


def condition(said: StatusReport, type_: ConditionType) -> dict[str, Any]:
    (found,) = [c for c in said.status["conditions"] if c["type"] == type_]
    return dict(found)


def test_a_steady_pool_is_ready_and_a_status_that_shows_it_needs_no_write() -> None:
    relay, exports = make_relay(), export_rules()
    _, first = run(steady(relay), exports)
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
    _, second = run(again, exports)
    assert second.status == first.status
    assert not second.changed
    assert second.transitions == ()


def test_without_an_implementation_there_is_no_exported_condition() -> None:
    _, said = run(steady(make_relay()), None)
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
        export_rules(),
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
    _, said = run(snap, export_rules())
    assert condition(said, ConditionType.PUBLISHED)["reason"] == PublishedReason.NO_WORKERS
    assert condition(said, ConditionType.EXPORTED)["reason"] == ExportedReason.WITHDRAWN
    warned = [(t.type, t.reason, t.action) for t in said.transitions]
    assert warned == [("Warning", PublishedReason.NO_WORKERS, ConditionType.PUBLISHED)]
    (published,) = said.transitions
    assert published.related == make_pool(workers=False).reference()


def test_an_unreadable_input_fails_a_published_pass_only() -> None:
    unreadable = errors.Reported("cannot read ClusterProperty")
    snap = dataclasses.replace(steady(make_relay()), unreadable=(unreadable,))
    _, said = run(snap, export_rules())
    assert said.failures == (unreadable,)
    withdrawn = dataclasses.replace(snap, pool=make_pool(workers=False))
    _, said = run(withdrawn, export_rules())
    assert said.failures == ()


def test_a_new_export_is_pending_and_rechecked_when_its_grace_period_ends() -> None:
    relay = make_relay()
    snap = steady(relay)
    snap = dataclasses.replace(snap, exports={RELAY_SVC: snap.exports[RELAY_SVC]})
    plan, said = run(snap, export_rules())
    assert [(a.name, a.verb) for a in plan.actions if a.verb is Verb.CREATE] == [
        (FRONTEND, Verb.CREATE)
    ]
    exported = condition(said, ConditionType.EXPORTED)
    assert (exported["status"], exported["reason"]) == (Status.UNKNOWN, ExportedReason.PENDING)
    assert said.recheck_at == NOW + timedelta(seconds=60)


def test_the_effective_cluster_id_is_shown() -> None:
    prop = {"metadata": {"name": "cluster.clusterset.k8s.io"}, "spec": {"value": "east"}}
    snap = dataclasses.replace(steady(make_relay()), cluster_id=ClusterID(True, prop, "x/v1"))
    _, said = run(snap, export_rules())
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
    from dynamo_pool_operator.api.conditions import ClusterIDMatchedReason as R

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
        _, said = run(snap, export_rules())
        got = condition(said, ConditionType.CLUSTER_ID_MATCHED)
        assert (got["status"], got["reason"]) == (status, reason), (spec, got)
        ready = condition(said, ConditionType.READY)
        assert (ready["status"] == Status.TRUE) == (status == Status.TRUE), ready
    _, unchecked = run(steady(make_relay()), export_rules())
    assert "ClusterIDMatched" not in [c["type"] for c in unchecked.status["conditions"]]


def test_a_mismatch_names_both_ids_and_is_ready_s_reason() -> None:
    snap = with_cluster_id(
        steady(make_relay()), ClusterID(True, PROPERTY, "about.k8s.io/v1alpha1"), clusterId="west"
    )
    _, said = run(snap, export_rules())
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
    _, said = run(snap, export_rules())
    assert said.status["clusterId"] == "east"
    matched = condition(said, ConditionType.CLUSTER_ID_MATCHED)
    assert matched["message"] == (
        "cannot read ClusterProperty; the relay keeps its last known cluster ID 'east'"
    )
    never = dataclasses.replace(snap, shown_status=None)
    _, said = run(never, export_rules())
    assert "clusterId" not in said.status, "unknown is left out, never written as empty"
    assert condition(said, ConditionType.CLUSTER_ID_MATCHED)["message"].endswith(
        "no cluster ID is known yet: the relay Deployment waits for it"
    )


def test_a_withdrawn_relay_with_no_known_cluster_id_speaks_of_no_deployment() -> None:
    """A withdrawn pool has no relay Deployment: nothing waits for the ID."""
    unreadable = ClusterID(True, None, "about.k8s.io/v1alpha1", "cannot read ClusterProperty")
    withdrawn = Snapshot(make_relay(), None, {}, cluster_id=unreadable, read_at=NOW)
    plan, said = run(withdrawn, export_rules())
    assert not plan.decision.publish
    matched = condition(said, ConditionType.CLUSTER_ID_MATCHED)
    assert (matched["status"], matched["reason"]) == (Status.UNKNOWN, "ClusterPropertyUnreadable")
    assert matched["message"] == "cannot read ClusterProperty; no cluster ID is known yet"
    assert said.failures == (), "a withdrawn relay's pass raises nothing for the read"
    known = dataclasses.replace(withdrawn, shown_status={"clusterId": "east"})
    _, said = run(known, export_rules())
    assert condition(said, ConditionType.CLUSTER_ID_MATCHED)["message"] == (
        "cannot read ClusterProperty; the relay keeps its last known cluster ID 'east'"
    )


def test_a_first_publish_is_progressing_with_what_it_made_and_without_what_failed() -> None:
    relay = make_relay()
    fresh = Snapshot(relay, make_pool(), {}, read_at=NOW)
    refused = errors.Forbidden("denied", status=403, reason="Forbidden")
    _, made = run(fresh, export_rules())
    available = condition(made, ConditionType.RELAY_AVAILABLE)
    assert (available["reason"], available["message"]) == (
        RelayAvailableReason.PROGRESSING,
        f"the Deployment controller has not observed generation 1 of {RELAY_SVC} yet (observed 0)",
    )
    assert made.status["relayPods"] == f"0/{relay.replicas}"
    _, failed = run(fresh, export_rules(), {("Service", RELAY_SVC): (Result.FAILED, refused)})
    available = condition(failed, ConditionType.RELAY_AVAILABLE)
    assert available["reason"] == RelayAvailableReason.WRITE_REFUSED
    assert available["message"] == f"Create Service {RELAY_SVC}: 403 Forbidden: denied"
    lines = {line["name"]: line for line in failed.status["exports"]}
    assert lines[RELAY_SVC] == {
        "name": RELAY_SVC,
        "state": "Pending",
        "reason": "Waiting",
        "message": f"waits for create Service {RELAY_SVC}: Create Service {RELAY_SVC}: "
        "403 Forbidden: denied",
    }


def test_a_refused_deployment_apply_holds_back_the_services_and_is_named() -> None:
    snap = dataclasses.replace(steady(make_relay()), relay=make_relay(port=9100))
    refused = errors.Forbidden("no deployment", status=403, reason="Forbidden")
    _, said = run(snap, export_rules(), {("Deployment", RELAY_SVC): (Result.FAILED, refused)})
    available = condition(said, ConditionType.RELAY_AVAILABLE)
    refusal = f"Apply Deployment {RELAY_SVC}: 403 Forbidden: no deployment"
    # The Service's apply waited for the Deployment's: said as waiting, not as refused.
    assert available["message"] == (
        f"{refusal}; Service {RELAY_SVC} waits for apply Deployment {RELAY_SVC}: {refusal}"
    )


def test_two_refused_relay_deletes_are_both_named() -> None:
    snap = dataclasses.replace(steady(make_relay()), pool=make_pool(workers=False))
    a = errors.Forbidden("keep deployment", status=403, reason="Forbidden")
    b = errors.Forbidden("keep service", status=403, reason="Forbidden")
    _, said = run(
        snap,
        export_rules(),
        {("Deployment", RELAY_SVC): (Result.FAILED, a), ("Service", RELAY_SVC): (Result.FAILED, b)},
    )
    assert condition(said, ConditionType.RELAY_AVAILABLE)["message"] == (
        f"the pool is withdrawn; its objects stay: Withdraw Deployment {RELAY_SVC}: 403 "
        f"Forbidden: keep deployment; Withdraw Service {RELAY_SVC}: 403 Forbidden: keep service"
    )


def test_a_pass_that_changed_the_pod_template_is_progressing() -> None:
    """The server's answer to the apply is judged, not the version read before it: a
    template change moved the generation past what the Deployment controller observed."""
    relay = make_relay(port=9100)
    snap = dataclasses.replace(steady(make_relay()), relay=relay)
    answer = running("Deployment", relay)
    answer["metadata"]["generation"] = 3
    answers = {("Deployment", RELAY_SVC): answer}
    _, said = run(snap, export_rules(), answers=answers)
    available = condition(said, ConditionType.RELAY_AVAILABLE)
    assert (available["status"], available["reason"], available["message"]) == (
        "False",
        RelayAvailableReason.PROGRESSING,
        f"the Deployment controller has not observed generation 3 of {RELAY_SVC} yet (observed 2)",
    )
    refused = errors.Forbidden("denied", status=403, reason="Forbidden")
    _, failed = run(snap, export_rules(), {("Deployment", RELAY_SVC): (Result.FAILED, refused)})
    assert condition(failed, ConditionType.RELAY_AVAILABLE)["reason"] == (
        RelayAvailableReason.WRITE_REFUSED
    )


def test_a_metadata_only_repair_of_the_deployment_keeps_the_pool_ready() -> None:
    """Restoring a label changes no template and no generation: every pod still serves."""
    relay = make_relay()
    snap = steady(relay)
    unlabelled = copy.deepcopy(snap.relay_objects["Deployment"])
    del unlabelled["metadata"]["labels"]["nvidia.com/dynamo-graph-deployment-name"]
    snap = dataclasses.replace(snap, relay_objects={**snap.relay_objects, "Deployment": unlabelled})
    answers = {("Deployment", RELAY_SVC): running("Deployment", relay)}
    plan, said = run(snap, export_rules(), answers=answers)
    assert [a.verb for a in plan.relay_actions if a.resource.kind == "Deployment"] == [Verb.APPLY]
    available = condition(said, ConditionType.RELAY_AVAILABLE)
    assert (available["status"], available["reason"]) == ("True", RelayAvailableReason.AVAILABLE)
    assert condition(said, ConditionType.READY)["status"] == "True"


def test_a_held_deployment_is_named_with_what_waits_for_it() -> None:
    unreadable = ClusterID(True, None, "about.k8s.io/v1alpha1", "cannot read")
    snap = Snapshot(make_relay(), make_pool(), {}, cluster_id=unreadable, read_at=NOW)
    _, said = run(snap, export_rules())
    from dynamo_pool_operator.pool.relay.kinds import DEPLOYMENT

    cluster_id_unknown = DEPLOYMENT.held_because

    available = condition(said, ConditionType.RELAY_AVAILABLE)
    assert available["message"] == (
        f"Deployment {RELAY_SVC} does not exist yet; Deployment {RELAY_SVC} {cluster_id_unknown}"
    )
    # The Service is created (no traffic moves yet); its export waits for the Deployment.
    line = next(e for e in said.status["exports"] if e["name"] == RELAY_SVC)
    assert (line["state"], line["reason"]) == ("Pending", "Waiting")
    assert line["message"] == f"waits for write Deployment {RELAY_SVC}: {cluster_id_unknown}"


def test_the_transitions_name_what_each_is_about() -> None:
    relay = make_relay()
    steady_status = run(steady(relay), export_rules())[1].status
    # The Deployment scaled to zero: RelayAvailable turns False, about the Deployment.
    snap = steady(relay)
    zero = copy.deepcopy(snap.relay_objects["Deployment"])
    zero["spec"]["replicas"] = 0
    down = dataclasses.replace(
        snap,
        relay=make_relay(replicas=0),
        relay_objects={**snap.relay_objects, "Deployment": zero},
        shown_status=steady_status,
    )
    _, said = run(down, export_rules())
    (warning,) = [t for t in said.transitions if t.type == "Warning"]
    assert (warning.reason, warning.action) == ("ScaledToZero", "RelayAvailable")
    assert warning.message == "spec.replicas is 0: no relay pod runs"
    assert warning.related == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "namespace": NS,
        "name": RELAY_SVC,
        "uid": "Deployment-uid",
        "resourceVersion": "9",
    }
    # Back: a Normal PoolReady with Ready's message.
    back = dataclasses.replace(steady(relay), shown_status=said.status)
    _, ready = run(back, export_rules())
    (normal,) = ready.transitions
    assert (normal.type, normal.reason, normal.action, normal.related) == (
        "Normal",
        POOL_READY,
        "Ready",
        None,
    )
    assert normal.message == condition(ready, ConditionType.READY)["message"]


def test_an_export_warning_is_about_the_export() -> None:
    relay = make_relay()
    snap = steady(relay)
    refused = copy.deepcopy(snap.exports[FRONTEND])
    refused["status"] = {
        "conditions": [{"type": "Valid", "status": "False", "reason": "ServiceUnavailable"}]
    }
    shown = run(snap, export_rules())[1].status
    bad = dataclasses.replace(snap, exports={**snap.exports, FRONTEND: refused}, shown_status=shown)
    _, said = run(bad, export_rules())
    warnings = [t for t in said.transitions if t.type == "Warning"]
    assert [(t.reason, t.action) for t in warnings] == [("ServiceUnavailable", "Exported")]
    assert warnings[0].related == SE.reference(refused)
    assert warnings[0].message == f"{FRONTEND}: ServiceUnavailable"


def test_a_condition_keeps_its_transition_time_from_the_status_shown() -> None:
    relay = make_relay()
    first = run(steady(relay), export_rules())[1].status
    later = dataclasses.replace(steady(relay), shown_status=first)
    plan = make_plan(later, export_rules(), default_discovery_backend="kubernetes")
    outcome = Outcome([ActionResult(a, Result.DONE) for a in plan.actions])
    again = report(later, plan, outcome, export_rules(), now=NOW + timedelta(hours=1))
    assert again.status == first
    assert not again.changed


def test_the_report_refuses_a_plan_made_with_exports_when_it_has_none() -> None:
    import pytest

    relay = make_relay()
    plan = make_plan(steady(relay), export_rules(), default_discovery_backend="kubernetes")
    with pytest.raises(ValueError, match="zip"):
        report(steady(relay), plan, Outcome(), None, now=NOW)


def test_no_cluster_property_means_nothing_to_compare() -> None:
    snap = with_cluster_id(steady(make_relay()), ClusterID(True, None, "x/v1"), clusterId="west")
    _, said = run(snap, export_rules())
    assert condition(said, ConditionType.CLUSTER_ID_MATCHED)["message"] == (
        "the cluster has no ID property cluster.clusterset.k8s.io (or it is empty): nothing to "
        "compare"
    )


def test_a_dgd_gone_warns_about_nothing_but_the_relay() -> None:
    relay = make_relay()
    shown = run(steady(relay), export_rules())[1].status
    gone = dataclasses.replace(steady(relay), pool=None, shown_status=shown)
    _, said = run(gone, export_rules())
    warnings = [t for t in said.transitions if t.type == "Warning"]
    assert [(t.reason, t.related) for t in warnings] == [("DGDNotFound", None)]


# --------------------------------------------------------------------------- withdrawals
HELD_BY = ["multicluster.k8s.aws/service-export-finalizer"]


def going(obj: dict[str, Any], since: timedelta) -> dict[str, Any]:
    """`obj` being deleted for `since`, held by someone else's finalizer."""
    out = copy.deepcopy(obj)
    out["metadata"].update(deletionTimestamp=rfc3339(NOW - since), finalizers=list(HELD_BY))
    return out


def stuck(relay: Relay, since: timedelta) -> Snapshot:
    """A withdrawn pool whose two exports are still being deleted for `since`."""
    snap = dataclasses.replace(steady(relay), pool=make_pool(workers=False))
    return dataclasses.replace(snap, exports={n: going(e, since) for n, e in snap.exports.items()})


def test_a_withdrawal_within_the_grace_shows_no_line_and_is_rechecked_when_it_ends() -> None:
    relay = make_relay()
    _, said = run(stuck(relay, timedelta(seconds=20)), export_rules())
    assert said.status["exports"] == []
    assert ExportWarning.EXPORT_STUCK_TERMINATING not in [t.reason for t in said.transitions]
    assert said.recheck_at == NOW + timedelta(seconds=40)


def test_a_withdrawal_held_past_the_grace_says_withdrawing_and_warns_once() -> None:
    relay = make_relay()
    snap = stuck(relay, timedelta(seconds=61))
    _, said = run(snap, export_rules())
    since = rfc3339(NOW - timedelta(seconds=61))
    assert said.status["exports"] == [
        {
            "name": name,
            "state": "Withdrawing",
            "reason": "HeldByFinalizers",
            "message": f"withdrawn, and being deleted since {since}, longer than "
            "multiCluster.unconfirmedAfter (60s): held by finalizers "
            "multicluster.k8s.aws/service-export-finalizer; the MCS implementation may "
            "still import it",
            "finalizers": HELD_BY,
        }
        for name in (FRONTEND, RELAY_SVC)  # withdrawals in name order
    ]
    warned = [t for t in said.transitions if t.reason == ExportWarning.EXPORT_STUCK_TERMINATING]
    assert [(t.type, t.action) for t in warned] == [("Warning", "Withdraw")] * 2
    assert [t.related["name"] for t in warned if t.related] == [FRONTEND, RELAY_SVC]
    assert HELD_BY[0] in warned[0].message
    assert said.recheck_at is None
    # The next pass sees its own status: the same lines, no write, no second Warning.
    shown = dataclasses.replace(snap, shown_status=said.status)
    _, again = run(shown, export_rules())
    assert not again.changed
    assert [
        t for t in again.transitions if t.reason == ExportWarning.EXPORT_STUCK_TERMINATING
    ] == []


def test_a_withdrawing_export_leaves_a_published_pool_exported() -> None:
    relay = make_relay()
    snap = steady(relay)
    old = going(confirmed_export(f"{NAME}-old", relay), timedelta(minutes=5))
    snap = dataclasses.replace(snap, exports={**snap.exports, f"{NAME}-old": old})
    _, said = run(snap, export_rules())
    assert [(x["name"], x["state"]) for x in said.status["exports"]] == [
        (RELAY_SVC, "Exported"),
        (FRONTEND, "Exported"),
        (f"{NAME}-old", "Withdrawing"),
    ]
    exported = condition(said, ConditionType.EXPORTED)
    assert (exported["status"], exported["reason"]) == (
        Status.TRUE,
        ExportedReason.IMPLEMENTATION_READY,
    )


def test_a_held_pool_says_what_to_change_and_tells_the_truth_about_what_runs() -> None:
    """An invalid spec of a running pool (decision 0013): Published and Ready say
    InvalidConfiguration with the field; the relay still runs and is still exported."""
    relay = make_relay(nodeSelector={"bad key!": "x"})
    snap = steady(make_relay())
    _, said = run(dataclasses.replace(snap, relay=relay), export_rules())
    published = condition(said, ConditionType.PUBLISHED)
    assert (published["status"], published["reason"]) == (Status.FALSE, "InvalidConfiguration")
    assert "spec.nodeSelector[bad key!]" in published["message"]
    assert "nothing is withdrawn" in published["message"]
    assert condition(said, ConditionType.READY)["reason"] == "InvalidConfiguration"
    assert condition(said, ConditionType.RELAY_AVAILABLE)["status"] == Status.TRUE
    assert condition(said, ConditionType.EXPORTED)["status"] == Status.TRUE
    assert said.status["serviceName"] == RELAY_SVC
    assert said.failures == ()
