"""The exact objects and words the pure core produces, pinned whole.

Other tests check what a rule decides; these check what a user (or the API server)
reads: the body of an export, the actions of a plan field by field, the messages of
a check, a condition, a field error. A changed word here is a changed contract: the
docs, the events and `kubectl describe` show these strings verbatim.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dynamo_pool_operator.api import podfields
from dynamo_pool_operator.api.conditions import Condition, ConditionType, ReadyReason, Status
from dynamo_pool_operator.api.dgd import pool_from_object
from dynamo_pool_operator.api.mcs import ClusterID, Implementation, serviceexports
from dynamo_pool_operator.api.relay import Relay, RelayDefaults, relay_from_object
from dynamo_pool_operator.config import API_VERSION as CONFIG_API_VERSION
from dynamo_pool_operator.config import ConfigurationError, parse_configuration
from dynamo_pool_operator.pool import plan, report
from dynamo_pool_operator.pool.exports import plan as export_plan
from dynamo_pool_operator.pool.exports.verdict import Judgement, exported, verdict, view_of
from dynamo_pool_operator.pool.exports.verdict import lines_after as verdict_lines_after
from dynamo_pool_operator.pool.model import (
    Action,
    ActionResult,
    Contribution,
    Result,
    Snapshot,
    StatusLine,
    Verb,
)
from dynamo_pool_operator.pool.plan import make_plan
from dynamo_pool_operator.pool.relay import kinds, objects
from dynamo_pool_operator.pool.report import AvailableReason, availability
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES
from tests.unit.pool.support import dgds_services

NS, NAME, UID = "team", "pool", "relay-uid"
OBJ = f"{NAME}-pool-relay"
SE = serviceexports("v1beta1")
NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def make_relay(**spec: Any) -> Relay:
    return relay_from_object(
        {"metadata": {"name": NAME, "namespace": NS, "uid": UID, "generation": 1}, "spec": spec},
        RelayDefaults("relay:1", 8090, replicas=1),  # no PodDisruptionBudget
    )


def make_pool(*components: dict[str, Any]) -> Any:
    return pool_from_object(
        {
            "apiVersion": "nvidia.com/v1beta1",
            "kind": "DynamoGraphDeployment",
            "metadata": {"name": NAME, "namespace": NS, "uid": "dgd-uid", "resourceVersion": "7"},
            "spec": {"components": list(components)},
        }
    )


PUBLISHED = plan.decision(plan.Reason.PUBLISHED, "published")
WITHDRAWN = plan.decision(plan.Reason.DGD_NOT_FOUND, "gone")


# --------------------------------------------------------------------------- exports


def test_an_export_body_is_exactly_the_fields_we_own() -> None:
    relay = make_relay()
    assert export_plan.export_body(SE, relay, OBJ) == {
        "apiVersion": "multicluster.x-k8s.io/v1beta1",
        "kind": "ServiceExport",
        "metadata": {
            "name": OBJ,
            "namespace": NS,
            "labels": {"nvidia.com/dynamo-graph-deployment-name": NAME},
            "ownerReferences": [relay.owner_reference()],
        },
    }


def _plan(exports: dict[str, Any], pool: Any = None, **kw: Any) -> Contribution:
    """The exports' plan of a published pool, its frontends' Services the DGD's."""
    pool = make_pool() if pool is None else pool
    return export_plan.plan(
        make_relay(),
        PUBLISHED,
        pool,
        exports,
        implementation=Implementation.MCS,
        cluster_id=kw.pop("cluster_id", ClusterID()),
        resource=SE,
        services=kw.pop("services", dgds_services(pool)),
        **kw,
    )


def test_an_export_action_is_whole_and_only_writes_carry_a_body() -> None:
    relay = make_relay()
    created = _plan({}).actions
    assert created == (
        Action(
            Verb.CREATE,
            SE,
            NS,
            OBJ,
            export_plan.EXPORT_EVENTS,
            body=export_plan.export_body(SE, relay, OBJ),
            points_at=("Service", OBJ),
        ),
    )
    live = {**export_plan.export_body(SE, relay, OBJ)}
    live["metadata"] = {**live["metadata"], "uid": "e-uid", "resourceVersion": "3"}
    (kept,) = _plan({OBJ: live}).actions
    assert (kept.verb, kept.body, kept.live) == (Verb.NONE, None, live)


