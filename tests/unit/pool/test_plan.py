"""One plan for the whole pool (pool/plan.py): the decision, and every owned
object's action in the order the writes must go."""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.pool.model import (
    Action,
    Contribution,
    EventNames,
    Snapshot,
    Verb,
)
from dynamo_pool_operator.pool.plan import Plan, make_plan
from dynamo_pool_operator.pool.relay.objects import plan_relay_objects
from dynamo_pool_operator.runtime.objects.resources import Resource
from tests.unit.pool.relay.test_objects import (
    NS,
    OBJ,
    PUBLISHED,
    WITHDRAWN,
    clusterip_service,
    live,
    snapshot,
)

EXPORT = Resource("multicluster.x-k8s.io", "v1alpha1", "serviceexports", "ServiceExport")


def export_action(name: str) -> Action:
    return Action(Verb.CREATE, EXPORT, NS, name, EventNames(failed="ExportFailed"))


@pytest.mark.parametrize(
    ("d", "first"), [(PUBLISHED, "Deployment"), (WITHDRAWN, "ServiceExport")], ids=str
)
def test_publishing_writes_the_relay_first_withdrawing_the_exports_first(
    d: Any, first: str
) -> None:
    relay_actions = plan_relay_objects(
        snapshot({"Deployment": live("Deployment"), "Service": live("Service")}), d
    )
    plan = Plan(d, relay_actions, (Contribution((export_action("a"), export_action("b"))),))
    kinds = [a.resource.kind for a in plan.actions]
    assert kinds[0] == first
    if d.publish:
        assert kinds == ["Deployment", "Service", "ServiceExport", "ServiceExport"]
    else:
        assert kinds == ["ServiceExport", "ServiceExport", "Deployment", "Service"]


def test_publishing_withdraws_the_relay_services_export_before_the_service() -> None:
    """A relay Service being replaced goes after its export: an MCS implementation never
    sees an export whose Service is gone. A renamed frontend's old export still goes
    last, after the new one is created (the pool is not without it meanwhile)."""
    objects = {"Deployment": live("Deployment"), "Service": clusterip_service()}
    relay_actions = plan_relay_objects(snapshot(objects), PUBLISHED)
    old = Action(Verb.WITHDRAW, EXPORT, NS, OBJ, EventNames("x"), wanted=False)
    renamed = Action(Verb.WITHDRAW, EXPORT, NS, "old-frontend", EventNames("x"), wanted=False)
    contribution = Contribution((export_action("a"), renamed, old))
    plan = Plan(PUBLISHED, relay_actions, (contribution,))
    assert [(a.resource.kind, a.verb, a.name) for a in plan.actions] == [
        ("ServiceExport", Verb.WITHDRAW, OBJ),
        ("Deployment", Verb.NONE, OBJ),
        ("Service", Verb.WITHDRAW, OBJ),
        ("ServiceExport", Verb.CREATE, "a"),
        ("ServiceExport", Verb.WITHDRAW, "old-frontend"),
    ]


def test_make_plan_asks_the_exports_with_the_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.unit.pool.test_report_status import export_rules

    seen: list[Any] = []

    def one_export(snap: Snapshot, d: Any, rules: Any) -> Contribution:
        seen.append((d, rules))
        return Contribution((export_action("x"),))

    monkeypatch.setattr("dynamo_pool_operator.pool.plan.plan_exports", one_export)
    rules = export_rules()
    plan = make_plan(snapshot(), rules, default_discovery_backend="kubernetes")
    assert plan.decision.publish
    assert seen == [(plan.decision, rules)]
    assert [a.name for a in plan.actions] == [OBJ, OBJ, "x"]


# --------------------------------------------------------------------------- needs
def _needs(snap: Snapshot) -> dict[tuple[str, str, str], tuple[tuple[str, str], ...]]:
    """Each action (verb, kind, name) of the real plan with what it needs."""
    from tests.unit.pool.test_report_status import export_rules

    plan = make_plan(snap, export_rules(), default_discovery_backend="kubernetes")
    return {(a.verb.value, a.resource.kind, a.name): a.needs for a in plan.actions}


