"""`seen_as` (pool/exports/verdict.py) copies a status line by hand (it runs per export,
every pass): it must keep every other field, whatever fields the line gains."""

from __future__ import annotations

import dataclasses

from dynamo_pool_operator.pool.exports.verdict import seen_as
from dynamo_pool_operator.pool.model import StatusLine


def test_seen_as_is_the_line_with_only_its_implementation_replaced() -> None:
    line = StatusLine(
        "llama-frontend",
        "Withdrawing",
        "Finalizers",
        "held by a finalizer",
        {"valid": {"status": "False"}},
        ("example.com/hold",),
    )
    view = {"ready": {"status": "True", "reason": "Ready"}}
    # Every field set apart from the default: a field the copy forgot would show.
    assert all(
        getattr(line, f.name) != f.default
        for f in dataclasses.fields(StatusLine)
        if f.default is not dataclasses.MISSING
    )
    assert seen_as(line, view) == dataclasses.replace(line, implementation=view)


def test_seen_as_the_view_the_line_shows_is_the_line_itself() -> None:
    # An export with nothing written (every export until its implementation writes):
    # the line is kept, not copied.
    line = StatusLine("llama-frontend", "Exported")
    assert seen_as(line, None) is line
    view = {"valid": {"status": "True"}}
    shown = seen_as(line, view)
    assert seen_as(shown, view) is shown
    assert seen_as(shown, {"valid": {"status": "True"}}) == shown
