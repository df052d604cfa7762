"""`StatusLine.seen_as` copies a line by hand (it runs per export, every pass): it must
keep every other field, whatever fields the line gains."""

from __future__ import annotations

import dataclasses

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
    assert line.seen_as(view) == dataclasses.replace(line, implementation=view)


def test_seen_as_the_view_the_line_shows_is_the_line_itself() -> None:
    # An export with nothing written (every export until its implementation writes):
    # the line is kept, not copied.
    line = StatusLine("llama-frontend", "Exported")
    assert line.seen_as(None) is line
    view = {"valid": {"status": "True"}}
    shown = line.seen_as(view)
    assert shown.seen_as(view) is shown
    assert shown.seen_as({"valid": {"status": "True"}}) == shown