def test_each_advisory_has_its_event_action() -> None:
    prop = {"metadata": {"name": "cluster.clusterset.k8s.io"}, "spec": {"value": "east"}}
    p = export_plan.plan(
        make_relay(clusterId="west"),
        PUBLISHED,
        make_pool(),
        {},
        implementation=Implementation.MCS,
        cluster_id=ClusterID(True, prop, "about.k8s.io/v1alpha1"),
        resource=SE,
    )
    assert [(a.reason, a.action) for a in p.advisories] == [
        (export_plan.Warn.NO_FRONTEND, "Export"),
        (export_plan.Warn.CLUSTER_ID_MISMATCH, "CheckClusterID"),
    ]


def _action(verb: Verb, *, wanted: bool = True) -> Action:
    return Action(verb, SE, NS, OBJ, export_plan.EXPORT_EVENTS, wanted=wanted)


@pytest.mark.parametrize(
    ("verb", "wanted", "line"),
    [
        (Verb.WAIT, True, StatusLine(OBJ, "Pending", "Terminating")),
        (Verb.WAIT, False, None),
        (
            Verb.FOREIGN,
            True,
            StatusLine(
                OBJ,
                "Foreign",
                "NotControlled",
                "another owner (or none) controls this export; it is left alone",
            ),
        ),
        (Verb.WITHDRAW, False, None),
        (Verb.CREATE, True, StatusLine(OBJ, "Exported")),
    ],
)
def test_each_executed_export_action_gives_its_exact_line(
    verb: Verb, wanted: bool, line: StatusLine | None
) -> None:
    lines = verdict_lines_after(
        Contribution(), [ActionResult(_action(verb, wanted=wanted), Result.DONE)]
    )
    assert lines == ([] if line is None else [line])


def test_a_skipped_export_action_gives_its_exact_line() -> None:
    waits = "waits for create Service pool-pool-relay: 403 denied"
    for wanted, line in (
        (True, StatusLine(OBJ, "Pending", "Waiting", waits)),
        (False, None),
    ):
        results = [ActionResult(_action(Verb.CREATE, wanted=wanted), Result.SKIPPED, waits)]
        got = verdict_lines_after(Contribution(), results)
        assert got == ([] if line is None else [line])


def test_only_the_relay_services_export_points_at_a_relay_object() -> None:
    pool = make_pool({"name": "chat", "type": "frontend"}, {"name": "w", "type": "worker"})
    by_name = {a.name: a.points_at for a in _plan({}, pool).actions}
    assert by_name == {OBJ: ("Service", OBJ), f"{NAME}-chat": None}


def test_a_held_deployment_is_one_whole_action_and_the_service_is_still_planned() -> None:
    unreadable = ClusterID(True, None, "about.k8s.io/v1alpha1", "cannot read it")
    snap = Snapshot(make_relay(), make_pool(), {}, cluster_id=unreadable)
    held, service = objects.plan_relay_objects(snap, PUBLISHED)
    assert held == Action(
        Verb.HOLD,
        DEPLOYMENTS,
        NS,
        OBJ,
        objects.RELAY_EVENTS,
        live=None,
        cause=kinds.DEPLOYMENT.held_because,
    )
    assert (service.verb, service.resource, service.name) == (Verb.CREATE, SERVICES, OBJ)


# --------------------------------------------------------------------------- relay objects


def _live(kind: str, **meta: Any) -> dict[str, Any]:
    body = objects.desired_objects(Snapshot(make_relay(), make_pool(), {}))[kind]
    out = {**body, "metadata": {**body["metadata"], "uid": f"{kind}-uid", "resourceVersion": "9"}}
    out["metadata"]["ownerReferences"] = [make_relay().owner_reference()]
    out["metadata"].update(meta)
    return out


def test_a_withdrawn_relay_deletes_each_object_it_controls_whole() -> None:
    service = _live("Service")
    actions = objects.plan_relay_objects(
        Snapshot(make_relay(), None, {"Deployment": None, "Service": service}), WITHDRAWN
    )
    assert actions == (
        Action(Verb.WITHDRAW, SERVICES, NS, OBJ, objects.RELAY_EVENTS, live=service, wanted=False),
    ), "an absent Deployment does not stop the Service's withdrawal"


