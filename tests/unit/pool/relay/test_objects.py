"""The relay's own objects in the plan (pool/relay/objects.py) and the plan's write order
(pool/plan.py). Pure.

Published: absent -> CREATE (handed over to the apply manager), drifted -> APPLY,
right -> NONE, ours but being deleted -> WAIT; a create never handed over is handed
over. Withdrawn: ours -> WITHDRAW (WAIT while being deleted), anyone else's -> not
touched. Order: publishing, relay objects before exports; withdrawing, after.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.dgd import Pool, pool_from_object
from dynamo_pool_operator.api.mcs import ClusterID
from dynamo_pool_operator.api.relay import Relay, RelayDefaults, relay_from_object
from dynamo_pool_operator.pool.model import (
    Action,
    Snapshot,
    Verb,
)
from dynamo_pool_operator.pool.plan import Reason, decision
from dynamo_pool_operator.pool.relay import render
from dynamo_pool_operator.pool.relay.objects import (
    RELAY_EVENTS,
    desired_objects,
    plan_relay_objects,
)
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES

NS, NAME, UID = "team", "pool", "relay-uid"
OBJ = f"{NAME}-pool-relay"
PUBLISHED = decision(Reason.PUBLISHED, "published")
WITHDRAWN = decision(Reason.NO_WORKERS, "no workers")


ONE_POD = RelayDefaults("relay:1", 8090, replicas=1)


def make_relay(**spec: Any) -> Relay:
    meta = {"name": NAME, "namespace": NS, "uid": UID, "generation": 1}
    # One relay pod: no PodDisruptionBudget, so these tests see the Deployment and the
    # Service alone (the budget has tests of its own).
    return relay_from_object({"metadata": meta, "spec": spec}, ONE_POD)


def make_pool() -> Pool:
    return pool_from_object(
        {
            "apiVersion": "nvidia.com/v1beta1",
            "metadata": {"name": NAME, "namespace": NS, "uid": "dgd", "resourceVersion": "3"},
            "spec": {
                "components": [{"name": "f", "type": "frontend"}, {"name": "w", "type": "worker"}]
            },
        }
    )


def snapshot(objects: dict[str, Any] | None = None, **relay_spec: Any) -> Snapshot:
    return Snapshot(make_relay(**relay_spec), make_pool(), objects or {})


def live(kind: str, *, owner: str = UID, terminating: bool = False, **extra: Any) -> dict[str, Any]:
    """The cached copy of what we rendered (as the server would return it)."""
    desired = desired_objects(snapshot())[kind]
    obj = copy.deepcopy(desired)
    obj["metadata"].update(uid=f"{kind}-uid", resourceVersion="9")
    obj["metadata"]["ownerReferences"] = [{**make_relay().owner_reference(), "uid": owner}]
    if terminating:
        obj["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    obj["metadata"].update(extra)
    return obj


def verbs(actions: tuple[Action, ...]) -> list[tuple[str, Verb]]:
    return [(a.resource.kind, a.verb) for a in actions]


def test_absent_objects_are_created_whole_and_nothing_more() -> None:
    actions = plan_relay_objects(snapshot(), PUBLISHED)
    assert verbs(actions) == [("Deployment", Verb.CREATE), ("Service", Verb.CREATE)]
    for a, res in zip(actions, (DEPLOYMENTS, SERVICES), strict=True):
        assert a.resource == res
        # One write: the create's fields are handed over only before a first apply.
        assert (a.namespace, a.name, a.live, a.hand_over) == (NS, OBJ, None, False)
        assert a.body == desired_objects(snapshot())[res.kind]
        assert a.events == RELAY_EVENTS


def test_objects_that_are_right_need_nothing() -> None:
    objects = {"Deployment": live("Deployment"), "Service": live("Service")}
    actions = plan_relay_objects(snapshot(objects), PUBLISHED)
    assert verbs(actions) == [("Deployment", Verb.NONE), ("Service", Verb.NONE)]
    assert [a.hand_over for a in actions] == [False, False]


def test_a_drifted_object_is_applied_over_the_version_read() -> None:
    objects = {"Deployment": live("Deployment"), "Service": live("Service")}
    actions = plan_relay_objects(snapshot(objects, port=9100), PUBLISHED)
    assert verbs(actions) == [("Deployment", Verb.APPLY), ("Service", Verb.APPLY)]
    assert actions[0].live is objects["Deployment"]
    assert actions[1].body == render.service(make_relay(port=9100))


def test_the_effective_cluster_id_reaches_the_deployment() -> None:
    prop = {"metadata": {"name": "cluster.clusterset.k8s.io"}, "spec": {"value": "east-1"}}
    snap = Snapshot(make_relay(), make_pool(), {}, cluster_id=ClusterID(True, prop, "x/v1"))
    (dep, _) = plan_relay_objects(snap, PUBLISHED)
    assert dep.body is not None
    container = dep.body["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["DYN_CLUSTER_ID"] == "east-1"


def test_a_create_not_handed_over_is_handed_over_before_its_first_apply_only() -> None:
    update = [{"manager": names.FIELD_MANAGER, "operation": "Update"}]
    objects = {
        "Deployment": live("Deployment", managedFields=update),
        "Service": live("Service", managedFields=update),
    }
    right = plan_relay_objects(snapshot(objects), PUBLISHED)
    assert [(a.verb, a.hand_over) for a in right] == [(Verb.NONE, False), (Verb.NONE, False)]
    changed = plan_relay_objects(snapshot(objects, port=9100), PUBLISHED)
    assert [(a.verb, a.hand_over) for a in changed] == [(Verb.APPLY, True), (Verb.APPLY, True)]
    done = {"Deployment": live("Deployment"), "Service": live("Service")}
    applied = plan_relay_objects(snapshot(done, port=9100), PUBLISHED)
    assert [(a.verb, a.hand_over) for a in applied] == [(Verb.APPLY, False), (Verb.APPLY, False)]


def test_our_object_being_deleted_is_waited_for_when_published() -> None:
    objects = {"Deployment": live("Deployment", terminating=True), "Service": live("Service")}
    actions = plan_relay_objects(snapshot(objects), PUBLISHED)
    assert verbs(actions) == [("Deployment", Verb.WAIT), ("Service", Verb.NONE)]
    assert actions[0].body is None


def test_withdrawal_deletes_only_what_the_relay_controls() -> None:
    objects = {"Deployment": live("Deployment"), "Service": live("Service", owner="someone")}
    actions = plan_relay_objects(snapshot(objects), WITHDRAWN)
    assert verbs(actions) == [("Deployment", Verb.WITHDRAW)]
    (a,) = actions
    assert (a.live, a.wanted, a.body) == (objects["Deployment"], False, None)


def test_withdrawal_waits_for_an_object_being_deleted_and_skips_absent_ones() -> None:
    objects = {"Deployment": live("Deployment", terminating=True), "Service": None}
    assert verbs(plan_relay_objects(snapshot(objects), WITHDRAWN)) == [("Deployment", Verb.WAIT)]


def test_an_invalid_relay_name_plans_nothing() -> None:
    relay = relay_from_object(
        {"metadata": {"name": "Pool.A", "namespace": NS, "uid": UID}}, RelayDefaults("r", 1)
    )
    invalid = decision(Reason.INVALID_CONFIGURATION, "bad name")
    assert plan_relay_objects(Snapshot(relay, None, {}), invalid) == ()


# --------------------------------------------------------------------------- Service shape


def clusterip_service(**extra: Any) -> dict[str, Any]:
    """Our Service as a ClusterIP one (`spec.service.headless: false` when it was made)."""
    svc = live("Service", **extra)
    svc["spec"]["clusterIP"] = "10.96.0.7"
    return svc


def test_the_relay_service_is_headless_unless_the_relay_says_otherwise() -> None:
    assert desired_objects(snapshot())["Service"]["spec"]["clusterIP"] == "None"
    shaped = desired_objects(snapshot(service={"headless": False}))["Service"]
    assert "clusterIP" not in shaped["spec"], "the server picks the ClusterIP"


@pytest.mark.parametrize(
    ("objects", "spec"),
    [
        ({"Service": clusterip_service()}, {}),
        ({"Service": live("Service")}, {"service": {"headless": False}}),
    ],
    ids=["clusterip-to-headless", "headless-to-clusterip"],
)
def test_a_service_of_the_other_shape_is_deleted_as_read_to_be_created_again(
    objects: dict[str, Any], spec: dict[str, Any]
) -> None:
    objects = {"Deployment": live("Deployment"), **objects}
    actions = plan_relay_objects(snapshot(objects, **spec), PUBLISHED)
    assert verbs(actions)[1] == ("Service", Verb.WITHDRAW)
    replaced = actions[1]
    assert replaced.live is objects["Service"], "deleted with the uid and rv just read"
    assert replaced.events.withdrawn == "RelayServiceReplaced"
    # Once it is gone, the next plan creates the new shape.
    again = plan_relay_objects(snapshot({"Deployment": live("Deployment")}, **spec), PUBLISHED)
    assert verbs(again)[1] == ("Service", Verb.CREATE)


def test_a_service_of_the_other_shape_being_deleted_is_waited_for() -> None:
    objects = {"Deployment": live("Deployment"), "Service": clusterip_service()}
    objects["Service"]["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    assert verbs(plan_relay_objects(snapshot(objects), PUBLISHED))[1] == ("Service", Verb.WAIT)


def test_a_service_of_the_right_shape_is_left_alone() -> None:
    objects = {"Deployment": live("Deployment"), "Service": live("Service")}
    assert verbs(plan_relay_objects(snapshot(objects), PUBLISHED))[1] == ("Service", Verb.NONE)
    flat = snapshot(service={"headless": False})
    service = copy.deepcopy(desired_objects(flat)["Service"])
    service["metadata"].update(uid="Service-uid", resourceVersion="9")
    service["metadata"]["ownerReferences"] = [make_relay().owner_reference()]
    service["spec"]["clusterIP"] = "10.96.0.7"  # the server's pick
    shaped = snapshot(
        {"Deployment": live("Deployment"), "Service": service}, service={"headless": False}
    )
    assert verbs(plan_relay_objects(shaped, PUBLISHED))[1] == ("Service", Verb.NONE)


@pytest.mark.parametrize(
    ("service", "problem"),
    [
        ("yes", "spec.service: must be an object"),
        ({"headless": "false"}, "spec.service.headless: must be true or false"),
    ],
)
def test_a_malformed_service_shape_is_a_problem_naming_the_field(
    service: object, problem: str
) -> None:
    problems = make_relay(service=service).problems
    assert any(p.startswith(problem) for p in problems), problems


def test_the_configured_default_shape_applies_when_the_relay_says_nothing() -> None:
    meta = {"name": NAME, "namespace": NS, "uid": UID}
    flat = RelayDefaults("relay:1", 8090, headless=False)
    assert relay_from_object({"metadata": meta, "spec": {}}, flat).headless is False
    assert relay_from_object({"metadata": meta, "spec": {"service": {}}}, flat).headless is False
    on = {"metadata": meta, "spec": {"service": {"headless": True}}}
    assert relay_from_object(on, flat).headless is True


def test_the_deployment_is_held_while_the_cluster_id_is_unknown() -> None:
    from dynamo_pool_operator.pool.relay.kinds import DEPLOYMENT

    cluster_id_unknown = DEPLOYMENT.held_because

    unreadable = ClusterID(True, None, "about.k8s.io/v1alpha1", "cannot read it")
    objects = {"Deployment": live("Deployment"), "Service": live("Service")}
    snap = Snapshot(make_relay(), make_pool(), objects, cluster_id=unreadable)
    (dep, svc) = plan_relay_objects(snap, PUBLISHED)
    assert (dep.verb, dep.live, dep.body, dep.cause) == (
        Verb.HOLD,
        objects["Deployment"],
        None,
        cluster_id_unknown,
    )
    assert svc.verb is Verb.NONE, "the Service does not need the ID"
    # The last known ID (the relay's status) is kept: nothing held, nothing to apply.
    known = Snapshot(
        make_relay(), make_pool(), objects, cluster_id=unreadable, shown_status={"clusterId": ""}
    )
    assert [a.verb for a in plan_relay_objects(known, PUBLISHED)] == [Verb.NONE, Verb.NONE]


def test_only_a_create_reads_a_name_found_taken() -> None:
    """The caches watch by label: a create is where a hidden object of the name shows."""
    creates = plan_relay_objects(snapshot(), PUBLISHED)
    assert [a.read_if_taken for a in creates] == [True, True]
    kept = plan_relay_objects(snapshot({k: live(k) for k in ("Deployment", "Service")}), PUBLISHED)
    assert [a.read_if_taken for a in kept] == [False, False]


def test_our_object_found_without_our_labels_is_applied_at_the_version_read() -> None:
    """Ours with our labels removed (hidden from the cache, found by the create's 409)
    is drift: the apply puts the labels back, guarded by the uid and version read."""
    found = live("Deployment")
    for key in (names.APP_MANAGED_BY, names.APP_COMPONENT):
        del found["metadata"]["labels"][key]
    from dynamo_pool_operator.pool.controller import Trim

    cached = Trim("Deployment")(found)  # as the reconciler keeps it (the cache's transform)
    actions = plan_relay_objects(snapshot({"Deployment": cached}), PUBLISHED)
    assert verbs(actions)[0] == ("Deployment", Verb.APPLY)
    assert actions[0].live is not None
    assert actions[0].live["metadata"]["uid"] == "Deployment-uid"


# --------------------------------------------------------------------------- the budget
TWO_PODS = RelayDefaults("relay:1", 8090, replicas=2)
BUDGET = "PodDisruptionBudget"


def two_pods(objects: dict[str, Any] | None = None, **spec: Any) -> Snapshot:
    meta = {"name": NAME, "namespace": NS, "uid": UID, "generation": 1}
    relay = relay_from_object({"metadata": meta, "spec": spec}, TWO_PODS)
    return Snapshot(relay, make_pool(), objects or {})


def live_budget(**extra: Any) -> dict[str, Any]:
    obj = copy.deepcopy(desired_objects(two_pods())[BUDGET])
    obj["metadata"].update(uid="pdb-uid", resourceVersion="9", **extra)
    return obj


def test_a_relay_of_two_pods_or_more_owns_a_disruption_budget_of_one() -> None:
    actions = plan_relay_objects(two_pods(), PUBLISHED)
    assert verbs(actions) == [
        ("Deployment", Verb.CREATE),
        ("Service", Verb.CREATE),
        (BUDGET, Verb.CREATE),
    ]
    body = actions[2].body
    assert body is not None
    assert body["spec"] == {"minAvailable": 1, "selector": {"matchLabels": names.selector(NAME)}}
    assert body["metadata"]["ownerReferences"] == [make_relay().owner_reference()]


def test_a_relay_of_one_pod_has_no_budget_and_withdraws_its_own() -> None:
    """One pod and `minAvailable: 1` would block every node drain."""
    objects = {"Deployment": live("Deployment"), "Service": live("Service")}
    assert verbs(plan_relay_objects(snapshot(objects), PUBLISHED)) == [
        ("Deployment", Verb.NONE),
        ("Service", Verb.NONE),
    ]
    ours = {**objects, BUDGET: live_budget()}
    actions = plan_relay_objects(snapshot(ours), PUBLISHED)
    assert verbs(actions)[-1] == (BUDGET, Verb.WITHDRAW)
    assert actions[-1].live is ours[BUDGET]
    theirs = {**objects, BUDGET: live_budget(ownerReferences=[])}
    assert BUDGET not in dict(verbs(plan_relay_objects(snapshot(theirs), PUBLISHED)))


def test_the_budget_is_repaired_like_the_deployment_and_withdrawn_with_the_relay() -> None:
    right = {"Deployment": live("Deployment", replicas=2), BUDGET: live_budget()}
    assert dict(verbs(plan_relay_objects(two_pods(right), PUBLISHED)))[BUDGET] is Verb.NONE
    drifted = live_budget()
    drifted["spec"]["minAvailable"] = 0
    moved = {**right, BUDGET: drifted}
    assert dict(verbs(plan_relay_objects(two_pods(moved), PUBLISHED)))[BUDGET] is Verb.APPLY
    assert dict(verbs(plan_relay_objects(two_pods(right), WITHDRAWN)))[BUDGET] is Verb.WITHDRAW
