"""The export planner (pool/exports/plan.py): docs/exports.md, one table row per rule.

`plan` is pure: relay + decision + pool + the cached exports that matter in, one
action per export name, the warnings and the skipped status lines out. Every
action row below is checked exactly (verbs, names and their order), so a rule that
starts touching one more export fails its row. The property tests at the end drive
arbitrary pools and arbitrary existing exports through the planner and check the
invariants the executor relies on (never touch a foreign or terminating export,
only valid names are created, one action per name, a second pass writes nothing).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.conditions import ExportLineReason
from dynamo_pool_operator.api.dgd import Pool, pool_from_object
from dynamo_pool_operator.api.mcs import (
    CLUSTER_ID_PROPERTY,
    ClusterID,
    Implementation,
    serviceexports,
)
from dynamo_pool_operator.api.names import DGD_NAME
from dynamo_pool_operator.api.relay import Relay, RelayDefaults, relay_from_object
from dynamo_pool_operator.api.shown import ShownStatus
from dynamo_pool_operator.pool.exports.plan import (
    REEXPORT_AFTER,
    REPLACED_MESSAGE,
    UNDISCOVERABLE,
    Hold,
    Warn,
    export_body,
    plan,
    relay_export_hold,
    repair_fields,
    service_not_found,
)
from dynamo_pool_operator.pool.exports.verdict import Judgement, Verdict, exported, lines_after
from dynamo_pool_operator.pool.model import Action, ActionResult, Decision, Result, Verb
from dynamo_pool_operator.pool.model import Contribution as Plan
from dynamo_pool_operator.pool.plan import Reason, decision
from dynamo_pool_operator.runtime.objects.meta import is_controlled_by as controlled_by
from dynamo_pool_operator.runtime.objects.meta import rfc3339
from tests.unit.pool.support import dgds_services

SE = serviceexports("v1alpha1")

DEFAULTS = RelayDefaults(image="relay:1", port=7000)
NS = "team"
OTHER_NS = "elsewhere"
NAME = "pool"
RELAY_UID = "relay-uid-1"
RELAY_API = "nvidia.com/v1alpha1"
RELAY_KIND = "DynamoPoolRelay"
DGD_RV = "4242"
RELAY_EXPORT = f"{NAME}-pool-relay"
FE = f"{NAME}-frontend"
ABOUT_API = "about.k8s.io/v1alpha1"

PUBLISHED = decision(Reason.PUBLISHED, "published")
WITHDRAWAL_REASONS = [r for r in Reason if r is not Reason.PUBLISHED]

C, R, W, WAIT, F, N = (
    Verb.CREATE,
    Verb.APPLY,
    Verb.WITHDRAW,
    Verb.WAIT,
    Verb.FOREIGN,
    Verb.NONE,
)
WRITES = {Verb.CREATE, Verb.APPLY, Verb.WITHDRAW}


# --------------------------------------------------------------------------- builders


def make_relay(name: str = NAME, uid: str = RELAY_UID, cluster_id: str | None = None) -> Relay:
    spec: dict[str, Any] = {} if cluster_id is None else {"clusterId": cluster_id}
    return relay_from_object(
        {
            "metadata": {"name": name, "namespace": NS, "uid": uid, "generation": 1},
            "spec": spec,
        },
        DEFAULTS,
    )


def make_pool(*components: Mapping[str, Any], name: str = NAME, uid: str = "dgd-uid") -> Pool:
    return pool_from_object(
        {
            "apiVersion": "nvidia.com/v1beta1",
            "kind": "DynamoGraphDeployment",
            "metadata": {"name": name, "namespace": NS, "uid": uid, "resourceVersion": DGD_RV},
            "spec": {"components": [dict(c) for c in components]},
        }
    )


def fe(name: str) -> dict[str, Any]:
    return {"name": name, "type": "frontend"}


WORKER = {"name": "decode", "type": "decode"}


def ref(
    uid: str = RELAY_UID,
    *,
    kind: str = RELAY_KIND,
    name: str = NAME,
    api_version: str = RELAY_API,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
        **extra,
    }


def export(
    name: str,
    *owners: Mapping[str, Any],
    label: str | None = NAME,
    terminating: bool = False,
    namespace: str = NS,
    **meta: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}-{namespace}",
        "resourceVersion": "77",
    }
    if label is not None:
        metadata["labels"] = {DGD_NAME: label}
    if owners:
        metadata["ownerReferences"] = [dict(o) for o in owners]
    if terminating:
        metadata["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        metadata["finalizers"] = ["multicluster.example/cleanup"]
    metadata.update(meta)
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ServiceExport",
        "metadata": metadata,
    }


def ours(name: str, **kw: Any) -> dict[str, Any]:
    return export(name, ref(), **kw)


# Exports this relay does not control, each kind docs/exports.md, 'Ownership, repair
# and withdrawal' names ("a user's, another relay's, another kind's, or one without a
# controller").
FOREIGN_OWNERS: dict[str, tuple[dict[str, Any], ...]] = {
    "user-no-owner": (),
    "user-refers-to-us-without-controller": (ref(controller=False),),
    "user-controller-false-string": (ref(controller="true"),),
    "another-relay": (ref("other-relay-uid", name="other"),),
    "another-kind-deployment": (
        ref("deploy-uid", kind="Deployment", name="web", api_version="apps/v1"),
    ),
    "previous-incarnation-of-this-relay": (ref("old-relay-uid"),),
}


def foreign(name: str, who: str, **kw: Any) -> dict[str, Any]:
    return export(name, *FOREIGN_OWNERS[who], **kw)


def run(
    *,
    relay: Relay | None = None,
    decision: Decision = PUBLISHED,
    pool: Pool | None = None,
    exports: Iterable[Mapping[str, Any]] = (),
    implementation: str = "mcs",
    cluster_id: ClusterID | None = None,
    services: Mapping[str, Mapping[str, Any]] | None = None,
) -> Plan:
    """`services`: the frontends' Services cached; by default the DGD's own, one for each
    frontend (a frontend without one is not exported)."""
    return plan(
        relay or make_relay(),
        decision,
        pool,
        {e["metadata"]["name"]: e for e in exports},
        implementation=Implementation(implementation),
        cluster_id=cluster_id or ClusterID(),
        resource=SE,
        services=dgds_services(pool) if services is None else services,
    )


def verbs(p: Plan) -> list[tuple[Verb, str]]:
    return [(a.verb, a.name) for a in p.actions]


def action(p: Plan, name: str) -> Action:
    (found,) = [a for a in p.actions if a.name == name]
    return found


def reasons(p: Plan) -> list[Warn]:
    return [w.reason for w in p.advisories]


# --------------------------------------------------------------------------- the table


@dataclass
class Row:
    components: Sequence[Mapping[str, Any]]
    exports: Sequence[Mapping[str, Any]] = ()
    expect: Sequence[tuple[Verb, str]] = ()
    warnings: Sequence[Warn] = ()
    skipped: Mapping[str, Warn] = field(default_factory=dict)
    implementation: str = "mcs"
    dgd: str = NAME


LONG_DGD = "a" * 50  # relay export 61 characters: valid
LONG_FE = "frontend-ingress"  # 50 + 1 + 16 = 67 characters: not a Service name
K56 = "f" * 51  # pool-fff... is 56 characters
K55 = "f" * 50  # pool-fff... is 55 characters
ROWS: dict[str, Row] = {
    # docs/exports.md, 'What is exported'
    "published-pool-creates-relay-export-first-then-each-frontend-under-its-own-name": Row(
        components=[fe("Frontend"), WORKER, fe("Chat.Frontend")],
        expect=[(C, RELAY_EXPORT), (C, FE), (C, "pool-chat-frontend")],
    ),
    "exports-that-are-ours-and-right-need-nothing": Row(
        components=[fe("Frontend"), WORKER],
        exports=[ours(RELAY_EXPORT), ours(FE)],
        expect=[(N, RELAY_EXPORT), (N, FE)],
    ),
    "only-the-absent-export-is-created": Row(
        components=[fe("Frontend"), WORKER],
        exports=[ours(FE)],
        expect=[(C, RELAY_EXPORT), (N, FE)],
    ),
    "frontends-normalizing-to-the-same-service-are-exported-once": Row(
        components=[fe("Frontend"), fe("frontend"), fe("FRONTEND"), fe("fe.a"), fe("fe-a")],
        expect=[(C, RELAY_EXPORT), (C, FE), (C, "pool-fe-a")],
    ),
    "a-frontend-whose-service-is-the-relay-service-is-exported-once": Row(
        components=[fe("pool-relay"), fe("Pool.Relay"), WORKER],
        expect=[(C, RELAY_EXPORT)],
    ),
    "non-frontend-components-are-not-exported": Row(
        components=[
            WORKER,
            {"name": "planner", "type": "planner"},
            {"name": "epp", "type": "epp"},
            {"name": "untyped"},
            {"name": "Frontend", "type": "Frontend"},
            {"name": "prefill", "type": "prefill"},
        ],
        expect=[(C, RELAY_EXPORT)],
        warnings=[Warn.NO_FRONTEND],
    ),
    # renamed or removed frontends (docs/exports.md, 'What is exported')
    "renamed-frontend-withdraws-the-old-name-and-creates-the-new": Row(
        components=[fe("chat"), WORKER],
        exports=[ours(RELAY_EXPORT), ours(FE)],
        expect=[(N, RELAY_EXPORT), (C, "pool-chat"), (W, FE)],
        warnings=[Warn.FRONTEND_NOT_DISCOVERABLE],
    ),
    "removed-frontend-withdraws-its-export-and-warns-no-frontend": Row(
        components=[WORKER],
        exports=[ours(RELAY_EXPORT), ours(FE)],
        expect=[(N, RELAY_EXPORT), (W, FE)],
        warnings=[Warn.NO_FRONTEND],
    ),
    "frontend-whose-type-changed-is-withdrawn": Row(
        components=[{"name": "Frontend", "type": "planner"}, WORKER],
        exports=[ours(RELAY_EXPORT), ours(FE)],
        expect=[(N, RELAY_EXPORT), (W, FE)],
        warnings=[Warn.NO_FRONTEND],
    ),
    "stale-exports-we-control-are-withdrawn-in-name-order-after-the-wanted-ones": Row(
        components=[fe("Frontend"), WORKER],
        exports=[ours("pool-zz"), ours("pool-aa")],
        expect=[(C, RELAY_EXPORT), (C, FE), (W, "pool-aa"), (W, "pool-zz")],
    ),
    "no-frontend-exports-the-relay-service-only-and-warns": Row(
        components=[WORKER],
        expect=[(C, RELAY_EXPORT)],
        warnings=[Warn.NO_FRONTEND],
    ),
    # invalid frontend Service names (docs/exports.md, 'What is exported')
    "invalid-frontend-service-name-over-63-characters-is-skipped": Row(
        dgd=LONG_DGD,
        components=[fe(LONG_FE), fe("frontend"), WORKER],
        expect=[(C, f"{LONG_DGD}-pool-relay"), (C, f"{LONG_DGD}-frontend")],
        warnings=[Warn.INVALID_SERVICE_NAME],
        skipped={f"{LONG_DGD}-{LONG_FE}": Warn.INVALID_SERVICE_NAME},
    ),
    "invalid-frontend-service-name-we-exported-is-withdrawn": Row(
        dgd=LONG_DGD,
        components=[fe(LONG_FE), WORKER],
        exports=[export(f"{LONG_DGD}-{LONG_FE}", ref(name=LONG_DGD), label=LONG_DGD)],
        expect=[(C, f"{LONG_DGD}-pool-relay"), (W, f"{LONG_DGD}-{LONG_FE}")],
        warnings=[Warn.INVALID_SERVICE_NAME],
        skipped={f"{LONG_DGD}-{LONG_FE}": Warn.INVALID_SERVICE_NAME},
    ),
    "invalid-frontend-service-name-a-user-exported-is-left-alone": Row(
        dgd=LONG_DGD,
        components=[fe(LONG_FE), WORKER],
        exports=[foreign(f"{LONG_DGD}-{LONG_FE}", "user-no-owner")],
        expect=[(C, f"{LONG_DGD}-pool-relay")],
        warnings=[Warn.INVALID_SERVICE_NAME],
        skipped={f"{LONG_DGD}-{LONG_FE}": Warn.INVALID_SERVICE_NAME},
    ),
    "frontend-with-characters-no-service-name-can-have-is-skipped": Row(
        components=[fe("my_fe"), fe("fe-"), WORKER],
        expect=[(C, RELAY_EXPORT)],
        warnings=[Warn.INVALID_SERVICE_NAME],
        skipped={"pool-my_fe": Warn.INVALID_SERVICE_NAME, "pool-fe-": Warn.INVALID_SERVICE_NAME},
    ),
    # Karmada's 55-character limit (docs/exports.md, 'Karmada (`karmada`)')
    "karmada-skips-a-56-character-name": Row(
        implementation="karmada",
        components=[fe(K56), WORKER],
        expect=[(C, RELAY_EXPORT)],
        warnings=[Warn.SERVICE_NAME_TOO_LONG],
        skipped={f"pool-{K56}": Warn.SERVICE_NAME_TOO_LONG},
    ),
    "karmada-withdraws-our-export-of-a-56-character-name": Row(
        implementation="karmada",
        components=[fe(K56), WORKER],
        exports=[ours(RELAY_EXPORT), ours(f"pool-{K56}")],
        expect=[(N, RELAY_EXPORT), (W, f"pool-{K56}")],
        warnings=[Warn.SERVICE_NAME_TOO_LONG],
        skipped={f"pool-{K56}": Warn.SERVICE_NAME_TOO_LONG},
    ),
    "karmada-leaves-a-users-export-of-a-56-character-name-alone": Row(
        implementation="karmada",
        components=[fe(K56), WORKER],
        exports=[foreign(f"pool-{K56}", "another-relay")],
        expect=[(C, RELAY_EXPORT)],
        warnings=[Warn.SERVICE_NAME_TOO_LONG],
        skipped={f"pool-{K56}": Warn.SERVICE_NAME_TOO_LONG},
    ),
    "standard-mcs-exports-the-same-56-character-name": Row(
        components=[fe(K56), WORKER],
        exports=[ours(f"pool-{K56}")],
        expect=[(C, RELAY_EXPORT), (N, f"pool-{K56}")],
        warnings=[Warn.FRONTEND_NOT_DISCOVERABLE],
    ),
    "karmada-exports-exactly-55-characters": Row(
        implementation="karmada",
        components=[fe(K55), WORKER],
        expect=[(C, RELAY_EXPORT), (C, f"pool-{K55}")],
        warnings=[Warn.FRONTEND_NOT_DISCOVERABLE],
    ),
    "karmada-skips-the-relay-export-of-a-45-character-dgd": Row(
        implementation="karmada",
        dgd="r" * 45,
        components=[fe("f"), WORKER],
        expect=[(C, "r" * 45 + "-f")],
        warnings=[Warn.FRONTEND_NOT_DISCOVERABLE, Warn.SERVICE_NAME_TOO_LONG],
        skipped={"r" * 45 + "-pool-relay": Warn.SERVICE_NAME_TOO_LONG},
    ),
    "karmada-exports-the-relay-export-of-a-44-character-dgd": Row(
        implementation="karmada",
        dgd="r" * 44,
        components=[fe("f"), WORKER],
        expect=[(C, "r" * 44 + "-pool-relay"), (C, "r" * 44 + "-f")],
        warnings=[Warn.FRONTEND_NOT_DISCOVERABLE],
    ),
    "karmada-reports-a-name-over-63-as-invalid-not-as-too-long": Row(
        implementation="karmada",
        dgd=LONG_DGD,
        components=[fe(LONG_FE), WORKER],
        expect=[],
        warnings=[Warn.INVALID_SERVICE_NAME, Warn.SERVICE_NAME_TOO_LONG],
        skipped={
            f"{LONG_DGD}-pool-relay": Warn.SERVICE_NAME_TOO_LONG,
            f"{LONG_DGD}-{LONG_FE}": Warn.INVALID_SERVICE_NAME,
        },
    ),
    # foreign exports (docs/exports.md, 'Ownership, repair and withdrawal': never adopted)
    **{
        f"wanted-name-exported-by-{who}-is-foreign-never-adopted-or-repaired": Row(
            components=[fe("Frontend"), WORKER],
            exports=[foreign(RELAY_EXPORT, who, label=None), foreign(FE, who, label="other")],
            expect=[(F, RELAY_EXPORT), (F, FE)],
        )
        for who in FOREIGN_OWNERS
    },
    **{
        f"unwanted-export-of-{who}-is-never-withdrawn": Row(
            components=[fe("chat"), WORKER],
            exports=[foreign(FE, who), foreign("pool-old", who)],
            expect=[(C, RELAY_EXPORT), (C, "pool-chat")],
            warnings=[Warn.FRONTEND_NOT_DISCOVERABLE],
        )
        for who in FOREIGN_OWNERS
    },
    # exports being deleted (docs/exports.md, 'Ownership, repair and withdrawal')
    "our-terminating-wanted-export-waits-and-is-not-repaired": Row(
        components=[fe("Frontend"), WORKER],
        exports=[
            export(RELAY_EXPORT, ref(blockOwnerDeletion=False), label=None, terminating=True),
            ours(FE, terminating=True),
        ],
        expect=[(WAIT, RELAY_EXPORT), (WAIT, FE)],
    ),
    "a-foreign-terminating-wanted-export-waits": Row(
        components=[fe("Frontend"), WORKER],
        exports=[foreign(FE, "user-no-owner", terminating=True)],
        expect=[(C, RELAY_EXPORT), (WAIT, FE)],
    ),
    "our-terminating-unwanted-export-waits-and-is-not-withdrawn-again": Row(
        components=[WORKER],
        exports=[ours(RELAY_EXPORT), ours(FE, terminating=True)],
        expect=[(N, RELAY_EXPORT), (WAIT, FE)],
        warnings=[Warn.NO_FRONTEND],
    ),
    "a-foreign-terminating-unwanted-export-is-not-touched": Row(
        components=[WORKER],
        exports=[foreign(FE, "another-relay", terminating=True)],
        expect=[(C, RELAY_EXPORT)],
        warnings=[Warn.NO_FRONTEND],
    ),
    # repair (docs/exports.md, 'Ownership, repair and withdrawal'; fields checked in
    # their own table below)
    "our-export-with-a-changed-label-or-controller-reference-is-repaired": Row(
        components=[fe("Frontend"), WORKER],
        exports=[ours(RELAY_EXPORT, label="other-dgd"), export(FE, ref(blockOwnerDeletion=False))],
        expect=[(R, RELAY_EXPORT), (R, FE)],
    ),
}


@pytest.mark.parametrize("row", list(ROWS.values()), ids=list(ROWS))
def test_export_plan_rule(row: Row) -> None:
    p = run(
        relay=make_relay(row.dgd),
        pool=make_pool(*row.components, name=row.dgd),
        exports=row.exports,
        implementation=row.implementation,
    )
    assert verbs(p) == list(row.expect)
    assert sorted(reasons(p)) == sorted(row.warnings)
    assert {s.name: s.reason for s in p.lines} == dict(row.skipped)
    assert all(s.state == "Skipped" for s in p.lines)


def test_every_foreign_owner_of_the_table_is_really_not_this_relays_control() -> None:
    relay = make_relay()
    for who, owners in FOREIGN_OWNERS.items():
        assert not controlled_by(export("x", *owners), relay.uid), who


# --------------------------------------------------------------------------- what an action carries


def test_every_action_on_an_existing_export_carries_the_cached_object_checked() -> None:
    # The executor's uid + resourceVersion preconditions come from Action.export:
    # it must be the very object whose controller the plan checked.
    cached = [
        ours(RELAY_EXPORT),
        ours(FE, label="x"),
        ours("pool-gone"),
        foreign("pool-chat", "user-no-owner"),
        ours("pool-old", terminating=True),
    ]
    p = run(pool=make_pool(fe("Frontend"), fe("chat"), WORKER), exports=cached)
    by_name = {e["metadata"]["name"]: e for e in cached}
    assert {a.name for a in p.actions} == set(by_name)
    for a in p.actions:
        assert a.live is by_name[a.name], a


def test_only_exports_we_no_longer_want_are_marked_unwanted() -> None:
    cached = [ours(RELAY_EXPORT), ours("pool-old"), ours("pool-going", terminating=True)]
    cached.append(ours(FE, terminating=True))
    p = run(pool=make_pool(fe("Frontend"), fe("chat"), WORKER), exports=cached)
    assert [(a.verb, a.name, a.wanted) for a in p.actions] == [
        (N, RELAY_EXPORT, True),
        (WAIT, FE, True),
        (C, "pool-chat", True),
        (WAIT, "pool-going", False),
        (W, "pool-old", False),
    ]


def test_a_create_carries_no_export_and_no_fields() -> None:
    p = run(pool=make_pool(WORKER))
    (a,) = p.actions
    assert (a.verb, a.name, a.live, a.fields) == (Verb.CREATE, RELAY_EXPORT, None, ())
    assert a.body == export_body(SE, make_relay(), RELAY_EXPORT)


def test_nothing_to_do_is_verb_none_with_no_fields() -> None:
    p = run(pool=make_pool(WORKER), exports=[ours(RELAY_EXPORT)])
    (a,) = p.actions
    assert a.verb is Verb.NONE
    assert a.fields == ()


# --------------------------------------------------------------------------- repair fields

#: Our controller reference, changed by someone: each is applied back.
REFERENCE_DRIFTS = {
    "block-owner-deletion-false": ref(blockOwnerDeletion=False),
    "block-owner-deletion-removed": {k: v for k, v in ref().items() if k != "blockOwnerDeletion"},
    "reference-name-changed-same-uid": ref(name="renamed"),
    "reference-api-version-changed": ref(api_version="nvidia.com/v1"),
    "reference-kind-changed": ref(kind="Other"),
}


@pytest.mark.parametrize(
    ("cached", "fields"),
    [
        pytest.param(ours(RELAY_EXPORT, label=None), ("label",), id="label-missing"),
        pytest.param(
            ours(RELAY_EXPORT, labels=None), ("label",), id="labels-null-after-a-user-edit"
        ),
        pytest.param(ours(RELAY_EXPORT, label="other-dgd"), ("label",), id="label-names-another"),
        pytest.param(ours(RELAY_EXPORT, label=""), ("label",), id="label-emptied"),
        *(
            pytest.param(export(RELAY_EXPORT, r), ("controllerReference",), id=i)
            for i, r in REFERENCE_DRIFTS.items()
        ),
        pytest.param(
            export(RELAY_EXPORT, ref(blockOwnerDeletion=False), label="x"),
            ("label", "controllerReference"),
            id="both",
        ),
    ],
)
def test_our_export_with_a_drifted_owned_field_is_repaired_naming_the_fields(
    cached: dict[str, Any], fields: tuple[str, ...]
) -> None:
    p = run(pool=make_pool(WORKER), exports=[cached])
    (a,) = p.actions
    assert (a.verb, a.fields) == (Verb.APPLY, fields)
    assert repair_fields(cached, make_relay()) == fields


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param({"annotations": {"user": "note"}}, id="annotations"),
        pytest.param({"finalizers": ["mcs.example/cleanup"]}, id="finalizers"),
        pytest.param({"labels": {DGD_NAME: NAME, "team": "a"}}, id="other-labels"),
        pytest.param({"generation": 9, "resourceVersion": "999"}, id="versions"),
        pytest.param({"managedFields": [{"manager": "kubectl"}]}, id="managed-fields"),
        pytest.param(
            {
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "cm"},
                    ref(),
                ]
            },
            id="another-non-controller-owner",
        ),
        pytest.param(
            {"ownerReferences": [{**ref(), "unknownField": "x"}]},
            id="unknown-key-in-our-reference",
        ),
    ],
)
def test_fields_we_do_not_own_are_irrelevant(extra: dict[str, Any]) -> None:
    cached = ours(RELAY_EXPORT, **extra)
    cached["status"] = {"conditions": [{"type": "Valid", "status": "False"}]}
    cached["spec"] = {"whatever": True}
    p = run(pool=make_pool(WORKER), exports=[cached])
    assert verbs(p) == [(N, RELAY_EXPORT)]
    assert repair_fields(cached, make_relay()) == ()


def test_our_export_being_deleted_is_not_repaired_even_if_every_field_drifted() -> None:
    cached = export(RELAY_EXPORT, ref(blockOwnerDeletion=False, name="x"), terminating=True)
    cached["metadata"].pop("labels")
    p = run(pool=make_pool(WORKER), exports=[cached])
    assert verbs(p) == [(WAIT, RELAY_EXPORT)]
    assert p.actions[0].fields == ()


def test_a_repair_targets_this_relays_label_value_not_the_pools_object() -> None:
    relay = make_relay("qa")
    cached = export("qa-pool-relay", ref(name="qa"), label="qa")
    assert repair_fields(cached, relay) == ()
    assert repair_fields(cached, make_relay("qb")) == ("label", "controllerReference")


# --------------------------------------------------------------------------- withdrawal


@pytest.mark.parametrize("reason", WITHDRAWAL_REASONS, ids=str)
def test_every_withdrawal_reason_withdraws_all_our_exports_and_nothing_else(
    reason: Reason,
) -> None:
    pool = None if reason is Reason.DGD_NOT_FOUND else make_pool(fe("Frontend"), WORKER)
    cached = [
        ours(RELAY_EXPORT),
        ours(FE, label="drifted"),
        ours("pool-renamed-long-ago"),
        ours("pool-going", terminating=True),
        foreign("pool-user", "user-no-owner"),
        foreign("pool-other", "another-relay"),
        foreign("pool-old", "previous-incarnation-of-this-relay"),
        foreign("pool-deploy", "another-kind-deployment"),
    ]
    p = run(
        decision=decision(reason, "why"),
        pool=pool,
        exports=cached,
        cluster_id=ClusterID(True, cluster_property("somewhere-else"), ABOUT_API),
    )
    assert verbs(p) == [
        (W, FE),
        (WAIT, "pool-going"),
        (W, RELAY_EXPORT),
        (W, "pool-renamed-long-ago"),
    ]
    assert p.advisories == ()
    assert p.lines == ()


@pytest.mark.parametrize("reason", WITHDRAWAL_REASONS, ids=str)
def test_a_withdrawn_relay_with_problem_names_records_no_warning_about_them(
    reason: Reason,
) -> None:
    pool = make_pool(fe("my_fe"), fe(K56), name=NAME)
    p = run(decision=decision(reason, "why"), pool=pool, implementation="karmada")
    assert p == Plan()


def test_a_dgd_replaced_while_published_keeps_the_exports_we_control() -> None:
    # The exports belong to the relay, not to the DGD: a new DGD of the same name
    # (new uid) needs no write unless its frontends changed.
    cached = [ours(RELAY_EXPORT), ours(FE)]
    same = run(pool=make_pool(fe("Frontend"), WORKER, uid="dgd-B"), exports=cached)
    assert verbs(same) == [(N, RELAY_EXPORT), (N, FE)]
    moved = run(pool=make_pool(fe("chat"), WORKER, uid="dgd-B"), exports=cached)
    assert verbs(moved) == [(N, RELAY_EXPORT), (C, "pool-chat"), (W, FE)]


def test_a_dgd_created_again_after_withdrawal_is_exported_again() -> None:
    gone = run(decision=decision(Reason.DGD_NOT_FOUND, "gone"), exports=[ours(RELAY_EXPORT)])
    assert verbs(gone) == [(W, RELAY_EXPORT)]
    back = run(pool=make_pool(fe("Frontend"), WORKER, uid="dgd-B"))
    assert verbs(back) == [(C, RELAY_EXPORT), (C, FE)]


def test_a_recreated_relay_does_not_touch_its_previous_incarnations_exports() -> None:
    old = [ours(RELAY_EXPORT), ours(FE), ours("pool-stale")]
    p = run(
        relay=make_relay(uid="relay-uid-2"), pool=make_pool(fe("Frontend"), WORKER), exports=old
    )
    assert verbs(p) == [(F, RELAY_EXPORT), (F, FE)]


# --------------------------------------------------------------------------- warnings


def test_warnings_are_aggregated_one_per_reason_listing_every_name() -> None:
    pool = make_pool(fe("my_fe"), fe("fe-"), fe("Frontend"), fe(K56), fe("g" * 51), WORKER)
    p = run(pool=pool, implementation="karmada")
    assert reasons(p) == [Warn.INVALID_SERVICE_NAME, Warn.SERVICE_NAME_TOO_LONG]
    invalid, too_long = p.advisories
    assert "pool-my_fe" in invalid.message
    assert "pool-fe-" in invalid.message
    assert f"pool-{K56}" in too_long.message
    assert "pool-" + "g" * 51 in too_long.message
    assert "55" in too_long.message
    assert FE not in invalid.message + too_long.message
    assert [s.name for s in p.lines] == [
        "pool-my_fe",
        "pool-fe-",
        f"pool-{K56}",
        "pool-" + "g" * 51,
    ]


@pytest.mark.parametrize(
    ("components", "implementation", "reason"),
    [
        pytest.param([fe("my_fe"), WORKER], "mcs", Warn.INVALID_SERVICE_NAME, id="invalid"),
        pytest.param([fe(K56), WORKER], "karmada", Warn.SERVICE_NAME_TOO_LONG, id="too-long"),
        pytest.param([WORKER], "mcs", Warn.NO_FRONTEND, id="no-frontend"),
    ],
)
def test_a_pool_warning_is_related_to_the_dgd_at_the_resource_version_read(
    components: list[dict[str, Any]], implementation: str, reason: Warn
) -> None:
    p = run(pool=make_pool(*components), implementation=implementation)
    (w,) = p.advisories
    assert w.reason is reason
    assert w.related == {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "namespace": NS,
        "name": NAME,
        "uid": "dgd-uid",
        "resourceVersion": DGD_RV,
    }


def test_no_frontend_message_names_the_dgd() -> None:
    (w,) = run(pool=make_pool(WORKER)).advisories
    assert "'pool'" in w.message
    assert "frontend" in w.message


def test_skipped_lines_explain_why() -> None:
    p = run(pool=make_pool(fe(K56), fe("my_fe"), WORKER), implementation="karmada")
    lines = {s.name: s for s in p.lines}
    assert "56 characters" in lines[f"pool-{K56}"].message
    assert "55" in lines[f"pool-{K56}"].message
    assert "lower case alphanumeric" in lines["pool-my_fe"].message
    assert lines["pool-my_fe"].to_dict()["reason"] == "InvalidServiceName"


def test_frontends_that_are_all_invalid_do_not_count_as_no_frontend() -> None:
    # NoFrontend is about the DGD's components; their names have their own warning.
    p = run(pool=make_pool(fe("my_fe"), WORKER))
    assert reasons(p) == [Warn.INVALID_SERVICE_NAME]


def test_warning_reasons_are_the_spec_event_reasons() -> None:
    assert {w.value for w in Warn} == {
        "ExportFailed",
        "InvalidServiceName",
        "ServiceNameTooLong",
        "NoFrontend",
        "ClusterIDMismatch",
        "ForeignService",
        "ExportStuckTerminating",
        "FrontendNotDiscoverable",
    }


# --------------------------------------------------------------------------- cluster ID


def cluster_property(value: Any = "east", rv: str = "11", *, spec: bool = True) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": ABOUT_API,
        "kind": "ClusterProperty",
        "metadata": {"name": CLUSTER_ID_PROPERTY, "uid": "prop-uid", "resourceVersion": rv},
    }
    if spec:
        obj["spec"] = {"value": value}
    return obj


def mismatches(p: Plan) -> list[Any]:
    return [w for w in p.advisories if w.reason is Warn.CLUSTER_ID_MISMATCH]


@pytest.mark.parametrize(
    ("relay_id", "cluster_id", "warns"),
    [
        pytest.param(
            "east", ClusterID(True, cluster_property("east"), ABOUT_API), False, id="same"
        ),
        pytest.param(
            "east", ClusterID(True, cluster_property("west"), ABOUT_API), True, id="different"
        ),
        # No spec.clusterId: the relay takes the cluster's own ID, nothing disagrees.
        pytest.param(
            None, ClusterID(True, cluster_property("west"), ABOUT_API), False, id="unset-takes-it"
        ),
        pytest.param("east", ClusterID(True, None, ABOUT_API), False, id="no-property"),
        pytest.param("east", ClusterID(True, cluster_property(""), ABOUT_API), False, id="empty"),
        pytest.param(
            "east", ClusterID(True, cluster_property(spec=False), ABOUT_API), False, id="no-spec"
        ),
        pytest.param(
            "east", ClusterID(True, cluster_property(None), ABOUT_API), False, id="null-value"
        ),
        pytest.param(
            "east", ClusterID(False, cluster_property("west"), ABOUT_API), False, id="not-checked"
        ),
        pytest.param("east", ClusterID(), False, id="about-api-absent"),
    ],
)
def test_cluster_id_mismatch_only_when_checked_and_the_property_has_another_value(
    relay_id: str | None, cluster_id: ClusterID, warns: bool
) -> None:
    p = run(
        relay=make_relay(cluster_id=relay_id),
        pool=make_pool(fe("Frontend"), WORKER),
        cluster_id=cluster_id,
    )
    assert len(mismatches(p)) == (1 if warns else 0)
    assert verbs(p) == [(C, RELAY_EXPORT), (C, FE)]  # the check never gates exports


@pytest.mark.parametrize(
    ("spec", "cluster_id", "effective"),
    [
        ("east", ClusterID(True, cluster_property("west"), ABOUT_API), "east"),
        ("", ClusterID(True, cluster_property("west"), ABOUT_API), "west"),
        ("", ClusterID(True, None, ABOUT_API), ""),
        ("", ClusterID(False, cluster_property("west"), ABOUT_API), ""),
        ("", ClusterID(), ""),
        ("member-1", ClusterID(), "member-1"),
    ],
    ids=["spec-wins", "property", "no-property", "not-checked", "no-about-api", "karmada"],
)
def test_the_effective_cluster_id(spec: str, cluster_id: ClusterID, effective: str) -> None:
    assert cluster_id.effective(spec) == effective


@pytest.mark.parametrize("checked", [False, True], ids=["unchecked", "even-if-asked-to-check"])
def test_karmada_never_warns_about_the_cluster_id(checked: bool) -> None:
    p = run(
        relay=make_relay(cluster_id="member-1"),
        pool=make_pool(fe("Frontend"), WORKER),
        implementation="karmada",
        cluster_id=ClusterID(checked, cluster_property("east"), ABOUT_API),
    )
    assert mismatches(p) == []


def test_cluster_id_mismatch_is_related_to_the_property_at_the_resource_version_read() -> None:
    p = run(
        relay=make_relay(cluster_id="east"),
        pool=make_pool(fe("Frontend"), WORKER),
        cluster_id=ClusterID(True, cluster_property("west", rv="12"), "about.k8s.io/v1beta1"),
    )
    (w,) = p.advisories
    assert w.reason is Warn.CLUSTER_ID_MISMATCH
    assert w.related == {
        "apiVersion": "about.k8s.io/v1beta1",
        "kind": "ClusterProperty",
        "name": CLUSTER_ID_PROPERTY,
        "uid": "prop-uid",
        "resourceVersion": "12",
    }
    assert "'east'" in w.message
    assert "'west'" in w.message


def test_a_changed_property_is_a_distinct_related_object() -> None:
    # Event series key on the related object: a new value must not be a repeat.
    relay, pool = make_relay(cluster_id="east"), make_pool(fe("Frontend"), WORKER)
    first = run(
        relay=relay, pool=pool, cluster_id=ClusterID(True, cluster_property("west", "1"), ABOUT_API)
    )
    second = run(
        relay=relay,
        pool=pool,
        cluster_id=ClusterID(True, cluster_property("north", "2"), ABOUT_API),
    )
    (a,), (b,) = mismatches(first), mismatches(second)
    assert a.related != b.related
    assert (a.related["resourceVersion"], b.related["resourceVersion"]) == ("1", "2")


def test_a_mismatch_comes_with_the_other_pool_warnings() -> None:
    p = run(
        relay=make_relay(cluster_id="east"),
        pool=make_pool(fe("my_fe"), WORKER),
        cluster_id=ClusterID(True, cluster_property("west"), ABOUT_API),
    )
    assert sorted(reasons(p)) == sorted([Warn.INVALID_SERVICE_NAME, Warn.CLUSTER_ID_MISMATCH])


# --------------------------------------------------------------------------- properties

NAME_CHARS = "aAbF.-_"
COMPONENT = st.fixed_dictionaries(
    {
        "name": st.text(NAME_CHARS, min_size=1, max_size=5)
        | st.sampled_from(["pool-relay", "Pool.Relay", "Frontend", "frontend"])
    },
    optional={
        "type": st.sampled_from(["frontend", "worker", "decode", "planner", "Frontend"]) | st.none()
    },
)
DGD_NAMES = st.sampled_from([NAME, "q", "r" * 44, "r" * 45, "s" * 48, "t" * 52])
DECISIONS = st.one_of(st.just(PUBLISHED), st.sampled_from([decision(r, "m") for r in Reason]))
OWNERS = st.sampled_from(
    [
        (ref(),),
        (ref(blockOwnerDeletion=False),),
        (ref(name="renamed"),),
        ({"kind": "ConfigMap", "name": "c", "uid": "cm"}, ref()),
        *FOREIGN_OWNERS.values(),
    ]
)
CLUSTER_IDS = st.builds(
    ClusterID,
    st.booleans(),
    st.none() | st.builds(cluster_property, st.sampled_from(["", "east", "west", None])),
    st.just(ABOUT_API),
)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    dgd = draw(DGD_NAMES)
    components = draw(st.lists(COMPONENT, max_size=6))
    candidates = [
        names.relay_name(dgd),
        *(names.component_service_name(dgd, c["name"]) for c in components),
        f"{dgd}-stale",
        "unrelated",
    ]
    exports = {}
    for name in draw(st.lists(st.sampled_from(candidates), max_size=6, unique=True)):
        exports[name] = export(
            name,
            *[
                {**o, "name": dgd} if o.get("uid") == RELAY_UID and o.get("name") == NAME else o
                for o in draw(OWNERS)
            ],
            label=draw(st.sampled_from([dgd, None, "other"])),
            terminating=draw(st.booleans()),
        )
    pool = make_pool(*components, name=dgd)
    # Each frontend's Service: the DGD's, someone else's, or none yet.
    services: dict[str, Mapping[str, Any]] = {}
    for name, theirs in dgds_services(pool).items():
        whose = draw(st.sampled_from(["the-dgds", "someone-elses", "none"]))
        if whose == "the-dgds":
            services[name] = theirs
        elif whose == "someone-elses":
            services[name] = service(name, DEPLOYMENT_REF)
    return {
        "relay": make_relay(dgd, cluster_id=draw(st.sampled_from([None, "east"]))),
        "pool": draw(st.none() | st.just(pool)),
        "decision": draw(DECISIONS),
        "exports": exports,
        "implementation": draw(st.sampled_from(["mcs", "karmada"])),
        "cluster_id": draw(CLUSTER_IDS),
        "services": services,
    }


def run_scenario(s: Mapping[str, Any], exports: Mapping[str, Any] | None = None) -> Plan:
    return plan(
        s["relay"],
        s["decision"],
        s["pool"],
        s["exports"] if exports is None else exports,
        implementation=Implementation(s["implementation"]),
        cluster_id=s["cluster_id"],
        resource=SE,
        # A scenario without Services of its own: the DGD's, one for each frontend.
        services=s["services"] if "services" in s else dgds_services(s["pool"]),
    )


def terminating(e: Mapping[str, Any]) -> bool:
    return bool(e["metadata"].get("deletionTimestamp"))


PROPERTY = settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(scenarios())
def test_plan_never_touches_what_is_not_ours_or_is_being_deleted(s: dict[str, Any]) -> None:
    p = run_scenario(s)
    relay, exports = s["relay"], s["exports"]
    for a in p.actions:
        e = exports.get(a.name)
        if a.verb is Verb.CREATE:
            assert e is None, a
            continue
        assert a.live is e, a
        assert e is not None
        if terminating(e):
            assert a.verb is Verb.WAIT, a
        elif not controlled_by(e, relay.uid):
            assert a.verb is Verb.FOREIGN, a
        else:
            assert a.verb in {Verb.APPLY, Verb.WITHDRAW, Verb.NONE}, a
        assert (a.verb is Verb.APPLY) == bool(a.fields), a


@PROPERTY
@given(scenarios())
def test_plan_creates_only_valid_names_once_each(s: dict[str, Any]) -> None:
    p = run_scenario(s)
    seen = [a.name for a in p.actions]
    assert len(seen) == len(set(seen))
    for a in [a for a in p.actions if a.verb is Verb.CREATE]:
        assert names.is_valid_service_name(a.name), a
        if s["implementation"] == "karmada":
            assert len(a.name) <= names.KARMADA_MAX_SERVICE_NAME, a
    planned = {a.name: a.verb for a in p.actions}
    for line in p.lines:
        assert (line.state, line.reason) in {
            ("Skipped", ExportLineReason.INVALID_SERVICE_NAME),
            ("Skipped", ExportLineReason.SERVICE_NAME_TOO_LONG),
            ("Skipped", ExportLineReason.FOREIGN_SERVICE),
            ("Pending", ExportLineReason.SERVICE_NOT_FOUND),
        }, line
        # a name not exported is at most withdrawn (ours) or waited for (being deleted)
        assert planned.get(line.name, Verb.WITHDRAW) in {Verb.WITHDRAW, Verb.WAIT}, line
    for a in p.actions:
        if a.wanted and a.name != names.relay_name(s["relay"].name):
            theirs = dgds_services(s["pool"])[a.name]
            assert s["services"].get(a.name) == theirs, "exported: a Service not the DGD's"


@PROPERTY
@given(scenarios())
def test_plan_covers_every_wanted_name_and_every_export_we_control(s: dict[str, Any]) -> None:
    p = run_scenario(s)
    relay, pool, exports = s["relay"], s["pool"], s["exports"]
    planned = {a.name: a.verb for a in p.actions}
    publishing = s["decision"].publish and pool is not None
    wanted: list[str] = []
    if publishing:
        candidates = [names.relay_name(relay.name), *pool.frontend_services]
        skipped = {x.name for x in p.lines}
        wanted = [n for n in dict.fromkeys(candidates) if n not in skipped]
        assert set(wanted) | skipped == set(candidates)
        assert [a.name for a in p.actions[: len(wanted)]] == wanted
        if names.relay_name(relay.name) in wanted:
            assert p.actions[0].name == names.relay_name(relay.name)
    else:
        assert p.advisories == ()
        assert p.lines == ()
        assert set(planned.values()) <= {Verb.WITHDRAW, Verb.WAIT}
    for a in p.actions:
        assert a.wanted is (a.name in wanted), a
    for name, e in exports.items():
        if name not in wanted and controlled_by(e, relay.uid):
            assert planned[name] is (Verb.WAIT if terminating(e) else Verb.WITHDRAW)
        elif name not in wanted:
            assert name not in planned


@PROPERTY
@given(scenarios())
def test_after_carrying_out_the_plan_a_second_pass_writes_nothing(s: dict[str, Any]) -> None:
    relay = s["relay"]
    exports = copy.deepcopy(s["exports"])
    for a in run_scenario(s).actions:
        if a.verb is Verb.CREATE:
            exports[a.name] = ours(a.name, label=relay.name)
            exports[a.name]["metadata"]["ownerReferences"] = [relay.owner_reference()]
        elif a.verb is Verb.APPLY:
            meta = exports[a.name]["metadata"]
            meta.setdefault("labels", {})[DGD_NAME] = relay.name
            meta["ownerReferences"] = [
                r for r in meta["ownerReferences"] if r.get("controller") is not True
            ] + [relay.owner_reference()]
        elif a.verb is Verb.WITHDRAW:
            del exports[a.name]
    second = run_scenario(s, exports)
    assert not [a for a in second.actions if a.verb in WRITES], second.actions
    assert second.advisories == run_scenario(s).advisories


# ------------------------------------------------------------------ a relay Service replaced

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def relay_service(*, headless: bool = True, created: datetime = T0, **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusterIP": "None" if headless else "10.96.0.7"}
    metadata = {"name": RELAY_EXPORT, "namespace": NS, "creationTimestamp": rfc3339(created)}
    return {"metadata": {**metadata, **meta}, "spec": spec}


def replaced_line() -> dict[str, dict[str, Any]]:
    return {
        RELAY_EXPORT: {
            "name": RELAY_EXPORT,
            "state": "Pending",
            "reason": ExportLineReason.SERVICE_REPLACED,
        }
    }


@pytest.mark.parametrize(
    ("service", "shown", "now", "want"),
    [
        # The cached Service has the other shape: withdraw, whatever the status says.
        (relay_service(headless=False), {}, T0, Hold(withdraw=True)),
        (relay_service(headless=False), replaced_line(), None, Hold(withdraw=True)),
        # Nothing said and the Service right or absent: a first publish, no hold.
        (relay_service(), {}, T0, None),
        (None, {}, T0, None),
        (None, {RELAY_EXPORT: {"name": RELAY_EXPORT, "reason": "Terminating"}}, T0, None),
        # The status remembers the replacement: held while the new Service is absent,
        # being deleted, or younger than REEXPORT_AFTER (looked at again then).
        (None, replaced_line(), T0, Hold(withdraw=False)),
        (
            relay_service(deletionTimestamp=rfc3339(T0)),
            replaced_line(),
            T0 + timedelta(minutes=5),
            Hold(withdraw=False),
        ),
        (relay_service(), replaced_line(), T0, Hold(False, T0 + REEXPORT_AFTER)),
        (
            relay_service(),
            replaced_line(),
            T0 + REEXPORT_AFTER - timedelta(microseconds=1),
            Hold(False, T0 + REEXPORT_AFTER),
        ),
        (relay_service(), replaced_line(), T0 + REEXPORT_AFTER, None),
        # Never stuck: a pass without the time, a Service without a creation time.
        (relay_service(), replaced_line(), None, None),
        (relay_service(creationTimestamp=None), replaced_line(), T0, None),
    ],
    ids=[
        "other-shape",
        "other-shape-no-time",
        "right-shape",
        "absent",
        "other-line",
        "replaced-absent",
        "replaced-terminating",
        "replaced-new",
        "replaced-just-before",
        "replaced-after",
        "replaced-no-time",
        "replaced-no-creation-time",
    ],
)
def test_the_relay_export_is_held_while_its_service_is_replaced(
    service: dict[str, Any] | None,
    shown: dict[str, dict[str, Any]],
    now: datetime | None,
    want: Hold | None,
) -> None:
    relay = make_relay()
    reshaped = service is not None and relay.reshaped(service)
    lines = ShownStatus.read({"exports": list(shown.values())}).lines()
    assert relay_export_hold(relay, service, lines, now, reshaped=reshaped) == want


def test_a_clusterip_relay_holds_for_a_headless_service() -> None:
    flat = relay_from_object(
        {
            "metadata": {"name": NAME, "namespace": NS, "uid": RELAY_UID, "generation": 1},
            "spec": {"service": {"headless": False}},
        },
        DEFAULTS,
    )
    headless, flat_service = relay_service(), relay_service(headless=False)
    assert flat.reshaped(headless)
    assert not flat.reshaped(flat_service)
    held = relay_export_hold(flat, headless, {}, T0, reshaped=flat.reshaped(headless))
    assert held == Hold(withdraw=True)
    assert relay_export_hold(flat, flat_service, {}, T0, reshaped=False) is None


def held_plan(exports: Iterable[Mapping[str, Any]], hold: Hold | None) -> Plan:
    pool = make_pool(fe("frontend"))
    return plan(
        make_relay(),
        PUBLISHED,
        pool,
        {e["metadata"]["name"]: e for e in exports},
        implementation=Implementation.MCS,
        cluster_id=ClusterID(),
        resource=SE,
        hold=hold,
        services=dgds_services(pool),
    )


def test_a_replaced_relay_service_withdraws_its_export_and_keeps_the_frontends() -> None:
    p = held_plan([ours(RELAY_EXPORT), ours(FE)], Hold(withdraw=True))
    assert [(a.verb, a.name, a.wanted) for a in p.actions] == [
        (W, RELAY_EXPORT, False),
        (N, FE, True),
    ]
    withdraw = p.actions[0]
    assert withdraw.live is not None
    assert withdraw.live["metadata"]["uid"] == f"uid-{RELAY_EXPORT}-{NS}", "deleted as read"
    assert [(line.name, line.state, line.reason) for line in p.lines] == [
        (RELAY_EXPORT, "Pending", ExportLineReason.SERVICE_REPLACED)
    ]
    assert p.lines[0].message == REPLACED_MESSAGE
    assert "spec.service.headless" in REPLACED_MESSAGE
    assert p.recheck_at is None


def test_a_withdrawn_relay_export_being_deleted_is_waited_for_and_still_pending() -> None:
    p = held_plan([ours(RELAY_EXPORT, terminating=True)], Hold(withdraw=True))
    assert [(a.verb, a.name, a.wanted) for a in p.actions] == [
        (WAIT, RELAY_EXPORT, False),
        (C, FE, True),
    ]
    done = [ActionResult(a, Result.DONE) for a in p.actions]
    assert [(x.name, x.state, x.reason) for x in lines_after(p, done)] == [
        (RELAY_EXPORT, "Pending", ExportLineReason.SERVICE_REPLACED),
        (FE, "Exported", ""),
    ]


def test_a_held_relay_export_is_not_created_until_the_hold_ends() -> None:
    ends = T0 + REEXPORT_AFTER
    p = held_plan([ours(FE)], Hold(withdraw=False, recheck_at=ends))
    assert [(a.verb, a.name) for a in p.actions] == [(N, FE)]
    assert p.recheck_at == ends
    assert [(line.name, line.reason) for line in p.lines] == [
        (RELAY_EXPORT, ExportLineReason.SERVICE_REPLACED)
    ]
    released = held_plan([ours(FE)], None)
    assert [(a.verb, a.name) for a in released.actions] == [(C, RELAY_EXPORT), (N, FE)]


def test_a_hold_never_touches_anyone_elses_export_nor_ours_once_the_service_is_right() -> None:
    theirs = foreign(RELAY_EXPORT, "user-no-owner")
    for hold in (Hold(withdraw=True), Hold(withdraw=False)):
        p = held_plan([theirs], hold)
        assert (F, RELAY_EXPORT) in [(a.verb, a.name) for a in p.actions]
        assert all(line.reason != ExportLineReason.SERVICE_REPLACED for line in p.lines)
    # Ours exists and only the status remembers a replacement: it is kept, not withdrawn.
    kept = held_plan([ours(RELAY_EXPORT), ours(FE)], Hold(withdraw=False))
    assert [(a.verb, a.name) for a in kept.actions] == [(N, RELAY_EXPORT), (N, FE)]
    assert kept.lines == ()


def test_a_failed_withdrawal_of_a_held_export_is_its_one_line() -> None:
    p = held_plan([ours(RELAY_EXPORT)], Hold(withdraw=True))
    results = [
        ActionResult(a, Result.FAILED, "forbidden") if a.verb is W else ActionResult(a, Result.DONE)
        for a in p.actions
    ]
    lines = lines_after(p, results)
    assert [(x.name, x.state) for x in lines if x.name == RELAY_EXPORT] == [
        (RELAY_EXPORT, "Failed")
    ]


# --------------------------------------------------------------------------- whose Service
# docs/exports.md, 'What is exported': a frontend name is exported only while its Service
# exists and is the DGD's: controlled by the DGD (the Grove path) or by a
# DynamoComponentDeployment the DGD controls. Anyone else's is skipped; none yet waits.

DGD_UID = "dgd-uid"
DGD_REF = ref(DGD_UID, kind="DynamoGraphDeployment", api_version="nvidia.com/v1beta1")
DCD_NAME = FE
DCD_UID = "dcd-uid"
DCD_REF = ref(
    DCD_UID, kind="DynamoComponentDeployment", name=DCD_NAME, api_version="nvidia.com/v1alpha1"
)


def service(name: str, *owners: Mapping[str, Any], rv: str = "5") -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "uid": f"svc-uid-{name}",
        "resourceVersion": rv,
    }
    if owners:
        metadata["ownerReferences"] = [dict(o) for o in owners]
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata}


def dcd(*owners: Mapping[str, Any], uid: str = DCD_UID, name: str = DCD_NAME) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NS, "uid": uid, "resourceVersion": "9"}
    if owners:
        metadata["ownerReferences"] = [dict(o) for o in owners]
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoComponentDeployment",
        "metadata": metadata,
    }


def with_services(
    services: Iterable[Mapping[str, Any]],
    dcds: Iterable[Mapping[str, Any]] = (),
    exports: Iterable[Mapping[str, Any]] = (),
    decision: Decision = PUBLISHED,
    pool: Pool | None = None,
) -> Plan:
    return plan(
        make_relay(),
        decision,
        pool or make_pool(fe("Frontend"), WORKER, uid=DGD_UID),
        {e["metadata"]["name"]: e for e in exports},
        implementation=Implementation.MCS,
        cluster_id=ClusterID(),
        resource=SE,
        services={s["metadata"]["name"]: s for s in services},
        component_deployments={d["metadata"]["name"]: d for d in dcds},
    )


THE_DGDS: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {
    "controlled-by-the-dgd": ([service(FE, DGD_REF)], []),
    "controlled-by-the-dgd-at-another-version": (
        [service(FE, {**DGD_REF, "apiVersion": "nvidia.com/v1alpha1"})],
        [],
    ),
    "controlled-by-a-dcd-the-dgd-controls": ([service(FE, DCD_REF)], [dcd(DGD_REF)]),
    "the-dgd-also-an-owner-not-controller-of-a-dcd-it-controls": (
        [service(FE, ref("x", kind="Other", controller=False), DCD_REF)],
        [dcd(DGD_REF)],
    ),
}


@pytest.mark.parametrize(("services", "dcds"), list(THE_DGDS.values()), ids=list(THE_DGDS))
def test_a_frontend_whose_service_is_the_dgds_is_exported(
    services: list[dict[str, Any]], dcds: list[dict[str, Any]]
) -> None:
    p = with_services(services, dcds)
    assert verbs(p) == [(C, RELAY_EXPORT), (C, FE)]
    assert p.advisories == ()
    assert p.lines == ()


def test_a_frontend_whose_service_does_not_exist_is_not_exported_and_pending_naming_it() -> None:
    """An export made ahead of its Service would claim the name for whoever
    creates a Service of it later. Nothing is exported until the Service exists."""
    p = with_services([])
    assert verbs(p) == [(C, RELAY_EXPORT)], "not exported ahead of its Service"
    (line,) = p.lines
    assert (line.name, line.state, line.reason) == (FE, "Pending", "ServiceNotFound")
    assert line.message == service_not_found(FE)
    assert f"Service {FE} does not exist" in line.message
    assert p.advisories == (), "Dynamo's operator makes it: nothing to warn of"


def test_our_export_of_a_frontend_whose_service_is_gone_is_withdrawn_and_made_again() -> None:
    gone = with_services([], exports=[ours(RELAY_EXPORT), ours(FE)])
    assert [(a.verb, a.name, a.wanted) for a in gone.actions] == [
        (N, RELAY_EXPORT, True),
        (W, FE, False),
    ]
    assert [(line.name, line.state, line.reason) for line in gone.lines] == [
        (FE, "Pending", "ServiceNotFound")
    ]
    back = with_services([service(FE, DGD_REF)], exports=[ours(RELAY_EXPORT)])
    assert verbs(back) == [(N, RELAY_EXPORT), (C, FE)]
    assert back.lines == ()


def test_a_service_made_later_by_someone_else_is_never_exported() -> None:
    """The window the issue measured (27 ms to 3 s of another team's Service beside our
    export) does not open: no export before the Service, none once it is theirs."""
    before = with_services([])
    after = with_services([service(FE, DEPLOYMENT_REF)])
    for p in (before, after):
        assert FE not in {a.name for a in p.actions if a.verb is C}
    assert [(line.state, line.reason) for line in after.lines] == [("Skipped", "ForeignService")]


def test_anyone_elses_export_of_a_frontend_without_a_service_is_left_alone() -> None:
    theirs = foreign(FE, "user-no-owner")
    p = with_services([], exports=[ours(RELAY_EXPORT), theirs])
    assert verbs(p) == [(N, RELAY_EXPORT)]
    assert [(line.name, line.reason) for line in p.lines] == [(FE, "ServiceNotFound")]


def test_a_frontend_waiting_for_its_service_keeps_its_line_through_the_withdrawal() -> None:
    """One line per name: the withdrawal done, the line says what it waits for; failed,
    it shows the failure."""
    p = with_services([], exports=[ours(RELAY_EXPORT), ours(FE)])
    done = [ActionResult(a, Result.DONE) for a in p.actions]
    assert [(x.name, x.state, x.reason) for x in lines_after(p, done)] == [
        (FE, "Pending", "ServiceNotFound"),
        (RELAY_EXPORT, "Exported", ""),
    ]
    failed = [
        ActionResult(a, Result.FAILED, "forbidden") if a.verb is W else ActionResult(a, Result.DONE)
        for a in p.actions
    ]
    assert [(x.name, x.state) for x in lines_after(p, failed)] == [
        (FE, "Failed"),
        (RELAY_EXPORT, "Exported"),
    ]


def test_a_frontend_waiting_for_its_service_keeps_the_pool_pending_not_exported() -> None:
    """`Exported` is about every export the pool wants: a frontend that waits for its
    Service is not exported yet, and the condition says which and why."""
    p = with_services([], exports=[ours(RELAY_EXPORT)])
    lines = lines_after(p, [ActionResult(a, Result.DONE) for a in p.actions])
    said = exported(lines, {RELAY_EXPORT: Verdict(Judgement.CONFIRMED)}, published=True)
    assert (said.status, said.reason) == ("Unknown", "Pending")
    assert said.message == f"{FE}: {service_not_found(FE)}"


def test_invalid_and_too_long_names_are_skipped_not_waited_for() -> None:
    """No Service can ever have an invalid name, and Karmada never imports a long one:
    those say why for good, not that a Service is missing."""
    invalid = run(pool=make_pool(fe("my_fe"), WORKER), services={})
    assert [(x.state, x.reason) for x in invalid.lines] == [("Skipped", "InvalidServiceName")]
    long = run(pool=make_pool(fe(K56), WORKER), implementation="karmada", services={})
    assert [(x.state, x.reason) for x in long.lines] == [("Skipped", "ServiceNameTooLong")]


DEPLOYMENT_REF = ref("deploy-uid", kind="Deployment", name="payments-db", api_version="apps/v1")
SOMEONE_ELSES: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], str]] = {
    "no-owner": ([service(FE)], [], "no controller"),
    "the-dgd-an-owner-but-not-its-controller": (
        [service(FE, {**DGD_REF, "controller": False})],
        [],
        "no controller",
    ),
    "another-teams-deployment": (
        [service(FE, DEPLOYMENT_REF)],
        [],
        "controller Deployment/payments-db",
    ),
    "a-previous-dgd-of-that-name": (
        [service(FE, {**DGD_REF, "uid": "old-dgd-uid"})],
        [],
        f"controller DynamoGraphDeployment/{NAME}",
    ),
    "a-dgd-kind-of-another-group": (
        [service(FE, {**DGD_REF, "apiVersion": "example.com/v1"})],
        [],
        f"controller DynamoGraphDeployment/{NAME}",
    ),
    "a-dcd-not-known": (
        [service(FE, DCD_REF)],
        [],
        f"controller DynamoComponentDeployment/{DCD_NAME}",
    ),
    "a-dcd-of-another-dgd": (
        [service(FE, DCD_REF)],
        [dcd({**DGD_REF, "uid": "other-dgd-uid", "name": "other"})],
        f"controller DynamoComponentDeployment/{DCD_NAME}",
    ),
    "a-dcd-without-a-controller": (
        [service(FE, DCD_REF)],
        [dcd()],
        f"controller DynamoComponentDeployment/{DCD_NAME}",
    ),
    "a-dcd-replaced-since-the-service-named-it": (
        [service(FE, DCD_REF)],
        [dcd(DGD_REF, uid="new-dcd-uid")],
        f"controller DynamoComponentDeployment/{DCD_NAME}",
    ),
    "a-dcd-kind-of-another-group": (
        [service(FE, {**DCD_REF, "apiVersion": "example.com/v1"})],
        [dcd(DGD_REF)],
        f"controller DynamoComponentDeployment/{DCD_NAME}",
    ),
}


@pytest.mark.parametrize(
    ("services", "dcds", "controller"), list(SOMEONE_ELSES.values()), ids=list(SOMEONE_ELSES)
)
def test_a_frontend_whose_service_is_someone_elses_is_skipped_naming_its_controller(
    services: list[dict[str, Any]], dcds: list[dict[str, Any]], controller: str
) -> None:
    p = with_services(services, dcds)
    assert verbs(p) == [(C, RELAY_EXPORT)], "not exported"
    (line,) = p.lines
    assert (line.name, line.state, line.reason) == (FE, "Skipped", "ForeignService")
    assert controller in line.message
    (warning,) = p.advisories
    assert warning.reason is Warn.FOREIGN_SERVICE
    assert warning.type == "Warning"
    assert controller in warning.message
    assert FE in warning.message
    svc = services[0]["metadata"]
    assert warning.related == {
        "apiVersion": "v1",
        "kind": "Service",
        "namespace": NS,
        "name": FE,
        "uid": svc["uid"],
        "resourceVersion": svc["resourceVersion"],
    }


def test_our_export_of_a_name_whose_service_is_someone_elses_is_withdrawn() -> None:
    p = with_services([service(FE, DEPLOYMENT_REF)], exports=[ours(RELAY_EXPORT), ours(FE)])
    assert [(a.verb, a.name, a.wanted) for a in p.actions] == [
        (N, RELAY_EXPORT, True),
        (W, FE, False),
    ]
    assert [(line.name, line.reason) for line in p.lines] == [(FE, "ForeignService")]
    # Once the Service is the DGD's again the export is created again.
    back = with_services([service(FE, DGD_REF)], exports=[ours(RELAY_EXPORT)])
    assert verbs(back) == [(N, RELAY_EXPORT), (C, FE)]


def test_anyone_elses_export_of_a_foreign_services_name_is_left_alone() -> None:
    theirs = foreign(FE, "user-no-owner")
    p = with_services([service(FE)], exports=[ours(RELAY_EXPORT), theirs])
    assert verbs(p) == [(N, RELAY_EXPORT)]
    assert [(line.name, line.reason) for line in p.lines] == [(FE, "ForeignService")]


def test_a_failed_withdrawal_for_a_foreign_service_shows_on_its_one_line() -> None:
    p = with_services([service(FE)], exports=[ours(RELAY_EXPORT), ours(FE)])
    results = [
        ActionResult(a, Result.FAILED, "forbidden") if a.verb is W else ActionResult(a, Result.DONE)
        for a in p.actions
    ]
    assert [(x.name, x.state) for x in lines_after(p, results)] == [
        (FE, "Failed"),
        (RELAY_EXPORT, "Exported"),
    ]


def test_the_relay_service_is_not_judged_as_a_frontends() -> None:
    # <dgd>-pool-relay is the relay's own Service: its checks are the relay's (Published).
    pool = make_pool(fe("pool-relay"), WORKER, uid=DGD_UID)
    p = with_services([service(RELAY_EXPORT)], pool=pool)
    assert verbs(p) == [(C, RELAY_EXPORT)]
    assert p.advisories == ()
    assert p.lines == ()


def test_one_warning_per_foreign_service_each_related_to_its_service() -> None:
    pool = make_pool(fe("Frontend"), fe("chat"), WORKER, uid=DGD_UID)
    p = with_services([service(FE), service("pool-chat", DEPLOYMENT_REF)], pool=pool)
    assert verbs(p) == [(C, RELAY_EXPORT)]
    assert [(w.reason, (w.related or {}).get("name")) for w in p.advisories] == [
        (Warn.FOREIGN_SERVICE, FE),
        (Warn.FOREIGN_SERVICE, "pool-chat"),
    ]
    assert [line.name for line in p.lines] == [FE, "pool-chat"]


@pytest.mark.parametrize("reason", WITHDRAWAL_REASONS, ids=str)
def test_a_withdrawn_relay_says_nothing_about_foreign_services(reason: Reason) -> None:
    p = with_services([service(FE)], exports=[ours(FE)], decision=decision(reason, "why"))
    assert [(a.verb, a.name) for a in p.actions] == [(W, FE)]
    assert p.advisories == ()
    assert p.lines == ()


# ------------------------------------------------------------------ carried for the imports
CILIUM = {"service.cilium.io/global-sync-endpoint-slices": "true"}
CARRIED = {"exportedAnnotations": CILIUM, "exportedLabels": {"team": "inference"}}


def carrying(cached: list[dict[str, Any]] | None = None) -> Plan:
    return plan(
        make_relay(),
        PUBLISHED,
        make_pool(WORKER),
        {e["metadata"]["name"]: e for e in cached or []},
        implementation=Implementation.MCS,
        cluster_id=ClusterID(),
        resource=SE,
        spec=CARRIED,
    )


def test_every_export_carries_the_configured_annotations_and_labels_for_its_imports() -> None:
    (a,) = carrying().actions
    assert a.verb is Verb.CREATE
    assert a.body is not None
    assert a.body["spec"] == CARRIED
    assert "spec" not in export_body(SE, make_relay(), RELAY_EXPORT), "none configured: none"


def test_what_an_export_carries_is_repaired_and_others_additions_are_no_drift() -> None:
    right = {**ours(RELAY_EXPORT), "spec": CARRIED}
    assert carrying([right]).actions[0].verb is Verb.NONE
    others = {**CILIUM, "x": "y"}
    more = {**ours(RELAY_EXPORT), "spec": {**CARRIED, "exportedAnnotations": others}}
    assert carrying([more]).actions[0].verb is Verb.NONE, "another writer's addition"
    lost = {**ours(RELAY_EXPORT), "spec": {"exportedLabels": {"team": "inference"}}}
    (a,) = carrying([lost]).actions
    assert (a.verb, a.fields) == (Verb.APPLY, ("exportedAnnotations",))
    assert repair_fields(lost, make_relay(), CARRIED) == ("exportedAnnotations",)
    moved = {**ours(RELAY_EXPORT), "spec": {**CARRIED, "exportedLabels": {"team": "other"}}}
    assert carrying([moved]).actions[0].fields == ("exportedLabels",)


# ------------------------------------------------------------------ a frontend not found
def test_a_frontend_not_named_frontend_is_exported_but_said_not_discoverable() -> None:
    """The router finds a pool's frontends by `<dgd>-frontend` only: a pool with none of
    that name is one it never finds (a Warning); its line says so either way."""
    note = (ExportLineReason.FRONTEND_NOT_DISCOVERABLE, UNDISCOVERABLE)
    p = run(pool=make_pool(fe("chat"), WORKER))
    assert {a.name for a in p.actions} == {RELAY_EXPORT, "pool-chat"}
    (warning,) = [w for w in p.advisories if w.reason == Warn.FRONTEND_NOT_DISCOVERABLE]
    assert "pool-chat is exported" in warning.message
    assert "'pool-frontend'" in warning.message
    assert warning.related is not None
    assert warning.related["kind"] == "DynamoGraphDeployment"
    assert dict(p.notes) == {"pool-chat": note}
    beside = run(pool=make_pool(fe("chat"), fe("Frontend"), WORKER))
    assert {a.name for a in beside.actions} == {RELAY_EXPORT, FE, "pool-chat"}
    assert all(w.reason != Warn.FRONTEND_NOT_DISCOVERABLE for w in beside.advisories)
    assert dict(beside.notes) == {"pool-chat": note}, "the router passes it by"
    named = run(pool=make_pool(fe("Frontend"), WORKER))
    assert all(w.reason != Warn.FRONTEND_NOT_DISCOVERABLE for w in named.advisories)
    assert not named.notes