def test_a_replaced_service_is_deleted_as_read_whole() -> None:
    service = _live("Service")
    service["spec"] = {**service["spec"], "clusterIP": "10.96.0.9"}
    deployment = _live("Deployment")
    (dep, svc) = objects.plan_relay_objects(
        Snapshot(make_relay(), make_pool(), {"Deployment": deployment, "Service": service}),
        PUBLISHED,
    )
    assert svc == Action(
        Verb.WITHDRAW, SERVICES, NS, OBJ, kinds.SERVICE.replaced_events, live=service
    )
    assert (dep.resource, dep.verb) == (DEPLOYMENTS, Verb.NONE)


def test_an_object_being_deleted_is_waited_for_without_a_hand_over() -> None:
    deployment = _live("Deployment", deletionTimestamp="2026-12-01T00:00:00Z")
    deployment["metadata"]["managedFields"] = [
        {"manager": "dynamo-pool-operator", "operation": "Update"}
    ]
    (dep, _) = objects.plan_relay_objects(
        Snapshot(make_relay(), make_pool(), {"Deployment": deployment, "Service": None}),
        PUBLISHED,
    )
    assert (dep.verb, dep.hand_over, dep.body) == (Verb.WAIT, False, None)


def test_quantities_the_server_rewrites_are_not_drift() -> None:
    """The API server stores `1000m` as `1`: the relay's resources, compared as written,
    would be applied on every pass."""
    relay = make_relay(resources={"limits": {"cpu": "1000m"}})
    body = objects.desired_objects(Snapshot(relay, make_pool(), {}))["Deployment"]
    live = copy.deepcopy(body)
    live["metadata"].update(uid="d-uid", resourceVersion="9")
    live["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    (dep, _) = objects.plan_relay_objects(
        Snapshot(relay, make_pool(), {"Deployment": live, "Service": None}), PUBLISHED
    )
    assert dep.verb is Verb.NONE


def test_the_exports_plan_from_the_passs_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.unit.pool.test_report_status import export_rules

    seen: list[Snapshot] = []

    def recording(snapshot: Snapshot, decision: Any, rules: Any) -> Contribution:
        seen.append(snapshot)
        return Contribution()

    monkeypatch.setattr("dynamo_pool_operator.pool.plan.plan_exports", recording)
    snap = Snapshot(make_relay(), make_pool(), {})
    make_plan(snap, export_rules(), default_discovery_backend="kubernetes")
    assert seen == [snap]


def test_the_deployment_gets_the_relays_own_cluster_id_over_the_clusters() -> None:
    prop = {"metadata": {"name": "cluster.clusterset.k8s.io"}, "spec": {"value": "east"}}
    snap = Snapshot(
        make_relay(clusterId="mine"), make_pool(), {}, cluster_id=ClusterID(True, prop, "a/v1")
    )
    container = objects.desired_objects(snap)["Deployment"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert {e["name"]: e.get("value") for e in container["env"]}["DYN_CLUSTER_ID"] == "mine"


# --------------------------------------------------------------------------- checks, status


def test_a_relay_held_terminating_says_what_holds_it() -> None:
    relay = relay_from_object(
        {
            "metadata": {
                "name": NAME,
                "namespace": NS,
                "uid": UID,
                "deletionTimestamp": "2026-12-01T00:00:00Z",
            },
            "spec": {},
        },
        RelayDefaults("relay:1", 8090, replicas=1),  # no PodDisruptionBudget
    )
    d = plan.decide(relay, make_pool(), {}, default_discovery_backend="kubernetes")
    assert (d.reason, d.message) == (
        plan.Reason.RELAY_TERMINATING,
        "the DynamoPoolRelay is being deleted; its pool is withdrawn (a finalizer holds it: "
        "the deletion completes when that finalizer is removed)",
    )


def _part(type_: str, message: str, state: str = "True") -> Condition:
    return Condition(ConditionType(type_), Status(state), "Fine", message)


def test_a_ready_summary_quotes_every_part_after_the_decision() -> None:
    one = report.summary([_part("Published", "published")])
    assert one == Condition("Ready", "True", ReadyReason.READY, "the pool is published: published")
    three = report.summary(
        [_part("Published", "p"), _part("RelayAvailable", "2/2"), _part("Exported", "ok")]
    )
    assert three.message == "the pool is published: 2/2; ok"
    failing = report.summary([_part("Published", "p"), _part("RelayAvailable", "0/2", "False")])
    assert failing == Condition("Ready", "False", "Fine", "RelayAvailable: 0/2")


def _deployment(*conds: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"generation": 1},
        "spec": {"replicas": 2},
        "status": {
            "observedGeneration": 1,
            "availableReplicas": 0,
            "updatedReplicas": 2,
            "replicas": 2,
            "conditions": list(conds),
        },
    }


