"""A relay's status as read back (`api.shown.ShownStatus`): the relay cache keeps it in
place of the status, so every pass compares with it and reads its conditions from it."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import pytest

from dynamo_pool_operator.api.conditions import ConditionType
from dynamo_pool_operator.api.shown import (
    STATUS_FIELDS,
    ShownCondition,
    ShownLine,
    ShownStatus,
    read_conditions,
)


def compared_whole(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """The rule as it reads on whole statuses: a field of `desired` differs from the one
    shown, an empty list or map matching anything false."""
    current = current or {}

    def same(shown: Any, want: Any) -> bool:
        if isinstance(want, list | dict) and not want:
            return not shown
        return bool(shown == want)

    return any(not same(current.get(k), v) for k, v in desired.items())


CONDITION = {"type": "Ready", "status": "True", "reason": "Ready", "message": "m"}
#: Values each field takes in the cases below: absent (None), empty, false and set.
VALUES: dict[str, list[Any]] = {
    "observedGeneration": [None, 0, 1, 2],
    "conditions": [None, [], [CONDITION], [{**CONDITION, "message": "other"}]],
    "serviceName": [None, "", "p-pool-relay"],
    "clusterId": [None, "", "east", "west"],
    "relayPods": [None, "", "0/2", "2/2"],
    "exports": [None, [], [{"name": "a", "state": "Exported"}], [{"name": "a", "state": "Failed"}]],
}


def _status(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


@pytest.mark.parametrize("field", STATUS_FIELDS)
def test_differs_is_the_whole_status_comparison_field_by_field(field: str) -> None:
    """For every value a field may be shown with and written as, the digest decides as
    the comparison of whole statuses does (the rest of the status equal)."""
    base = {k: v[-1] for k, v in VALUES.items()}
    for shown, desired in itertools.product(VALUES[field], repeat=2):
        current = _status({**base, field: shown})
        want = _status({**base, field: desired})
        if field not in want:
            continue  # a field the report does not write is not compared
        assert ShownStatus.read(current).differs(want) is compared_whole(current, want), (
            shown,
            desired,
        )


def test_an_empty_field_written_matches_one_shown_as_nothing() -> None:
    """The server omits an empty list applied: the next pass must not write it again."""
    shown = ShownStatus.read({"exports": [{"name": "a"}]})
    assert shown.differs({"exports": []})
    for nothing in ({}, {"exports": []}, {"exports": None}):
        assert not ShownStatus.read(nothing).differs({"exports": [], "conditions": {}})
    assert ShownStatus.read(None).differs({"serviceName": ""})
    assert not ShownStatus.read({"serviceName": ""}).differs({"serviceName": ""})


def test_maps_compare_in_any_key_order() -> None:
    a = {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}
    b = {"conditions": [{"reason": "Ready", "status": "True", "type": "Ready"}]}
    assert not ShownStatus.read(a).differs(b)


def test_a_field_not_listed_is_refused_not_written_forever() -> None:
    with pytest.raises(ValueError, match=r"status\.newField"):
        ShownStatus.read({}).differs({"newField": 1})


def test_nothing_shown_differs_from_any_value() -> None:
    for shown in (None, "not a map", ["a"]):
        read = ShownStatus.read(shown)  # type: ignore[arg-type]
        assert read == ShownStatus()
        assert read.differs({"observedGeneration": 1})


def test_conditions_keep_type_status_reason_and_time_not_the_message() -> None:
    shown = ShownStatus.read(
        {
            "conditions": [
                {"type": "Ready", "status": "Maybe", "lastTransitionTime": "t0"},
                {**CONDITION, "lastTransitionTime": "t1"},
                {"type": "Published", "status": True, "reason": 5},
                {"type": "Someone", "status": "True", "reason": "Theirs"},
                "not a condition",
                {"type": 5, "status": "True"},
            ]
        }
    )
    assert shown.conditions == (
        ShownCondition("Ready", "Maybe", "", "t0"),
        ShownCondition("Ready", "True", "Ready", "t1"),
        ShownCondition("Published", None, "", None),
        ShownCondition("Someone", "True", "Theirs", None),
    )
    # The first of a type decides; one whose type or status is not ours reads as absent.
    assert read_conditions(shown) == {}
    ours = read_conditions({"conditions": [CONDITION]})
    assert ours == {ConditionType.READY: ShownCondition("Ready", "True", "Ready", None)}


def test_lines_by_name_the_last_of_each() -> None:
    shown = ShownStatus.read(
        {
            "exports": [
                {"name": "a", "state": "Pending"},
                {"state": "Exported"},
                {"name": "a", "state": "Exported", "reason": "R", "message": "m"},
                {"name": 5},
            ]
        }
    )
    assert shown.lines() == {"a": ShownLine("a", "Exported", "R")}
    assert [line.state for line in shown.exports] == ["Pending", "Exported"]


class Held:
    """What the relay cache hands `read` (`pool/controller`): one object for equal
    values, here a plain table that records what it was asked to hold."""

    def __init__(self) -> None:
        self.table: dict[Any, Any] = {}

    def __call__(self, value: Any) -> Any:
        return self.table.setdefault(value, value)


def test_our_words_are_one_string_for_every_relay_the_cache_holds_them_for() -> None:
    """A fleet's statuses say the same words: each is held once, not once a relay, when
    the cache gives `read` a table to hold them in; long text is not held."""
    words = ["".join(w) for w in (("Rea", "dy"), ("Tr", "ue"), ("Expor", "ted"))]
    assert words[0] is not "Ready"  # noqa: F632 - a string of its own, as decoded
    held = Held()
    long = "x" * 65
    a, b = (
        ShownStatus.read(
            {
                "conditions": [{"type": words[0], "status": words[1], "reason": words[0]}],
                "exports": [{"name": "x", "state": words[2], "reason": "".join(long)}],
                "clusterId": "".join(("ea", "st")),
            },
            held,
        )
        for _ in range(2)
    )
    assert long not in held.table
    assert a.conditions[0].type is b.conditions[0].type
    assert a.exports[0].state is b.exports[0].state
    assert a.cluster_id is b.cluster_id


def test_of_reads_a_mapping_and_keeps_a_status_read() -> None:
    read = ShownStatus.read({"clusterId": "east"})
    assert ShownStatus.of(read) is read
    assert ShownStatus.of({"clusterId": "east"}) == read
    assert ShownStatus.of(None) == ShownStatus()


def test_the_digests_are_one_small_object_a_relay() -> None:
    """A digest a field as one packed value: the six as Python ints in a tuple held
    ~280 bytes a relay (2.8 MB at 10,000 pools), the packed bytes ~80."""
    import gc
    import sys

    shown = ShownStatus.read({name: [name] for name in STATUS_FIELDS})
    assert not gc.get_referents(shown.digests)
    assert sys.getsizeof(shown.digests) <= 40 + 8 * len(STATUS_FIELDS)


def _stamped(ready: str, since: str) -> dict[str, Any]:
    """A status as decoded: every string its own object."""

    def own(text: str) -> str:
        return "".join((text[:2], text[2:]))

    return {
        "conditions": [
            {"type": own(t), "status": own(s), "reason": own(t), "lastTransitionTime": own(since)}
            for t, s in (("Published", "True"), ("Ready", ready))
        ]
    }


def test_conditions_read_alike_are_held_once_for_every_relay() -> None:
    """A mass event or a cold start stamps the same second on many relays' conditions:
    held once, not once a relay (five records and their time a relay, and the fewer
    new objects an event leaves, the fewer full collections it causes)."""
    held = Held()
    since = "2026-12-04T10:00:00Z"
    a, b = (ShownStatus.read(_stamped("True", since), held) for _ in range(2))
    assert a.conditions == b.conditions
    assert a.conditions is b.conditions
    assert ShownStatus.read(_stamped("True", since)).conditions is not a.conditions, "no table"
    c = ShownStatus.read(_stamped("False", since), held)
    assert c.conditions is not a.conditions
    assert c.conditions[0] is a.conditions[0]  # the condition alike is still one
    assert c.conditions[1] != a.conditions[1]
    d = ShownStatus.read(_stamped("True", "2026-12-04T10:00:01Z"), held)
    assert d.conditions[1].since == "2026-12-04T10:00:01Z"


def test_a_condition_with_a_time_of_any_shape_is_read_as_shown() -> None:
    """A `lastTransitionTime` that is no string (written by someone else) cannot be
    held in the table: it is read as it is."""
    odd = {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": {"x": 1}}]}
    assert ShownStatus.read(odd).conditions[0].since == {"x": 1}
