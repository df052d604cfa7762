"""Publish, withdraw or hold (pool/plan.py): docs/crd.md, 'Published reasons, in
precedence order', one row per check.

The documented precedence (first match wins), by check:
relay terminating > invalid name > DGD unreadable > DGD not found > DGD terminating >
Kubernetes discovery disabled > no workers > global Dynamo namespace > ownership
conflict > invalid spec (which holds the pool as it runs instead of withdrawing it).
Every pair of checks that can be true at once has a row asserting the earlier one
wins. Messages say what to change.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dynamo_pool_operator.api.dgd import DISCOVERY_BACKEND_ANNOTATION, Pool, pool_from_object
from dynamo_pool_operator.api.relay import Relay, RelayDefaults, relay_from_object
from dynamo_pool_operator.pool.model import Decision
from dynamo_pool_operator.pool.plan import CHECKS, Reason, decide, decision
from dynamo_pool_operator.runtime.objects.meta import controller_of
from dynamo_pool_operator.runtime.objects.meta import is_controlled_by as controlled_by

DEFAULTS = RelayDefaults(image="relay:1", port=7000)
NS = "team"
NAME = "pool"
RELAY_UID = "relay-uid-1"

#: The checks by their function's name, in precedence order, with their reasons.
PRECEDENCE = [
    "relay_terminating",
    "invalid_name",
    "dgd_unreadable",
    "dgd_not_found",
    "dgd_terminating",
    "kubernetes_discovery_disabled",
    "no_workers",
    "global_dynamo_namespace",
    "ownership_conflict",
    "invalid_spec",
]
REASON = {
    "relay_terminating": Reason.RELAY_TERMINATING,
    "invalid_name": Reason.INVALID_CONFIGURATION,
    "dgd_unreadable": Reason.DGD_UNREADABLE,
    "dgd_not_found": Reason.DGD_NOT_FOUND,
    "dgd_terminating": Reason.DGD_TERMINATING,
    "kubernetes_discovery_disabled": Reason.KUBERNETES_DISCOVERY_DISABLED,
    "no_workers": Reason.NO_WORKERS,
    "global_dynamo_namespace": Reason.GLOBAL_DYNAMO_NAMESPACE,
    "ownership_conflict": Reason.OWNERSHIP_CONFLICT,
    "invalid_spec": Reason.INVALID_CONFIGURATION,
}


def make_relay(
    name: str = NAME, uid: str = RELAY_UID, *, terminating: bool = False, **spec: Any
) -> Relay:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": uid, "generation": 1}
    if terminating:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    return relay_from_object({"metadata": meta, "spec": spec}, DEFAULTS)


def make_pool(
    *components: dict[str, Any],
    name: str = NAME,
    annotations: dict[str, str] | None = None,
    terminating: bool = False,
    api_version: str = "nvidia.com/v1beta1",
    services: dict[str, Any] | None = None,
) -> Pool:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "uid": "dgd-uid",
        "resourceVersion": "1",
        "annotations": annotations or {},
    }
    if terminating:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    spec: dict[str, Any] = (
        {"services": services} if services is not None else {"components": list(components)}
    )
    return pool_from_object({"apiVersion": api_version, "metadata": meta, "spec": spec})


def owned_by(uid: str, *, kind: str = "DynamoPoolRelay", name: str = NAME, **ref: Any) -> dict:
    return {
        "metadata": {
            "name": f"{NAME}-pool-relay",
            "namespace": NS,
            "ownerReferences": [
                {
                    "apiVersion": "nvidia.com/v1alpha1",
                    "kind": kind,
                    "name": name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                    **ref,
                }
            ],
        }
    }


def ours() -> dict[str, Any]:
    return owned_by(RELAY_UID)


def no_owner() -> dict[str, Any]:
    return {"metadata": {"name": f"{NAME}-pool-relay", "namespace": NS}}


def run(
    relay: Relay,
    pool: Pool | None,
    objects: Mapping[str, Mapping[str, Any] | None] | None = None,
    backend: str = "kubernetes",
    unreadable: str = "",
) -> Decision:
    return decide(
        relay, pool, objects or {}, default_discovery_backend=backend, pool_unreadable=unreadable
    )


GOOD = (
    {"name": "Frontend", "type": "frontend"},
    {"name": "decode", "type": "decode"},
)


# --------------------------------------------------------------------------- publish


def test_a_healthy_pool_with_no_existing_objects_is_published() -> None:
    d = run(make_relay(), make_pool(*GOOD))
    assert d.reason is Reason.PUBLISHED
    assert d.publish
    assert "pool-pool-relay" in d.message


def test_a_pool_whose_objects_we_control_is_published() -> None:
    d = run(make_relay(), make_pool(*GOOD), {"Deployment": ours(), "Service": ours()})
    assert d.reason is Reason.PUBLISHED


def test_absent_objects_given_as_none_do_not_conflict() -> None:
    d = run(make_relay(), make_pool(*GOOD), {"Deployment": None, "Service": None})
    assert d.reason is Reason.PUBLISHED


@pytest.mark.parametrize("reason", [r for r in Reason if r is not Reason.PUBLISHED])
def test_only_published_means_publish(reason: Reason) -> None:
    assert not decision(reason, "m").publish
    assert decision(Reason.PUBLISHED, "m").publish


def test_reason_values_are_the_spec_condition_reasons() -> None:
    assert {r.value for r in Reason} == {
        "Published",
        "RelayTerminating",
        "InvalidConfiguration",
        "DGDUnreadable",
        "DGDNotFound",
        "DGDTerminating",
        "KubernetesDiscoveryDisabled",
        "NoWorkers",
        "GlobalDynamoNamespace",
        "OwnershipConflict",
    }


# --------------------------------------------------------------------------- one row per reason


@dataclass
class Scenario:
    relay_name: str = NAME
    relay_spec: dict[str, Any] = field(default_factory=dict)
    relay_terminating: bool = False
    dgd_exists: bool = True
    terminating: bool = False
    annotations: dict[str, str] = field(default_factory=dict)
    components: list[dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(list(GOOD)))
    objects: dict[str, Any] = field(default_factory=dict)
    backend: str = "kubernetes"
    unreadable: str = ""

    def decide(self) -> Decision:
        pool = (
            make_pool(
                *self.components,
                name=self.relay_name,
                annotations=self.annotations,
                terminating=self.terminating,
            )
            if self.dgd_exists
            else None
        )
        relay = make_relay(self.relay_name, terminating=self.relay_terminating, **self.relay_spec)
        return run(relay, pool, self.objects, self.backend, self.unreadable)


def _relay_terminating(s: Scenario) -> None:
    s.relay_terminating = True


def _invalid_spec(s: Scenario) -> None:
    s.relay_spec["replicas"] = -1


def _invalid_name(s: Scenario) -> None:
    s.relay_name = "Pool.A"


def _unreadable(s: Scenario) -> None:
    s.dgd_exists = False  # no readable version is cached
    s.unreadable = "at resourceVersion 7, depth limit exceeded"


def _not_found(s: Scenario) -> None:
    s.dgd_exists = False


def _terminating(s: Scenario) -> None:
    s.terminating = True


def _etcd(s: Scenario) -> None:
    s.annotations[DISCOVERY_BACKEND_ANNOTATION] = "etcd"


def _no_workers(s: Scenario) -> None:
    s.components = [c for c in s.components if c.get("type") != "decode"]


def _global_namespace(s: Scenario) -> None:
    for c in s.components:
        if c.get("type") == "frontend":
            c["globalDynamoNamespace"] = True


def _conflict(s: Scenario) -> None:
    s.objects["Deployment"] = owned_by("someone-else", kind="ReplicaSet", name="x")


MAKE_TRUE: dict[str, Callable[[Scenario], None]] = {
    "relay_terminating": _relay_terminating,
    "invalid_name": _invalid_name,
    "dgd_unreadable": _unreadable,
    "dgd_not_found": _not_found,
    "dgd_terminating": _terminating,
    "kubernetes_discovery_disabled": _etcd,
    "no_workers": _no_workers,
    "global_dynamo_namespace": _global_namespace,
    "ownership_conflict": _conflict,
    "invalid_spec": _invalid_spec,
}


@pytest.mark.parametrize("check", PRECEDENCE)
def test_each_check_alone_decides_with_its_reason(check: str) -> None:
    s = Scenario()
    MAKE_TRUE[check](s)
    d = s.decide()
    assert d.reason is REASON[check]
    assert not d.publish
    assert d.hold == (check == "invalid_spec"), "only an invalid spec holds the pool"


def test_the_baseline_scenario_publishes() -> None:
    assert Scenario().decide().reason is Reason.PUBLISHED


# Checks about the DGD's content cannot hold when there is no DGD.
_NEEDS_A_DGD = {
    "dgd_terminating",
    "kubernetes_discovery_disabled",
    "no_workers",
    "global_dynamo_namespace",
}
_NO_READABLE_DGD = {"dgd_unreadable", "dgd_not_found"}
CONFLICTS = [
    (a, b)
    for a, b in itertools.combinations(PRECEDENCE, 2)
    if not (a in _NO_READABLE_DGD and b in _NEEDS_A_DGD)
]


def _said(d: Decision, check: str) -> bool:
    """`d` is what `check` says (the two InvalidConfiguration checks told apart)."""
    if d.reason is not REASON[check]:
        return False
    if check == "invalid_name":
        return "not a valid Service name" in d.message
    if check == "invalid_spec":
        return d.hold
    return True


@pytest.mark.parametrize(
    ("winner", "loser"), CONFLICTS, ids=[f"{a}-beats-{b}" for a, b in CONFLICTS]
)
def test_precedence_conflict_reports_the_documented_winner(winner: str, loser: str) -> None:
    for order in ((winner, loser), (loser, winner)):
        s = Scenario()
        for check in order:
            MAKE_TRUE[check](s)
        d = s.decide()
        assert _said(d, winner), d


def test_precedence_conflicts_cover_every_coexisting_pair() -> None:
    assert len(CONFLICTS) == 37


@pytest.mark.parametrize(
    "loser", [c for c in PRECEDENCE if c not in ("invalid_name", "relay_terminating")]
)
def test_an_invalid_relay_name_beats_every_other_reason(loser: str) -> None:
    s = Scenario()
    _invalid_name(s)
    MAKE_TRUE[loser](s)
    d = s.decide()
    assert d.reason is Reason.INVALID_CONFIGURATION
    assert "not a valid Service name" in d.message
    assert not d.hold, "nothing of that name can run: nothing to hold"


def test_all_reasons_at_once_report_relay_terminating() -> None:
    s = Scenario()
    for check in PRECEDENCE:
        if check not in _NO_READABLE_DGD:
            MAKE_TRUE[check](s)
    assert s.decide().reason is Reason.RELAY_TERMINATING


def test_all_other_reasons_at_once_report_the_invalid_name() -> None:
    s = Scenario()
    for check in PRECEDENCE:
        if check not in (*_NO_READABLE_DGD, "relay_terminating"):
            MAKE_TRUE[check](s)
    assert _said(s.decide(), "invalid_name")


def test_an_invalid_spec_of_a_pool_that_would_be_withdrawn_withdraws_it() -> None:
    """Only a pool every other check would publish is held: a withdrawal reason wins."""
    for check in PRECEDENCE[PRECEDENCE.index("dgd_unreadable") : -1]:
        s = Scenario()
        _invalid_spec(s)
        MAKE_TRUE[check](s)
        d = s.decide()
        assert d.reason is REASON[check]
        assert not d.hold
        assert not d.keeps_pool


def test_all_dgd_reasons_at_once_report_terminating_first() -> None:
    s = Scenario()
    for check in PRECEDENCE[PRECEDENCE.index("dgd_terminating") :]:
        MAKE_TRUE[check](s)
    assert s.decide().reason is Reason.DGD_TERMINATING


def test_an_invalid_name_is_reported_before_spec_problems() -> None:
    s = Scenario()
    _invalid_name(s)
    _invalid_spec(s)
    d = s.decide()
    assert d.reason is Reason.INVALID_CONFIGURATION
    assert "not a valid Service name" in d.message


# --------------------------------------------------------------------------- messages


@pytest.mark.parametrize(
    ("reason", "phrases"),
    [
        (Reason.INVALID_CONFIGURATION, ["spec.replicas", "from 0 to", "nothing is withdrawn"]),
        (
            Reason.DGD_UNREADABLE,
            ["'pool' exists but cannot be decoded", "resourceVersion 7", "make it readable"],
        ),
        (Reason.DGD_NOT_FOUND, ["no DynamoGraphDeployment 'pool'", "namespace 'team'"]),
        (Reason.DGD_TERMINATING, ["'pool'", "being deleted"]),
        (
            Reason.KUBERNETES_DISCOVERY_DISABLED,
            ["'etcd'", "Kubernetes pod discovery", "'kubernetes'"],
        ),
        (Reason.NO_WORKERS, ["no worker component", "worker, prefill or decode"]),
        (Reason.GLOBAL_DYNAMO_NAMESPACE, ["'Frontend'", "'dynamo'", "its own Dynamo namespace"]),
        (
            Reason.OWNERSHIP_CONFLICT,
            [
                "Deployment 'pool-pool-relay'",
                "controller ReplicaSet/x",
                "never adopts",
                "delete the other object",
            ],
        ),
    ],
    ids=lambda v: str(v) if isinstance(v, Reason) else None,
)
def test_withdrawal_message_says_what_to_change(reason: Reason, phrases: list[str]) -> None:
    s = Scenario()
    MAKE_TRUE[next(c for c in reversed(PRECEDENCE) if REASON[c] is reason)](s)
    message = s.decide().message
    for phrase in phrases:
        assert phrase in message, message


# --------------------------------------------------------------------------- InvalidConfiguration


@pytest.mark.parametrize(
    ("name", "phrase"),
    [
        pytest.param("qwen3-0.6b", "lower case alphanumeric", id="dotted"),
        pytest.param("Qwen3", "lower case alphanumeric", id="upper-case"),
        pytest.param("Qwen3-0.6B", "lower case alphanumeric", id="dotted-and-upper"),
        pytest.param("1pool", "start with an alphabetic character", id="leading-digit"),
        pytest.param("a" * 53, "no more than 63 characters (has 64)", id="53-chars"),
        pytest.param("", "start with an alphabetic character", id="empty"),
    ],
)
def test_a_relay_name_that_makes_an_invalid_service_name_is_invalid_configuration(
    name: str, phrase: str
) -> None:
    d = run(make_relay(name), make_pool(*GOOD, name=name))
    assert d.reason is Reason.INVALID_CONFIGURATION
    assert f"'{name}-pool-relay'" in d.message
    assert phrase in d.message
    assert "at most 52 lower-case letters, digits or '-'" in d.message


def test_a_52_character_relay_name_is_published() -> None:
    name = "a" * 52
    assert len(name + "-pool-relay") == 63
    d = run(make_relay(name), make_pool(*GOOD, name=name))
    assert d.reason is Reason.PUBLISHED


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"replicas": True}, "spec.replicas", id="replicas-bool"),
        pytest.param({"port": 70000}, "spec.port", id="port-range"),
        pytest.param({"image": 3}, "spec.image", id="image-type"),
        pytest.param({"podLabels": {"a": 1}}, "spec.podLabels", id="pod-labels-values"),
        pytest.param(
            {"podLabels": {"app.kubernetes.io/instance": "x"}},
            "spec.podLabels[app.kubernetes.io/instance]",
            id="reserved-pod-label",
        ),
        pytest.param({"nodeSelector": []}, "spec.nodeSelector", id="node-selector"),
    ],
)
def test_relay_spec_problems_are_invalid_configuration_naming_the_field(
    spec: dict[str, Any], field: str
) -> None:
    d = run(make_relay(**spec), make_pool(*GOOD))
    assert d.reason is Reason.INVALID_CONFIGURATION
    assert field in d.message


def test_every_spec_problem_appears_in_the_message() -> None:
    d = run(make_relay(replicas=-1, port=0), make_pool(*GOOD))
    assert d.reason is Reason.INVALID_CONFIGURATION
    assert "spec.replicas" in d.message
    assert "spec.port" in d.message


# --------------------------------------------------------------------------- DGD


def test_no_dgd_is_dgd_not_found() -> None:
    assert run(make_relay(), None).reason is Reason.DGD_NOT_FOUND


def test_a_terminating_dgd_is_dgd_terminating() -> None:
    assert run(make_relay(), make_pool(*GOOD, terminating=True)).reason is Reason.DGD_TERMINATING


def test_a_dgd_recreated_under_the_same_name_is_published_again() -> None:
    # Level-based: the decision depends only on current state, not on the old DGD's uid.
    relay = make_relay()
    assert run(relay, None).reason is Reason.DGD_NOT_FOUND
    fresh = pool_from_object(
        {
            "metadata": {"name": NAME, "namespace": NS, "uid": "new-uid"},
            "spec": {"components": list(GOOD)},
        }
    )
    assert run(relay, fresh, {"Deployment": ours(), "Service": ours()}).publish


# --------------------------------------------------------------------------- discovery backend


@pytest.mark.parametrize(
    ("annotation", "default", "expected"),
    [
        pytest.param(None, "kubernetes", Reason.PUBLISHED, id="default-kubernetes"),
        pytest.param(None, "etcd", Reason.KUBERNETES_DISCOVERY_DISABLED, id="default-etcd"),
        pytest.param(
            "etcd", "kubernetes", Reason.KUBERNETES_DISCOVERY_DISABLED, id="annotation-etcd-wins"
        ),
        pytest.param("kubernetes", "etcd", Reason.PUBLISHED, id="annotation-kubernetes-wins"),
        pytest.param(
            "", "kubernetes", Reason.KUBERNETES_DISCOVERY_DISABLED, id="empty-annotation-wins"
        ),
        pytest.param(
            "Kubernetes", "kubernetes", Reason.KUBERNETES_DISCOVERY_DISABLED, id="case-matters"
        ),
    ],
)
def test_discovery_annotation_overrides_the_operator_default(
    annotation: str | None, default: str, expected: Reason
) -> None:
    annotations = {} if annotation is None else {DISCOVERY_BACKEND_ANNOTATION: annotation}
    d = run(make_relay(), make_pool(*GOOD, annotations=annotations), backend=default)
    assert d.reason is expected


def test_discovery_message_names_the_effective_backend() -> None:
    d = run(make_relay(), make_pool(*GOOD), backend="etcd")
    assert "'etcd'" in d.message


# --------------------------------------------------------------------------- workers


@pytest.mark.parametrize("worker_type", ["worker", "prefill", "decode"])
def test_each_worker_type_counts_as_a_worker(worker_type: str) -> None:
    d = run(make_relay(), make_pool({"name": "w", "type": worker_type}))
    assert d.reason is Reason.PUBLISHED


@pytest.mark.parametrize(
    "component",
    [
        pytest.param({"name": "p", "type": "planner"}, id="planner"),
        pytest.param({"name": "e", "type": "epp"}, id="epp"),
        pytest.param({"name": "f", "type": "frontend"}, id="frontend"),
        pytest.param({"name": "GlobalRouter"}, id="untyped"),
        pytest.param({"name": "w", "type": "Worker"}, id="type-is-case-sensitive"),
    ],
)
def test_non_worker_types_do_not_count(component: dict[str, Any]) -> None:
    d = run(make_relay(), make_pool(component, {"name": "fe", "type": "frontend"}))
    assert d.reason is Reason.NO_WORKERS


def test_a_dgd_without_components_has_no_workers() -> None:
    assert run(make_relay(), make_pool()).reason is Reason.NO_WORKERS


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        pytest.param(
            {"componentType": "worker", "subComponentType": "prefill"},
            Reason.PUBLISHED,
            id="worker-prefill",
        ),
        pytest.param(
            {"componentType": "worker", "subComponentType": "decode"},
            Reason.PUBLISHED,
            id="worker-decode",
        ),
        pytest.param({"subComponentType": "prefill"}, Reason.PUBLISHED, id="prefill-only"),
        pytest.param({"componentType": "worker"}, Reason.PUBLISHED, id="worker"),
        pytest.param({"componentType": "planner"}, Reason.NO_WORKERS, id="planner"),
        pytest.param({"componentType": "frontend"}, Reason.NO_WORKERS, id="frontend"),
    ],
)
def test_v1alpha1_sub_component_type_prefill_counts_as_worker(
    entry: dict[str, Any], expected: Reason
) -> None:
    pool = make_pool(api_version="nvidia.com/v1alpha1", services={"VllmWorker": entry})
    assert run(make_relay(), pool).reason is expected


# --------------------------------------------------------------------------- global namespace


@pytest.mark.parametrize("type_", ["frontend", "decode", "planner", None])
def test_any_component_in_the_global_namespace_withdraws(type_: str | None) -> None:
    components = [
        {"name": "w", "type": "worker"},
        {"name": "g", "globalDynamoNamespace": True, **({"type": type_} if type_ else {})},
    ]
    d = run(make_relay(), make_pool(*components))
    assert d.reason is Reason.GLOBAL_DYNAMO_NAMESPACE
    assert "'g'" in d.message
    assert "'w'" not in d.message


def test_global_namespace_false_is_fine() -> None:
    components = [{"name": "w", "type": "worker", "globalDynamoNamespace": False}]
    assert run(make_relay(), make_pool(*components)).publish


# --------------------------------------------------------------------------- ownership


@pytest.mark.parametrize(
    ("objects", "named", "not_named"),
    [
        pytest.param(
            {"Deployment": owned_by("other", kind="ReplicaSet", name="x")},
            ["Deployment"],
            ["Service"],
            id="deployment-only",
        ),
        pytest.param(
            {"Deployment": ours(), "Service": owned_by("other", kind="Foo", name="y")},
            ["Service"],
            ["Deployment"],
            id="service-only",
        ),
        pytest.param(
            {"Deployment": no_owner(), "Service": owned_by("other", kind="Foo", name="y")},
            ["Deployment", "Service"],
            [],
            id="both",
        ),
    ],
)
def test_ownership_conflict_names_each_foreign_object(
    objects: dict[str, Any], named: list[str], not_named: list[str]
) -> None:
    d = run(make_relay(), make_pool(*GOOD), objects)
    assert d.reason is Reason.OWNERSHIP_CONFLICT
    for kind in named:
        assert f"{kind} 'pool-pool-relay'" in d.message
    for kind in not_named:
        assert f"{kind} 'pool-pool-relay'" not in d.message


@pytest.mark.parametrize(
    ("obj", "described"),
    [
        pytest.param(no_owner(), "no controller", id="no-owner-references"),
        pytest.param({"metadata": {"ownerReferences": []}}, "no controller", id="empty-refs"),
        pytest.param({}, "no controller", id="no-metadata"),
        pytest.param(
            owned_by(RELAY_UID, controller=False), "no controller", id="us-not-controller"
        ),
        pytest.param(owned_by(RELAY_UID, controller="true"), "no controller", id="string-true"),
        pytest.param(
            owned_by("x", kind="DynamoPoolRelay", name="other"),
            "controller DynamoPoolRelay/other",
            id="another-relay",
        ),
        pytest.param(
            owned_by("old-uid", kind="DynamoPoolRelay", name=NAME),
            f"controller DynamoPoolRelay/{NAME}",
            id="recreated-relay-old-uid",
        ),
        pytest.param(
            owned_by("x", kind="ReplicaSet", name="rs"),
            "controller ReplicaSet/rs",
            id="another-kind",
        ),
    ],
)
def test_an_object_we_do_not_control_is_an_ownership_conflict(
    obj: dict[str, Any], described: str
) -> None:
    d = run(make_relay(), make_pool(*GOOD), {"Service": obj})
    assert d.reason is Reason.OWNERSHIP_CONFLICT
    assert described in d.message


def test_we_as_a_non_controlling_owner_next_to_another_controller_is_a_conflict() -> None:
    obj = owned_by("other", kind="Foo", name="f")
    obj["metadata"]["ownerReferences"].insert(
        0, {"kind": "DynamoPoolRelay", "name": NAME, "uid": RELAY_UID, "controller": False}
    )
    d = run(make_relay(), make_pool(*GOOD), {"Deployment": obj})
    assert d.reason is Reason.OWNERSHIP_CONFLICT
    assert "controller Foo/f" in d.message


def test_a_relay_recreated_with_a_new_uid_does_not_adopt_the_old_relays_objects() -> None:
    old = make_relay(uid="old")
    new = make_relay(uid="new")
    objects = {"Deployment": owned_by("old"), "Service": owned_by("old")}
    assert run(old, make_pool(*GOOD), objects).publish
    assert run(new, make_pool(*GOOD), objects).reason is Reason.OWNERSHIP_CONFLICT


def test_our_controller_reference_among_other_owners_is_ours() -> None:
    obj = ours()
    obj["metadata"]["ownerReferences"].insert(0, {"kind": "X", "name": "x", "uid": "u"})
    assert run(make_relay(), make_pool(*GOOD), {"Deployment": obj}).publish


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("obj", "uid", "expected"),
    [
        (ours(), RELAY_UID, True),
        (ours(), "other", False),
        (owned_by(RELAY_UID, controller=False), RELAY_UID, False),
        (owned_by(RELAY_UID, controller=None), RELAY_UID, False),
        (no_owner(), RELAY_UID, False),
        ({"metadata": {"ownerReferences": "x"}}, RELAY_UID, False),
        ({"metadata": {"ownerReferences": [None, 5, "x"]}}, RELAY_UID, False),
        ({"metadata": None}, RELAY_UID, False),
        ({}, "", False),
    ],
)
def test_controlled_by_requires_a_controller_reference_with_that_uid(
    obj: dict[str, Any], uid: str, expected: bool
) -> None:
    assert controlled_by(obj, uid) is expected


def test_controller_of_returns_the_controller_reference_only() -> None:
    obj = ours()
    obj["metadata"]["ownerReferences"].insert(0, {"kind": "X", "uid": "u", "controller": False})
    ref = controller_of(obj)
    assert ref is not None
    assert ref["uid"] == RELAY_UID
    assert controller_of(no_owner()) is None
    assert controller_of({"metadata": {"ownerReferences": [{"uid": "u"}]}}) is None
    assert controller_of({"metadata": "garbage"}) is None


# --------------------------------------------------------------------------- properties

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
COMPONENT = st.fixed_dictionaries(
    {},
    optional={
        "name": st.text(max_size=6) | JSON,
        "type": st.sampled_from(["worker", "prefill", "decode", "frontend", "planner", "epp", "x"])
        | JSON,
        "globalDynamoNamespace": st.booleans() | JSON,
    },
)
OWNER_REF = st.fixed_dictionaries(
    {},
    optional={
        "uid": st.sampled_from([RELAY_UID, "other", ""]) | JSON,
        "controller": st.booleans() | JSON,
        "kind": JSON,
        "name": JSON,
    },
)
RELAY_OBJECT = (
    st.none()
    | JSON
    | st.fixed_dictionaries(
        {},
        optional={
            "metadata": JSON
            | st.fixed_dictionaries(
                {}, optional={"ownerReferences": JSON | st.lists(OWNER_REF | JSON)}
            )
        },
    )
)


@settings(max_examples=300)
@given(
    name=st.sampled_from([NAME, "Pool", "a.b", "a" * 53, ""]) | st.text(max_size=10),
    components=st.lists(COMPONENT | JSON, max_size=5) | JSON,
    exists=st.booleans(),
    terminating=st.booleans(),
    annotation=st.none() | st.sampled_from(["kubernetes", "etcd"]) | st.text(max_size=4),
    default=st.sampled_from(["kubernetes", "etcd"]),
    objects=st.dictionaries(st.sampled_from(["Deployment", "Service"]), RELAY_OBJECT),
)
def test_decide_never_raises_and_publishes_only_a_fully_valid_pool(
    name: str,
    components: Any,
    exists: bool,
    terminating: bool,
    annotation: str | None,
    default: str,
    objects: dict[str, Any],
) -> None:
    relay = make_relay(name)
    pool = None
    if exists:
        meta: dict[str, Any] = {"name": name, "namespace": NS}
        if annotation is not None:
            meta["annotations"] = {DISCOVERY_BACKEND_ANNOTATION: annotation}
        if terminating:
            meta["deletionTimestamp"] = "now"
        pool = pool_from_object({"metadata": meta, "spec": {"components": components}})
    d = decide(relay, pool, objects, default_discovery_backend=default)
    assert isinstance(d.reason, Reason)
    assert isinstance(d.message, str)
    assert d.message
    if d.publish:
        assert pool is not None
        assert not pool.terminating
        assert pool.discovery_backend(default) == "kubernetes"
        assert pool.workers
        assert not pool.uses_global_namespace
        assert all(o is None or controlled_by(o, RELAY_UID) for o in objects.values())


def test_the_chain_order_is_the_documented_precedence() -> None:
    assert [c.withdraws.__name__ for c in CHECKS] == PRECEDENCE
    assert [c.reason for c in CHECKS] == [REASON[c] for c in PRECEDENCE]
    assert [c.holds for c in CHECKS] == [c == "invalid_spec" for c in PRECEDENCE]