def test_an_unavailable_deployment_quotes_its_own_conditions_in_order() -> None:
    got = availability(
        _deployment(
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"},
            {
                "type": "Progressing",
                "status": "False",
                "reason": "ProgressDeadlineExceeded",
                "message": "too slow",
            },
        ),
        {"metadata": {}},
        published=True,
        name=OBJ,
    )
    assert (got.reason, got.message) == (
        AvailableReason.UNAVAILABLE,
        f"no relay pod of {OBJ} is available (0/2): Progressing ProgressDeadlineExceeded: "
        "too slow; Available MinimumReplicasUnavailable:",
    )
    bare = availability(
        _deployment({"type": "ReplicaFailure", "status": "True"}),
        {"metadata": {}},
        published=True,
        name=OBJ,
    )
    assert bare.message == f"no relay pod of {OBJ} is available (0/2): ReplicaFailure :"


# --------------------------------------------------------------------------- verdicts


def test_a_condition_without_a_status_shows_an_empty_one() -> None:
    export = {"status": {"conditions": [{"type": "Valid", "reason": "Checking"}]}}
    assert view_of(export) == {"valid": {"status": "", "reason": "Checking"}}


def test_a_pending_or_unconfirmed_export_keeps_the_implementations_other_words() -> None:
    conflict = {"type": "Conflict", "status": "False", "reason": "NoConflict"}
    fresh = {
        "metadata": {"creationTimestamp": "2026-12-01T11:59:50Z"},
        "status": {"conditions": [conflict]},
    }
    pending = verdict(fresh, now=NOW)
    assert pending.judgement is Judgement.PENDING
    assert pending.view == {"conflict": {"status": "False", "reason": "NoConflict"}}
    old = verdict(fresh, now=NOW + timedelta(hours=1))
    assert old.judgement is Judgement.UNCONFIRMED
    assert old.view == {"conflict": {"status": "False", "reason": "NoConflict"}}


# --------------------------------------------------------------------------- pod fields


def test_field_errors_are_worded_exactly() -> None:
    assert podfields.resource_name_errors("bogus") == [
        "must be cpu, memory, ephemeral-storage, hugepages-<size>, or an extended resource "
        "<domain>/<name> (e.g. nvidia.com/gpu)"
    ]
    assert podfields.resources_errors({"limts": {}}) == [
        "spec.resources.limts: unknown field (allowed: limits, requests, claims)"
    ]
    assert podfields.resources_errors(
        {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "1"}}
    ) == [
        "spec.resources.requests[nvidia.com/gpu]: an extended resource cannot be "
        "overcommitted: the request must equal the limit"
    ]
    assert podfields.toleration_errors({"effect": "Sometimes", "operator": "Exists"}, "t") == [
        "t.effect: must be one of NoSchedule, PreferNoSchedule, NoExecute or empty"
    ]


def test_every_extended_resource_is_checked_not_only_the_first_standard_one() -> None:
    problems = podfields.resources_errors(
        {"limits": {"cpu": "1", "example.com/a": "1.5"}, "requests": {"example.com/b": "1"}}
    )
    assert problems == [
        "spec.resources.limits[example.com/a]: an extended resource must be a whole number",
        "spec.resources.limits[example.com/b]: an extended resource needs a limit",
    ], "cpu, first in order, is not extended: the others are still checked"
    fractional = podfields.resources_errors(
        {"limits": {"example.com/a": "2"}, "requests": {"example.com/a": "1.5"}}
    )
    assert fractional[0] == (
        "spec.resources.requests[example.com/a]: an extended resource must be a whole number"
    )


