"""The relay's status (pool/status.py): computed purely, written only when it changes.

`Published` is True exactly when the relay is published, its reason is the decision's
reason and its message says why; `Ready` summarizes it with `RelayAvailable` and (with
an MCS implementation) `Exported`; `serviceName` is the relay Service while published. A
status write is itself an event on the relay, so recomputing the status of an unchanged
relay must give a status equal to the one it shows (`lastTransitionTime` included), and
the apply body carries the relay's uid so it never lands on a recreated relay.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamo_pool_operator.api.conditions import MEANINGS, ConditionType, Status
from dynamo_pool_operator.api.conditions import Condition as Part
from dynamo_pool_operator.api.event_reasons import CONDITION_CHANGED, EVENTS, declared
from dynamo_pool_operator.api.relay import Relay, RelayDefaults, relay_from_object
from dynamo_pool_operator.api.shown import STATUS_FIELDS, ShownStatus, read_conditions
from dynamo_pool_operator.pool.model import ConditionView, Decision, Snapshot, StatusLine
from dynamo_pool_operator.pool.plan import Reason, decision
from dynamo_pool_operator.pool.report import (
    Availability,
    AvailableReason,
    availability,
    changed_conditions,
    desired_status,
    exported_condition,
    published,
    status_apply,
    summary,
    transitions,
    warned,
    with_ready,
)

NOW = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
RUNNING = Availability(Status.TRUE, AvailableReason.AVAILABLE, "2/2 relay pods available", "2/2")
PUBLISHED_TYPE = "Published"
NOW_TEXT = "2024-05-06T07:08:09Z"
EARLIER = "2024-01-02T03:04:05Z"
PUBLISHED = decision(Reason.PUBLISHED, "published as pool-pool-relay")
WITHDRAWN = decision(Reason.NO_WORKERS, "the DGD has no worker component")


def part(type_: str, state: str, reason: str, message: str) -> Part:
    """A condition as a rule computes it (typed), from the words a status shows."""
    return Part(ConditionType(type_), Status(state), reason, message)


def make_relay(generation: int = 4) -> Relay:
    meta = {"name": "pool", "namespace": "team", "uid": "relay-uid", "generation": generation}
    return relay_from_object({"metadata": meta, "spec": {}}, RelayDefaults("relay:1", 8090))


def status(
    decision: Decision = PUBLISHED,
    current: dict[str, Any] | None = None,
    *,
    relay: Relay | None = None,
    cluster_id: str = "east",
    exports: tuple[StatusLine, ...] = (),
    now: datetime = NOW,
    available: Availability = RUNNING,
    exported: ConditionView | None = None,
) -> dict[str, Any]:
    return desired_status(
        relay or make_relay(),
        read_conditions(current),
        said(decision, available=available, exported=exported),
        publish=decision.publish,
        cluster_id=cluster_id,
        exports=exports,
        pods=available.pods,
        now=now,
    )


def said(
    decision: Decision = PUBLISHED,
    *,
    available: Availability = RUNNING,
    exported: ConditionView | None = None,
) -> tuple[Part, ...]:
    """Every condition, each from its rule, as the report gives them to the status."""
    parts = [published(decision), available.condition, exported_condition(exported)]
    return with_ready([p for p in parts if p is not None])


def condition_of(st: dict[str, Any], type_: str) -> dict[str, Any]:
    (found,) = [c for c in st["conditions"] if c["type"] == type_]
    return dict(found)


def ready(st: dict[str, Any]) -> dict[str, Any]:
    """The decision's condition, `Published` (`Ready` summarizes it with the rest)."""
    return condition_of(st, PUBLISHED_TYPE)


def shown(status_value: str, transition: str | None = EARLIER, **more: Any) -> dict[str, Any]:
    """A `status` as the relay shows it, with one Published condition."""
    condition: dict[str, Any] = {"type": PUBLISHED_TYPE, "status": status_value}
    if transition is not None:
        condition["lastTransitionTime"] = transition
    return {"conditions": [condition], **more}


# --------------------------------------------------------------------------- Ready condition