def test_a_first_publish_creates_each_export_after_what_its_object_needs() -> None:
    """The relay Service is created beside its Deployment (no traffic moves yet: one
    round trip less for a new pool); its export waits for both, so a pool is never
    exported without its relay Deployment."""
    from tests.unit.pool.support import dgds_services
    from tests.unit.pool.test_report_status import FRONTEND, RELAY_SVC, make_pool
    from tests.unit.pool.test_report_status import make_relay as relay

    needs = _needs(Snapshot(relay(), make_pool(), {}, services=dgds_services(make_pool())))
    assert needs == {
        ("Create", "Deployment", RELAY_SVC): (),
        ("Create", "Service", RELAY_SVC): (),
        ("Create", "ServiceExport", RELAY_SVC): (("Service", RELAY_SVC), ("Deployment", RELAY_SVC)),
        # A frontend's export points at Dynamo's Service, not at anything planned here.
        ("Create", "ServiceExport", FRONTEND): (),
    }


def test_an_export_of_a_service_whose_deployment_is_held_absent_waits_for_it() -> None:
    """No cluster ID known yet: the Deployment is held, absent; the Service is created,
    and its export waits for the Deployment as well."""
    from dynamo_pool_operator.pool.model import ClusterID
    from tests.unit.pool.support import dgds_services
    from tests.unit.pool.test_report_status import RELAY_SVC, make_pool
    from tests.unit.pool.test_report_status import make_relay as relay

    unreadable = ClusterID(True, None, "about.k8s.io/v1alpha1", "cannot read ClusterProperty")
    pool = make_pool()
    snap = Snapshot(relay(), pool, {}, services=dgds_services(pool), cluster_id=unreadable)
    needs = _needs(snap)
    assert needs[("Hold", "Deployment", RELAY_SVC)] == ()
    assert needs[("Create", "Service", RELAY_SVC)] == ()
    assert needs[("Create", "ServiceExport", RELAY_SVC)] == (
        ("Service", RELAY_SVC),
        ("Deployment", RELAY_SVC),
    )


def test_a_steady_pool_records_no_need() -> None:
    from tests.unit.pool.test_report_status import make_relay as relay
    from tests.unit.pool.test_report_status import steady

    assert set(_needs(steady(relay())).values()) == {()}


def test_a_port_change_moves_the_pods_before_the_service() -> None:
    import dataclasses

    from tests.unit.pool.test_report_status import RELAY_SVC, steady
    from tests.unit.pool.test_report_status import make_relay as relay

    snap = dataclasses.replace(steady(relay()), relay=relay(port=9100))
    needs = _needs(snap)
    assert needs[("Apply", "Deployment", RELAY_SVC)] == ()
    assert needs[("Apply", "Service", RELAY_SVC)] == (("Deployment", RELAY_SVC),)


def test_a_replaced_service_goes_only_after_its_export() -> None:
    import dataclasses

    from tests.unit.pool.test_report_status import FRONTEND, RELAY_SVC, steady
    from tests.unit.pool.test_report_status import make_relay as relay

    snap = steady(relay())
    snap = dataclasses.replace(snap, relay=relay(service={"headless": False}))
    needs = _needs(snap)
    assert needs[("Withdraw", "Service", RELAY_SVC)] == (("ServiceExport", RELAY_SVC),)
    assert needs[("Withdraw", "ServiceExport", RELAY_SVC)] == ()
    assert needs[("None", "ServiceExport", FRONTEND)] == ()


