"""The status vocabulary (api/conditions.py): one grammar, every reason explained."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

import pytest

from dynamo_pool_operator.api import crd
from dynamo_pool_operator.api.conditions import (
    EXPORTED_MEANINGS,
    MEANINGS,
    PUBLISHED_MEANINGS,
    READY_PARTS,
    RELAY_AVAILABLE_MEANINGS,
    Condition,
    ConditionType,
    ExportedReason,
    ExportLineReason,
    ExportState,
    PublishedReason,
    ReadyReason,
    RelayAvailableReason,
    Status,
)
from dynamo_pool_operator.api.shown import ShownCondition, read_conditions
from dynamo_pool_operator.runtime.objects.meta import MESSAGE_LIMIT

CAMEL = re.compile(r"^[A-Z][A-Za-z0-9]*$")
ENUMS: list[type[StrEnum]] = [
    ConditionType,
    PublishedReason,
    RelayAvailableReason,
    ExportedReason,
    ReadyReason,
    ExportState,
    ExportLineReason,
]


@pytest.mark.parametrize("enum", ENUMS, ids=lambda e: e.__name__)
def test_every_word_is_camel_case_and_named_for_its_value(enum: type[StrEnum]) -> None:
    for member in enum:
        assert CAMEL.match(member.value), member
        snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", member.value)
        assert member.name == snake.upper(), (member.name, member.value)


def test_ready_summarizes_every_other_condition_type_in_order() -> None:
    assert set(READY_PARTS) == set(ConditionType) - {ConditionType.READY}
    assert READY_PARTS[0] is ConditionType.PUBLISHED  # the decision ranks first


@pytest.mark.parametrize(
    ("meanings", "reasons"),
    [
        (PUBLISHED_MEANINGS, PublishedReason),
        (RELAY_AVAILABLE_MEANINGS, RelayAvailableReason),
        (EXPORTED_MEANINGS, ExportedReason),
    ],
    ids=["Published", "RelayAvailable", "Exported"],
)
def test_every_reason_has_a_meaning(meanings: dict[str, str], reasons: type[StrEnum]) -> None:
    assert set(meanings) == set(reasons)
    assert all(text.strip() for text in meanings.values())


def test_every_summarized_condition_has_its_meanings() -> None:
    assert set(MEANINGS) == set(READY_PARTS)


def test_the_crd_allows_exactly_the_condition_statuses_and_shows_the_printer_columns() -> None:
    schema = crd.status_schema()["properties"]["conditions"]["items"]["properties"]
    assert schema["status"]["enum"] == [str(s) for s in Status] == ["True", "False", "Unknown"]
    paths = {c["name"]: c["jsonPath"] for c in crd.printer_columns()}
    assert paths["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
    assert paths["Exported"] == '.status.conditions[?(@.type=="Exported")].status'
    assert paths["Published"] == '.status.conditions[?(@.type=="Published")].reason'


def test_a_written_condition_is_a_metav1_condition_with_its_message_cut_to_the_limit() -> None:
    long = Condition(ConditionType.READY, Status.TRUE, "Ready", "x" * 40000)
    written = long.written(generation=2, since="2026-12-01T10:00:00Z")
    assert len(written["message"]) == MESSAGE_LIMIT
    assert {k: v for k, v in written.items() if k != "message"} == {
        "type": "Ready",
        "status": "True",
        "reason": "Ready",
        "observedGeneration": 2,
        "lastTransitionTime": "2026-12-01T10:00:00Z",
    }


def test_a_shown_condition_reads_as_a_typed_value() -> None:
    shown = {"type": "Ready", "status": "False", "reason": "NoWorkers", "message": "m"}
    read = Condition.read(shown)
    assert read == Condition(ConditionType.READY, Status.FALSE, "NoWorkers", "m")
    assert read is not None
    assert not Condition(ConditionType.READY, Status.FALSE, "NoWorkers", "other").moved(read)
    assert Condition(ConditionType.READY, Status.FALSE, "DGDNotFound", "m").moved(read)
    assert Condition(ConditionType.READY, Status.UNKNOWN, "NoWorkers", "m").moved(read)
    assert Condition(ConditionType.READY, Status.TRUE, "Ready", "m").moved(None)


@pytest.mark.parametrize(
    "shown",
    [
        None,
        {"type": "Ready", "status": "Maybe", "reason": "R"},
        {"type": "Ready", "status": True, "reason": "R"},
        {"type": "Elsewhere", "status": "True", "reason": "R"},
        {"type": ["Ready"], "status": "True"},
    ],
)
def test_a_condition_that_is_none_of_ours_reads_as_none(shown: dict[str, Any] | None) -> None:
    assert Condition.read(shown) is None


def test_a_shown_reason_that_is_not_a_string_never_matches() -> None:
    read = Condition.read({"type": "Ready", "status": "True", "reason": 5})
    assert read is not None
    assert read.reason == ""
    assert Condition(ConditionType.READY, Status.TRUE, "Ready", "m").moved(read)


def test_read_conditions_takes_the_first_of_each_type_and_only_ours() -> None:
    shown = {
        "conditions": [
            {"type": "Ready", "status": "Maybe", "lastTransitionTime": "t0"},
            {"type": "Ready", "status": "True", "reason": "Ready", "lastTransitionTime": "t1"},
            {"type": "Published", "status": "True", "reason": "Published", "message": "m"},
            {"type": "SomeoneElses", "status": "True"},
            "not a condition",
            {"type": 5, "status": "True"},
        ]
    }
    read = read_conditions(shown)
    # The first `Ready` is not one of ours (its status): it compares as absent, as a
    # lookup of the first condition of the type would.
    assert set(read) == {ConditionType.PUBLISHED}
    assert read[ConditionType.PUBLISHED] == ShownCondition("Published", "True", "Published", None)


@pytest.mark.parametrize("status", [None, {}, {"conditions": "x"}, {"conditions": None}])
def test_read_conditions_of_no_list_is_empty(status: dict[str, object] | None) -> None:
    assert read_conditions(status) == {}