@pytest.mark.parametrize(
    ("decision", "status_value", "service_name"),
    [
        (PUBLISHED, "True", "pool-pool-relay"),
        (WITHDRAWN, "False", ""),
        (decision(Reason.INVALID_CONFIGURATION, "spec.port: bad"), "False", ""),
    ],
)
def test_ready_is_true_and_the_service_named_exactly_when_published(
    decision: Decision, status_value: str, service_name: str
) -> None:
    st = status(decision)
    assert ready(st)["status"] == status_value
    assert st["serviceName"] == service_name


def test_ready_carries_the_decisions_reason_and_message() -> None:
    condition = ready(status(WITHDRAWN))
    assert condition["reason"] == "NoWorkers"
    assert condition["message"] == "the DGD has no worker component"


def test_whole_status_of_a_new_relay() -> None:
    exports = (StatusLine("pool-pool-relay", "Exported"),)

    def cond(type_: str, reason: str, message: str) -> dict[str, Any]:
        return {
            "type": type_,
            "status": "True",
            "reason": reason,
            "message": message,
            "observedGeneration": 4,
            "lastTransitionTime": NOW_TEXT,
        }

    assert status(PUBLISHED, None, exports=exports) == {
        "observedGeneration": 4,
        "conditions": [
            cond("Published", "Published", "published as pool-pool-relay"),
            cond("RelayAvailable", "Available", "2/2 relay pods available"),
            cond("Ready", "Ready", "the pool is published: 2/2 relay pods available"),
        ],
        "serviceName": "pool-pool-relay",
        "clusterId": "east",
        "relayPods": "2/2",
        "exports": [{"name": "pool-pool-relay", "state": "Exported"}],
    }


@pytest.mark.parametrize("generation", [0, 1, 17])
def test_observed_generation_is_the_relays_generation(generation: int) -> None:
    st = status(relay=make_relay(generation))
    assert st["observedGeneration"] == generation
    assert ready(st)["observedGeneration"] == generation


@pytest.mark.parametrize(
    ("length", "kept"),
    [(32767, 32767), (32768, 32768), (32769, 32768), (40000, 32768)],
)
def test_ready_message_is_cut_at_the_crds_32768_character_limit(length: int, kept: int) -> None:
    message = "m" * (length - 1) + "!"
    condition = ready(status(decision(Reason.INVALID_CONFIGURATION, message)))
    assert condition["message"] == message[:kept]


@pytest.mark.parametrize("cluster_id", ["", "east", "cluster-7"])
def test_cluster_id_is_shown_as_given(cluster_id: str) -> None:
    assert status(cluster_id=cluster_id)["clusterId"] == cluster_id


# --------------------------------------------------------------------------- lastTransitionTime


@pytest.mark.parametrize(
    ("decision", "current", "transition"),
    [
        pytest.param(PUBLISHED, None, NOW_TEXT, id="no-status-yet"),
        pytest.param(PUBLISHED, {}, NOW_TEXT, id="empty-status"),
        pytest.param(PUBLISHED, {"conditions": None}, NOW_TEXT, id="null-conditions"),
        pytest.param(PUBLISHED, shown("True"), EARLIER, id="same-status-keeps-time"),
        pytest.param(WITHDRAWN, shown("False"), EARLIER, id="same-false-keeps-time"),
        pytest.param(PUBLISHED, shown("False"), NOW_TEXT, id="became-true"),
        pytest.param(WITHDRAWN, shown("True"), NOW_TEXT, id="became-false"),
        pytest.param(PUBLISHED, shown("True", None), NOW_TEXT, id="no-previous-time"),
        pytest.param(PUBLISHED, shown("True", ""), NOW_TEXT, id="empty-previous-time"),
        pytest.param(
            PUBLISHED,
            {"conditions": [{"type": "Other", "status": "True", "lastTransitionTime": EARLIER}]},
            NOW_TEXT,
            id="other-condition-type-ignored",
        ),
        pytest.param(
            PUBLISHED,
            {"conditions": ["Ready", shown("True")["conditions"][0]]},
            EARLIER,
            id="malformed-entries-skipped",
        ),
    ],
)
def test_transition_time_changes_only_when_ready_changes(
    decision: Decision, current: dict[str, Any] | None, transition: str
) -> None:
    assert ready(status(decision, current))["lastTransitionTime"] == transition


def test_transition_time_is_utc_rfc3339_without_fractions() -> None:
    moment = datetime(2031, 12, 25, 23, 59, 58, 999_999, tzinfo=UTC)
    assert ready(status(now=moment))["lastTransitionTime"] == "2031-12-25T23:59:58Z"