def test_a_kubernetes_io_subdomain_is_not_an_extended_resource() -> None:
    assert podfields.resource_name_errors("example.com/gpu") == []
    assert podfields.resource_name_errors("nvidia.com/x/y") != []
    for name in ("kubernetes.io/gpu", "node.kubernetes.io/gpu"):
        assert podfields.resource_name_errors(name) != [], name
    # The domain is what comes before the first slash.
    assert podfields.resource_name_errors("a.kubernetes.io/b") != []


def test_quantities_are_checked_in_name_order_and_zero_is_allowed() -> None:
    assert podfields.resources_errors({"limits": {"memory": "0", "cpu": "0"}}) == []
    problems = podfields.resources_errors({"limits": {"memory": "x", "cpu": "y"}})
    assert problems == [
        "spec.resources.limits[cpu]: 'y' is not a quantity (e.g. 500m, 2, 128Mi, 1Gi)",
        "spec.resources.limits[memory]: 'x' is not a quantity (e.g. 500m, 2, 128Mi, 1Gi)",
    ]
    mixed = podfields.resources_errors({"limits": {1: "x", "a": "y"}})
    assert [p.split(":")[0] for p in mixed] == [
        "spec.resources.limits[1]",
        "spec.resources.limits[1]",
        "spec.resources.limits[a]",
        "spec.resources.limits[a]",
    ], "names that are not strings sort by their text, with the others"


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": 1, "value": "v", "effect": "NoSchedule"},
        {"key": "k", "value": 1, "effect": "NoSchedule"},
        {"key": "k", "value": "v", "effect": 1},
    ],
    ids=["key", "value", "effect"],
)
def test_a_toleration_field_that_is_not_a_string_is_named(toleration: dict[str, Any]) -> None:
    assert podfields.toleration_errors(toleration, "t") == [
        "t: key, value and effect must be strings"
    ]


# --------------------------------------------------------------------------- configuration


def _config_problems(**sections: Any) -> list[tuple[str, str]]:
    data = {"apiVersion": CONFIG_API_VERSION, "kind": "OperatorConfiguration", **sections}
    with pytest.raises(ConfigurationError) as info:
        parse_configuration(data, "test.yaml")
    return [(e.path, e.message) for e in info.value.errors]


def test_configuration_errors_are_worded_exactly() -> None:
    assert _config_problems(
        multiCluster={"mcsImplementation": "mcs", "unconfirmedAfter": "-5s"}
    ) == [
        (
            "multiCluster.unconfirmedAfter",
            'must not be negative, got "-5s"; use e.g. "60s", or "0s" for an implementation '
            "that writes no conditions",
        )
    ]
    assert _config_problems(server={"metricsCertDir": "/tls", "metricsSecure": False}) == [
        (
            "server.metricsCertDir",
            "is set but metricsSecure is false, so no certificate is served; set "
            "server.metricsSecure: true or remove server.metricsCertDir",
        )
    ]
    assert _config_problems(server={"metricsCertDir": "tls"}) == [
        (
            "server.metricsCertDir",
            '"tls" is not an absolute path; use e.g. "/etc/dynamo-pool-operator/metrics-tls"',
        )
    ]


def test_a_malformed_service_shape_names_the_type_it_got() -> None:
    assert make_relay(service="yes").problems == ("spec.service: must be an object, got str",)


def test_a_name_with_two_slashes_is_judged_by_its_first_domain() -> None:
    """`node.kubernetes.io/x/y` is no valid name at all, and not an extended resource
    either (its domain is a kubernetes.io one): no "whole number" rule on top."""
    problems = podfields.resources_errors({"limits": {"node.kubernetes.io/x/y": "1.5"}})
    assert problems
    assert all("whole number" not in p for p in problems), problems


def test_a_failed_export_is_the_exported_conditions_message() -> None:
    failed = exported([StatusLine(OBJ, "Failed", "ExportFailed", "forbidden")], {}, published=True)
    assert (failed.status, failed.reason, failed.message, failed.about) == (
        "False",
        "ExportFailed",
        f"{OBJ}: forbidden",
        OBJ,
    )
