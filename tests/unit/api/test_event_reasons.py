"""Event reasons (api/events.py): one home, and nothing recorded that is not in it.

Every Event reason is declared in `api/event_reasons.py` with its type and meaning, and
docs/events.md is generated from there. A reason written anywhere else (a string
literal at an emitter, an `EventNames` of a reason not declared, a Normal reason on a
failed write) would be an Event the documentation and alerts do not know.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import dynamo_pool_operator
from dynamo_pool_operator.api.conditions import MEANINGS, ConditionType
from dynamo_pool_operator.api.event_reasons import (
    ADVISORY_ACTIONS,
    EVENTS,
    NOTED_TRANSITIONS,
    EventReason,
    ExportWarning,
    declared,
)
from dynamo_pool_operator.pool.model import EventNames

SRC = Path(dynamo_pool_operator.__file__).parent
CAMEL = re.compile(r"^[A-Z][A-Za-z0-9]*$")

#: The calls that record an Event, and where each takes its reason: positional index
#: (None: every argument is one) and keyword.
EMITTERS: dict[str, tuple[int | None, str | None]] = {
    "emit": (3, "reason"),  # EventRecorder.emit(regarding, related, type, reason, ...)
    "Advisory": (0, "reason"),
    "EventNames": (None, None),
}


def test_every_reason_is_declared_with_its_type_and_meaning() -> None:
    assert set(EVENTS) == set(EventReason) | set(ExportWarning)
    for reason, event in EVENTS.items():
        assert CAMEL.match(reason), reason
        assert event.type in ("Normal", "Warning")
        assert event.when.strip(), reason
        assert event.action.strip(), reason
    assert set(ADVISORY_ACTIONS) <= set(ExportWarning)
    assert all(r in MEANINGS[ConditionType.EXPORTED] for r in NOTED_TRANSITIONS)


def _reason_args(call: ast.Call) -> list[ast.expr]:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name not in EMITTERS:
        return []
    index, keyword = EMITTERS[name]
    if index is None:
        return [*call.args, *(k.value for k in call.keywords)]
    args = [call.args[index]] if len(call.args) > index else []
    return args + [k.value for k in call.keywords if k.arg == keyword]


def literal_reasons(tree: ast.AST) -> list[str]:
    """Every Event reason a call writes as a literal (a string or an f-string)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for arg in _reason_args(node):
                if isinstance(arg, ast.Constant | ast.JoinedStr):
                    out.append(ast.unparse(arg))
    return out


def test_no_emitter_writes_a_reason_of_its_own() -> None:
    found = {
        f"{path.relative_to(SRC)}: {reason}"
        for path in SRC.rglob("*.py")
        for reason in literal_reasons(ast.parse(path.read_text()))
    }
    assert not found, f"Event reasons written outside api/events.py: {sorted(found)}"


@pytest.mark.parametrize(
    "source",
    [
        'recorder.emit(ref, None, "Warning", "Oops", "Act", "note")',
        'Advisory(reason="Oops", action="A", message="m", related=None)',
        'EventNames(failed=f"{x}Failed")',
    ],
)
def test_the_scan_sees_a_literal_reason(source: str) -> None:
    assert literal_reasons(ast.parse(source))


def _event_names() -> dict[str, EventNames]:
    """Every `EventNames` a module of the operator holds, by where."""
    out: dict[str, EventNames] = {}
    for info in pkgutil.walk_packages([str(SRC)], "dynamo_pool_operator."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, EventNames):
                out[f"{info.name}.{name}"] = value
    return out


def test_every_write_event_is_declared_with_the_type_it_is_recorded_as() -> None:
    """The executor records a failed write as a Warning and a successful one as Normal."""
    names = _event_names()
    assert names, "no EventNames found: the scan is broken"
    for where, events in names.items():
        assert declared(events.failed, ""), where
        assert EVENTS[events.failed].type == "Warning", where
        for reason in (events.created, events.applied, events.withdrawn):
            if reason:
                assert declared(reason, ""), where
                assert EVENTS[reason].type == "Normal", where


def test_a_transition_is_declared_by_its_conditions_words() -> None:
    assert declared("DGDNotFound", ConditionType.PUBLISHED)
    assert declared("ConflictingPorts", ConditionType.EXPORTED)  # the implementation's
    assert not declared("ConflictingPorts", ConditionType.RELAY_AVAILABLE)
    assert not declared("Oops", "")