def test_a_relay_whose_status_is_current_needs_no_status_write() -> None:
    # The reconcile loop: the status written last time is the cached one now, later.
    exports = (StatusLine("a", "Skipped", "InvalidServiceName", "too long"),)
    first = status(PUBLISHED, None, exports=exports)
    again = status(PUBLISHED, copy.deepcopy(first), exports=exports, now=NOW + timedelta(hours=1))
    assert again == first
    assert not ShownStatus.of(first).differs(again)


def test_a_ready_change_needs_a_status_write_with_a_new_transition_time() -> None:
    first = status(PUBLISHED)
    later = NOW + timedelta(minutes=5)
    withdrawn = status(WITHDRAWN, first, now=later)
    assert ready(withdrawn)["lastTransitionTime"] == "2024-05-06T07:13:09Z"
    assert ShownStatus.of(first).differs(withdrawn)


# --------------------------------------------------------------------------- ShownStatus.differs


@pytest.mark.parametrize(
    ("current", "desired", "changed"),
    [
        pytest.param(None, {"clusterId": "east"}, True, id="no-status-yet"),
        pytest.param({}, {"clusterId": "east"}, True, id="empty-status"),
        pytest.param({"clusterId": "east"}, {"clusterId": "east"}, False, id="equal"),
        pytest.param({"clusterId": "west"}, {"clusterId": "east"}, True, id="value-differs"),
        pytest.param(
            {"clusterId": "east", "extra": 1}, {"clusterId": "east"}, False, id="extra-field-kept"
        ),
        pytest.param(
            {"clusterId": "east", "serviceName": ""},
            {"clusterId": "east", "serviceName": "x"},
            True,
            id="second-field-differs",
        ),
        pytest.param(None, {}, False, id="nothing-to-write"),
    ],
)
def test_status_changes_when_any_desired_field_differs(
    current: dict[str, Any] | None, desired: dict[str, Any], changed: bool
) -> None:
    assert ShownStatus.of(current).differs(desired) is changed


# --------------------------------------------------------------------------- apply body


def test_status_apply_targets_this_relay_by_uid() -> None:
    st = status()
    assert status_apply(make_relay(), st) == {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoPoolRelay",
        "metadata": {"name": "pool", "namespace": "team", "uid": "relay-uid"},
        "status": st,
    }


# --------------------------------------------------------------------------- exports[]


@pytest.mark.parametrize(
    ("export", "line"),
    [
        (StatusLine("svc", "Exported"), {"name": "svc", "state": "Exported"}),
        (
            StatusLine("svc", "Pending", "NotCachedYet"),
            {"name": "svc", "state": "Pending", "reason": "NotCachedYet"},
        ),
        (
            StatusLine("svc", "Failed", message="boom"),
            {"name": "svc", "state": "Failed", "message": "boom"},
        ),
        (
            StatusLine("svc", "Pending", "Conflict", "owned by someone else"),
            {
                "name": "svc",
                "state": "Pending",
                "reason": "Conflict",
                "message": "owned by someone else",
            },
        ),
    ],
)
def test_export_line_leaves_out_an_empty_reason_or_message(
    export: StatusLine, line: dict[str, str]
) -> None:
    assert export.to_dict() == line


def test_exports_are_shown_in_the_given_order() -> None:
    exports = (StatusLine("b", "Exported"), StatusLine("a", "Skipped", "TooLong"))
    assert status(exports=exports)["exports"] == [
        {"name": "b", "state": "Exported"},
        {"name": "a", "state": "Skipped", "reason": "TooLong"},
    ]


@pytest.mark.parametrize(
    ("shown", "desired", "changed"),
    [
        ({}, {"exports": []}, False),  # the server omits the list our apply emptied
        ({"exports": []}, {"exports": []}, False),
        ({"exports": [{"name": "a"}]}, {"exports": []}, True),
        ({}, {"exports": [{"name": "a"}]}, True),
        ({}, {"serviceName": ""}, True),  # only empty lists and maps match an absent field
        ({"observedGeneration": 1}, {"observedGeneration": 0}, True),
    ],
)
def test_an_empty_list_matches_an_absent_field_and_nothing_else_does(
    shown: dict[str, Any], desired: dict[str, Any], changed: bool
) -> None:
    assert ShownStatus.of(shown).differs(desired) is changed