def test_a_withdrawn_pool_deletes_its_relay_objects_after_every_export() -> None:
    import dataclasses

    from tests.unit.pool.test_report_status import FRONTEND, RELAY_SVC, make_pool, steady
    from tests.unit.pool.test_report_status import make_relay as relay

    snap = dataclasses.replace(steady(relay()), pool=make_pool(workers=False))
    exports = {("ServiceExport", RELAY_SVC), ("ServiceExport", FRONTEND)}
    needs = _needs(snap)
    assert set(needs[("Withdraw", "Deployment", RELAY_SVC)]) == exports
    assert set(needs[("Withdraw", "Service", RELAY_SVC)]) == exports


def test_an_export_waits_only_for_a_service_being_created() -> None:
    import copy
    import dataclasses

    from tests.unit.pool.test_report_status import RELAY_SVC, steady
    from tests.unit.pool.test_report_status import make_relay as relay

    snap = steady(relay())
    # The relay Service's export is gone, its Service is there: created, needing nothing.
    gone = {n: e for n, e in snap.exports.items() if n != RELAY_SVC}
    needs = _needs(dataclasses.replace(snap, exports=gone))
    assert needs[("Create", "ServiceExport", RELAY_SVC)] == ()
    # The Service is gone and the export is ours but drifted: repaired, needing nothing
    # (a repair never creates), while the Service is created.
    drifted = copy.deepcopy(snap.exports[RELAY_SVC])
    drifted["metadata"]["labels"] = {}
    objects = {"Deployment": snap.relay_objects["Deployment"], "Service": None}
    repaired = dataclasses.replace(
        snap, exports={**snap.exports, RELAY_SVC: drifted}, relay_objects=objects
    )
    needs = _needs(repaired)
    assert needs[("Apply", "ServiceExport", RELAY_SVC)] == ()
    assert needs[("Create", "Service", RELAY_SVC)] == ()


# --------------------------------------------------------------------------- an invalid spec
def test_an_invalid_spec_of_a_running_pool_holds_its_objects_and_keeps_its_exports() -> None:
    """A typo in a live relay (decision 0013): nothing is withdrawn, nothing rendered."""
    import dataclasses

    from dynamo_pool_operator.pool.relay.objects import SPEC_INVALID
    from tests.unit.pool.test_report_status import FRONTEND, RELAY_SVC, export_rules, steady
    from tests.unit.pool.test_report_status import make_relay as relay

    snap = steady(relay())
    snap = dataclasses.replace(snap, relay=relay(podLabels={"bad key!": "x"}))
    plan = make_plan(snap, export_rules(), default_discovery_backend="kubernetes")
    assert plan.decision.hold
    assert "spec.podLabels[bad key!]" in plan.decision.message
    assert [(a.verb, a.resource.kind) for a in plan.relay_actions] == [
        (Verb.HOLD, "Deployment"),
        (Verb.HOLD, "Service"),
    ]
    assert {a.cause for a in plan.relay_actions} == {SPEC_INVALID}
    exports = {a.name: a.verb for c in plan.contributions for a in c.actions}
    assert exports == {RELAY_SVC: Verb.NONE, FRONTEND: Verb.NONE}


def test_an_invalid_spec_creates_nothing_and_an_absent_relay_service_holds_its_export() -> None:
    """Held, an absent relay object is not created; an export of it is not created
    before it exists (it waits for the held Service)."""
    import dataclasses

    from tests.unit.pool.test_report_status import RELAY_SVC, steady
    from tests.unit.pool.test_report_status import make_relay as relay

    snap = steady(relay())
    objects = {"Deployment": snap.relay_objects["Deployment"], "Service": None}
    gone = {n: e for n, e in snap.exports.items() if n != RELAY_SVC}
    snap = dataclasses.replace(snap, relay=relay(replicas=-1), relay_objects=objects, exports=gone)
    needs = _needs(snap)
    assert ("Create", "Service", RELAY_SVC) not in needs
    assert needs[("Create", "ServiceExport", RELAY_SVC)] == (("Service", RELAY_SVC),)