def test_absent_and_empty_exports_are_the_same_status() -> None:
    """`status.exports` absent and `[]` show the same thing: neither is written over the
    other (the server drops an empty list we applied; a pass must not then write it)."""
    desired = status(exports=())
    assert desired["exports"] == []
    shown_absent = {k: v for k, v in desired.items() if k != "exports"}
    assert not ShownStatus.of(shown_absent).differs(desired)
    assert not ShownStatus.of({**desired, "exports": []}).differs(desired)
    assert ShownStatus.of(shown_absent).differs(status(exports=(StatusLine("a", "Exported"),)))


def test_a_refused_relay_write_keeps_a_published_relay_not_ready() -> None:
    refused = availability(
        None, None, published=True, refused="create Service pool-pool-relay: 403 Forbidden"
    )
    st = status(available=refused)
    assert (ready(st)["status"], ready(st)["reason"]) == ("True", "Published")
    relay = condition_of(st, "RelayAvailable")
    assert (relay["status"], relay["reason"]) == ("False", "WriteRefused")
    summary_ = condition_of(st, ConditionType.READY)
    assert (summary_["status"], summary_["reason"]) == ("False", "WriteRefused")
    assert summary_["message"] == "RelayAvailable: create Service pool-pool-relay: 403 Forbidden"
    assert st["serviceName"] == "pool-pool-relay", "still published: the name it is exported as"


def test_a_withdrawn_relay_is_not_ready_for_its_withdrawal_reason() -> None:
    st = status(WITHDRAWN, available=availability(None, None, published=False))
    summary_ = condition_of(st, ConditionType.READY)
    assert (summary_["status"], summary_["reason"]) == ("False", "NoWorkers")
    assert condition_of(st, "RelayAvailable")["reason"] == "Withdrawn"


EXPORTED_TRUE = ConditionView(
    ConditionType.EXPORTED, Status.TRUE, "ImplementationReady", "confirmed a, b"
)
EXPORTED_PENDING = ConditionView(
    ConditionType.EXPORTED, Status.UNKNOWN, "Pending", "a: AwaitingExport"
)


def test_with_an_implementation_ready_needs_exported_true() -> None:
    assert condition_of(status(exported=EXPORTED_TRUE), ConditionType.READY)["status"] == "True"
    st = status(exported=EXPORTED_PENDING)
    summary_ = condition_of(st, ConditionType.READY)
    assert (summary_["status"], summary_["reason"]) == ("False", "Pending")
    assert [c["type"] for c in st["conditions"]] == [
        "Published",
        "RelayAvailable",
        "Exported",
        "Ready",
    ]
    assert condition_of(st, "Exported")["status"] == "Unknown"


def test_without_an_implementation_there_is_no_exported_condition() -> None:
    assert "Exported" not in [c["type"] for c in status()["conditions"]]


STATES = st.sampled_from(["True", "False", "Unknown"])


@given(STATES, STATES, st.booleans())
def test_ready_is_true_iff_every_part_is_true(
    relay_state: str, exported_state: str, with_exports: bool
) -> None:
    parts = [
        part("Published", "True", "Published", "p"),
        part("RelayAvailable", relay_state, "R", "r"),
    ]
    if with_exports:
        parts.append(part("Exported", exported_state, "E", "e"))
    result = summary(parts)
    assert (result.status == "True") is all(p.status == "True" for p in parts)
    if result.status != "True":
        first = next(p for p in parts if p.status != "True")
        assert result.reason == first.reason, "the first failing part's reason"


@given(st.sampled_from(["True", "False"]), STATES, STATES)
def test_the_first_failing_part_gives_the_reason(published: str, relay: str, exported: str) -> None:
    parts = [
        part("Published", published, "P", "p"),
        part("RelayAvailable", relay, "R", "r"),
        part("Exported", exported, "E", "e"),
    ]
    result = summary(parts)
    if published != "True":
        assert result.reason == "P"
    elif relay != "True":
        assert result.reason == "R"
    elif exported != "True":
        assert result.reason == "E"
    else:
        assert result.reason == "Ready"


def test_changed_conditions_are_those_whose_status_or_reason_moved() -> None:
    before = status(exported=EXPORTED_PENDING)
    now = said(exported=EXPORTED_TRUE)
    assert [c.type for c in changed_conditions(read_conditions(before), now)] == [
        "Exported",
        "Ready",
    ]
    after = status(PUBLISHED, before, exported=EXPORTED_TRUE)
    assert changed_conditions(read_conditions(after), now) == []
    assert [c.type for c in changed_conditions(read_conditions(None), now)] == [
        "Published",
        "RelayAvailable",
        "Exported",
        "Ready",
    ]


@pytest.mark.parametrize(
    ("status", "reason", "warns"),
    [
        ("False", "ScaledToZero", True),
        ("False", "Unavailable", True),
        ("False", "ConflictingPorts", True),  # an implementation's refusal
        ("False", "OwnershipConflict", True),
        ("Unknown", "Pending", False),  # the implementation is at work: not a fault
        ("False", "Progressing", False),  # a new Deployment, not yet observed
        ("False", "WriteRefused", False),  # RelayWriteFailed said it already
        ("False", "ExportFailed", False),  # ExportFailed said it already
        ("False", "Withdrawn", False),  # follows from Published=False
        ("True", "Available", False),
    ],
)
def test_a_changed_condition_warns_only_when_it_turned_false_for_a_cause_of_its_own(
    status: str, reason: str, warns: bool
) -> None:
    assert warned(part("Published", status, reason, "m")) is warns


@pytest.mark.parametrize(
    ("status", "reason", "warns"),
    [
        ("Unknown", "Unconfirmed", True),  # no implementation confirmed in time
        ("True", "ReadyWithConflict", True),  # imported, but another export disagrees
        ("Unknown", "Pending", False),
        ("True", "ImplementationReady", False),
        ("True", "ExportExists", False),
        ("False", "ClusterIDMismatch", False),  # the plan's advisory warns already
        ("False", "DGDNotFound", True),
    ],
)
def test_which_transitions_warn(status: str, reason: str, warns: bool) -> None:
    assert warned(part("Exported", status, reason, "m")) is warns


REASONS = st.sampled_from(
    [(t, r) for t, reasons in MEANINGS.items() for r in reasons]
    + [(ConditionType.EXPORTED, "ConflictingPorts")]  # an implementation's own reason
)


@given(st.lists(st.tuples(REASONS, STATES), max_size=4), st.lists(st.tuples(REASONS, STATES)))
def test_every_transition_event_is_declared_in_the_events_home(
    now: list[tuple[tuple[str, str], str]], before: list[tuple[tuple[str, str], str]]
) -> None:
    """Whatever moved, each Event the report records has a reason `api/event_reasons.py`
    declares, with the type it declares."""
    parts = {t: part(t, s, r, "m") for (t, r), s in now}
    said_ = with_ready(list(parts.values())) if parts else ()
    shown_ = {"conditions": [{"type": t, "status": s, "reason": r} for (t, r), s in before]}
    snapshot = Snapshot(make_relay(), None, {}, shown_status=shown_)
    for a in transitions(snapshot, said_, None):
        assert declared(a.reason, a.action), (a.reason, a.action)
        home = EVENTS[a.reason] if a.action == "Ready" else CONDITION_CHANGED
        assert a.type == home.type, a


def test_a_condition_without_its_words_never_enters_the_status_silently() -> None:
    """Every condition enters the status through `with_ready`: one whose type is not in
    `READY_PARTS` (its words were not declared), or one said twice, is a bug."""
    with pytest.raises(ValueError, match="READY_PARTS"):
        with_ready([published(PUBLISHED), part("Ready", "True", "Fine", "m")])
    with pytest.raises(ValueError, match="twice"):
        with_ready([published(PUBLISHED), published(WITHDRAWN)])
    assert [c.type for c in with_ready([RUNNING.condition, published(PUBLISHED)])] == [
        "Published",
        "RelayAvailable",
        "Ready",
    ]


def test_the_status_writes_the_fields_a_cached_status_keeps_a_digest_of() -> None:
    """A field written but not in `STATUS_FIELDS` would never read as shown."""
    assert set(status(exports=(StatusLine("a", "Exported"),))) == set(STATUS_FIELDS)
