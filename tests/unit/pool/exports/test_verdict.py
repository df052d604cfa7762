"""What the MCS implementation says of an export, and `Exported` (pool/exports/verdict.py).

Rows use the conditions the Submariner Lighthouse agent was seen to write, and the
stale ones it leaves behind with mcs-api v0.5.2 CRDs; AWS Cloud Map writes none.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dynamo_pool_operator.api.conditions import EXPORTED_MEANINGS as EXPORTED_REASONS
from dynamo_pool_operator.api.conditions import ExportedReason
from dynamo_pool_operator.pool.exports.verdict import (
    AWAITING,
    AWAITING_MESSAGE,
    UNCONFIRMED_AFTER,
    Exported,
    Judgement,
    Verdict,
    api_unavailable,
    exported,
    verdict,
    view_of,
)
from dynamo_pool_operator.pool.model import StatusLine

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
LONG_AGO = "2026-11-30T12:00:00Z"
JUST_NOW = "2026-12-01T11:59:50Z"
T = "2026-12-01T11:00:00Z"


def cond(type_: str, status: str, reason: str = "", message: str = "", **kw: Any) -> dict[str, Any]:
    out = {"type": type_, "status": status, "reason": reason, "message": message}
    out["lastTransitionTime"] = T
    out.update(kw)
    return out


def export(
    *conditions: dict[str, Any], created: str = LONG_AGO, generation: int = 1
) -> dict[str, Any]:
    return {
        "metadata": {"name": "x", "creationTimestamp": created, "generation": generation},
        "status": {"conditions": list(conditions)} if conditions else {},
    }


ROWS = [
    (
        "lighthouse-exported",
        [
            cond("Valid", "True"),
            cond("Ready", "True", "", "Service was successfully exported to the broker"),
        ],
        Judgement.CONFIRMED,
        "",
    ),
    (
        "lighthouse-awaiting",
        [
            cond(
                "Ready",
                "False",
                "AwaitingExport",
                "ServiceImport created - awaiting aggregation on the broker",
            )
        ],
        Judgement.PENDING,
        "AwaitingExport",
    ),
    (
        "lighthouse-missing-service",
        [cond("Valid", "False", "ServiceUnavailable", "Service to be exported doesn't exist")],
        Judgement.REFUSED,
        "ServiceUnavailable",
    ),
    (
        "lighthouse-nodeport",
        [cond("Valid", "False", "UnsupportedServiceType", "NodePort")],
        Judgement.REFUSED,
        "UnsupportedServiceType",
    ),
    (
        "lighthouse-conflicting-ports",
        [
            cond("Valid", "True"),
            cond("Ready", "True"),
            cond("Conflict", "True", "ConflictingPorts", "ports differ"),
        ],
        # KEP-1645: the oldest export's properties win and this one is still imported.
        Judgement.CONFLICTED,
        "ConflictingPorts",
    ),
    (
        "conflict-while-not-ready",
        [cond("Valid", "True"), cond("Conflict", "True", "ConflictingType", "types differ")],
        Judgement.REFUSED,
        "ConflictingType",
    ),
    (
        "lighthouse-conflict-resolved",
        [cond("Valid", "True"), cond("Ready", "True"), cond("Conflict", "False")],
        Judgement.CONFIRMED,
        "",
    ),
    (
        "ready-false-not-waiting",
        [cond("Ready", "False", "ExportFailed", "type conflict")],
        Judgement.REFUSED,
        "ExportFailed",
    ),
    ("ready-unknown", [cond("Ready", "Unknown")], Judgement.PENDING, "Unknown"),
    ("valid-only", [cond("Valid", "True")], Judgement.CONFIRMED, ""),
    ("valid-unknown", [cond("Valid", "Unknown", "Checking")], Judgement.PENDING, "Checking"),
    ("conflict-without-reason", [cond("Conflict", "True")], Judgement.REFUSED, "Conflict"),
    ("nothing-written-long-ago", [], Judgement.UNCONFIRMED, "Unconfirmed"),
]


@pytest.mark.parametrize(
    ("case", "conditions", "judgement", "reason"), ROWS, ids=[r[0] for r in ROWS]
)
def test_the_implementations_word(
    case: str, conditions: list[Any], judgement: Judgement, reason: str
) -> None:
    v = verdict(export(*conditions), now=NOW)
    assert (v.judgement, v.reason) == (judgement, reason)


def test_refusals_and_waits_show_the_implementations_message_with_its_time() -> None:
    v = verdict(
        export(cond("Valid", "False", "ServiceUnavailable", "Service doesn't exist")), now=NOW
    )
    assert v.message == f"Service doesn't exist (since {T})"


def test_a_new_export_with_nothing_written_is_pending_then_unconfirmed() -> None:
    fresh = verdict(export(created=JUST_NOW), now=NOW)
    assert (fresh.judgement, fresh.reason) == (Judgement.PENDING, "AwaitingImplementation")
    assert (
        fresh.recheck_at
        == datetime.fromisoformat(JUST_NOW.replace("Z", "+00:00")) + UNCONFIRMED_AFTER
    )
    later = verdict(export(created=JUST_NOW), now=NOW + UNCONFIRMED_AFTER)
    assert later.judgement is Judgement.UNCONFIRMED
    assert later.message == (
        f"the MCS implementation has written no condition since it was created at {JUST_NOW}, "
        "longer than multiCluster.unconfirmedAfter (60s): is it running? (an implementation "
        "that never writes conditions wants multiCluster.confirmation: none)"
    )
    assert later.recheck_at is None


def test_with_no_confirmation_required_an_export_with_nothing_written_exists() -> None:
    from dynamo_pool_operator.api.mcs import Confirmation

    for when in (NOW, NOW + UNCONFIRMED_AFTER):
        got = verdict(export(created=JUST_NOW), now=when, confirmation=Confirmation.NONE)
        assert got == Verdict(Judgement.EXISTS)
    # What an implementation does write is still read.
    refused = export(cond("Valid", "False", "ServiceUnavailable"), created=JUST_NOW)
    got = verdict(refused, now=NOW, confirmation=Confirmation.NONE)
    assert got.judgement is Judgement.REFUSED


ANTREA_VALID = cond("Valid", "True", "Succeed")  # Antrea writes nothing else


def test_under_valid_an_export_counts_once_valid_is_true() -> None:
    from dynamo_pool_operator.api.mcs import Confirmation

    for when in (NOW, NOW + UNCONFIRMED_AFTER):
        got = verdict(export(ANTREA_VALID, created=JUST_NOW), now=when)
        assert got.judgement is Judgement.CONFIRMED
        got = verdict(
            export(ANTREA_VALID, created=JUST_NOW), now=when, confirmation=Confirmation.VALID
        )
        assert got.judgement is Judgement.CONFIRMED
    # Ready and Conflict are still read where they are written.
    waiting = cond("Ready", "False", "AwaitingExport", "awaiting")
    got = verdict(export(ANTREA_VALID, waiting), now=NOW, confirmation=Confirmation.VALID)
    assert (got.judgement, got.reason) == (Judgement.PENDING, "AwaitingExport")
    clash = cond("Conflict", "True", "ConflictingType", "types differ")
    got = verdict(export(ANTREA_VALID, clash), now=NOW, confirmation=Confirmation.VALID)
    assert (got.judgement, got.reason) == (Judgement.REFUSED, "ConflictingType")


def test_under_ready_valid_alone_is_pending_then_unconfirmed() -> None:
    from dynamo_pool_operator.api.mcs import Confirmation

    ready = Confirmation.READY
    fresh = verdict(export(ANTREA_VALID, created=JUST_NOW), now=NOW, confirmation=ready)
    assert (fresh.judgement, fresh.reason) == (Judgement.PENDING, "AwaitingReady")
    assert (
        fresh.message
        == "the MCS implementation accepted the export (Valid=True); waiting for Ready"
    )
    assert (
        fresh.recheck_at
        == datetime.fromisoformat(JUST_NOW.replace("Z", "+00:00")) + UNCONFIRMED_AFTER
    )
    later = verdict(
        export(ANTREA_VALID, created=JUST_NOW), now=NOW + UNCONFIRMED_AFTER, confirmation=ready
    )
    assert (later.judgement, later.reason) == (Judgement.UNCONFIRMED, "Unconfirmed")
    assert later.message == (
        "the MCS implementation accepted the export (Valid=True) but has written no Ready "
        f"since it was created at {JUST_NOW}, longer than multiCluster.unconfirmedAfter "
        "(60s): an implementation that never writes Ready (Antrea) wants "
        "multiCluster.confirmation: valid"
    )
    assert later.recheck_at is None
    assert later.view == {"valid": {"status": "True", "reason": "Succeed", "lastTransitionTime": T}}
    # Ready=True confirms, and nothing written is unconfirmed as under `valid`.
    got = verdict(export(ANTREA_VALID, cond("Ready", "True")), now=NOW, confirmation=ready)
    assert got.judgement is Judgement.CONFIRMED
    got = verdict(export(), now=NOW, confirmation=ready)
    assert got.message == verdict(export(), now=NOW).message


def test_a_conflict_about_an_older_generation_is_no_refusal() -> None:
    old = cond("Conflict", "True", "ConflictingPorts", observedGeneration=1)
    got = verdict(export(cond("Ready", "True"), old, generation=2), now=NOW)
    assert got.judgement is Judgement.CONFIRMED


def test_a_condition_about_an_older_generation_says_nothing() -> None:
    stale = cond("Valid", "False", "ServiceUnavailable", observedGeneration=1)
    assert verdict(export(stale, generation=2), now=NOW).judgement is Judgement.UNCONFIRMED
    current = cond("Valid", "False", "ServiceUnavailable", observedGeneration=2)
    assert verdict(export(current, generation=2), now=NOW).judgement is Judgement.REFUSED


def test_the_view_is_what_was_written_verbatim() -> None:
    e = export(cond("Ready", "False", "AwaitingExport", "awaiting"), cond("Other", "True"))
    assert view_of(e) == {
        "ready": {
            "status": "False",
            "reason": "AwaitingExport",
            "message": "awaiting",
            "lastTransitionTime": T,
        }
    }
    assert view_of(export()) == {}
    assert view_of({"status": {"conditions": "garbage"}}) == {}


# --------------------------------------------------------------------------- Exported
def lines(*states: tuple[str, str]) -> list[StatusLine]:
    return [
        StatusLine(name, state, message="m" if state == "Failed" else "") for name, state in states
    ]


def v(judgement: Judgement, reason: str = "", message: str = "") -> Any:
    from dynamo_pool_operator.pool.exports.verdict import Verdict

    return Verdict(judgement, reason, message)


def both(a: Any, b: Any) -> Any:
    """`exported` of a published pool whose exports a and b exist, with these verdicts."""
    return exported(lines(("a", "Exported"), ("b", "Exported")), {"a": a, "b": b}, published=True)


def test_exported_when_the_implementation_confirmed_everything() -> None:
    e = both(v(Judgement.CONFIRMED), v(Judgement.CONFIRMED))
    assert (e.status, e.reason) == ("True", ExportedReason.IMPLEMENTATION_READY)


def test_unconfirmed_is_not_exported_and_says_so() -> None:
    e = both(v(Judgement.CONFIRMED), v(Judgement.UNCONFIRMED, "Unconfirmed", "none"))
    said = (e.status, e.reason, e.message, e.about)
    assert said == ("Unknown", ExportedReason.UNCONFIRMED, "b: none", "b")


def test_a_conflict_next_to_ready_is_exported_with_the_conflict_quoted() -> None:
    e = both(v(Judgement.CONFIRMED), v(Judgement.CONFLICTED, "ConflictingPorts", "ports"))
    assert (e.status, e.reason, e.message, e.about) == (
        "True",
        ExportedReason.READY_WITH_CONFLICT,
        "b: imported, with a conflict: ConflictingPorts: ports",
        "b",
    )


def test_exports_that_only_exist_are_exported_and_say_only_that() -> None:
    e = both(v(Judgement.EXISTS), v(Judgement.CONFIRMED))
    assert (e.status, e.reason) == ("True", ExportedReason.EXPORT_EXISTS)
    assert e.message == (
        "the exports exist (a); the MCS implementation reports nothing on them "
        "(multiCluster.confirmation: none), so whether it imported them is not known here"
    )


@pytest.mark.parametrize(
    ("the_lines", "verdicts", "status", "reason", "about"),
    [
        (
            lines(("a", "Exported"), ("b", "Failed")),
            {"a": v(Judgement.CONFIRMED)},
            "False",
            ExportedReason.EXPORT_FAILED,
            "b",
        ),
        (lines(("a", "Foreign")), {}, "False", ExportedReason.NOT_CONTROLLED, "a"),
        (
            lines(("a", "Exported")),
            {"a": v(Judgement.REFUSED, "ConflictingPorts", "ports")},
            "False",
            "ConflictingPorts",
            "a",
        ),
        (
            lines(("a", "Exported")),
            {"a": v(Judgement.PENDING, "AwaitingExport", "wait")},
            "Unknown",
            ExportedReason.PENDING,
            "",
        ),
        (lines(("a", "Exported")), {}, "Unknown", ExportedReason.PENDING, ""),
        (lines(("a", "Pending")), {}, "Unknown", ExportedReason.PENDING, ""),
        (lines(("a", "Skipped")), {}, "False", ExportedReason.NOTHING_TO_EXPORT, ""),
        # A withdrawal held by someone else's finalizer is not an export the pool wants.
        (
            lines(("a", "Skipped"), ("old", "Withdrawing")),
            {},
            "False",
            ExportedReason.NOTHING_TO_EXPORT,
            "",
        ),
    ],
    ids=[
        "write-failed",
        "foreign",
        "refused",
        "pending",
        "not-cached",
        "being-deleted",
        "all-skipped",
        "skipped-and-withdrawing",
    ],
)
def test_exported_is_not_true_until_every_export_is(
    the_lines: list[StatusLine], verdicts: dict[str, Any], status: str, reason: str, about: str
) -> None:
    e = exported(the_lines, verdicts, published=True)
    assert (e.status, e.reason, e.about) == (status, reason, about)


def test_the_first_cause_wins_and_skipped_names_do_not_count() -> None:
    the_lines = lines(("s", "Skipped"), ("a", "Exported"), ("f", "Foreign"), ("b", "Failed"))
    e = exported(the_lines, {"a": v(Judgement.REFUSED, "X")}, published=True)
    assert e.reason == ExportedReason.EXPORT_FAILED, "our own failure first"


def test_a_withdrawn_pool_exports_nothing() -> None:
    e = exported(lines(("a", "Exported")), {"a": v(Judgement.CONFIRMED)}, published=False)
    assert (e.status, e.reason) == ("False", ExportedReason.WITHDRAWN)


def test_the_earliest_recheck_is_kept() -> None:
    from dynamo_pool_operator.pool.exports.verdict import Verdict

    soon, later = NOW + timedelta(seconds=5), NOW + timedelta(seconds=50)
    e = exported(
        lines(("a", "Exported"), ("b", "Exported")),
        {
            "a": Verdict(Judgement.PENDING, "x", "m", recheck_at=later),
            "b": Verdict(Judgement.PENDING, "x", "m", recheck_at=soon),
        },
        published=True,
    )
    assert e.recheck_at == soon


def test_every_reason_is_documented() -> None:
    assert set(EXPORTED_REASONS) == set(ExportedReason)


# ------------------------------------------------------------- exact verdicts, every branch
# Each row is the whole Verdict, written out by hand: a change of judgement, reason,
# message, the implementation's view shown beside it, or the recheck time is a change of
# what the relay's status says, and must fail here.
SHOWN_TRUE = {"status": "True", "lastTransitionTime": T}


def shown(status: str, reason: str = "", message: str = "") -> dict[str, str]:
    out = {"status": status}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    out["lastTransitionTime"] = T
    return out


EXACT = [
    (
        "conflict",
        [cond("Conflict", "True", "ConflictingType", "types differ")],
        Verdict(
            Judgement.REFUSED,
            "ConflictingType",
            f"types differ (since {T})",
            {"conflict": shown("True", "ConflictingType", "types differ")},
        ),
    ),
    (
        "conflict-without-reason-or-message",
        [cond("Conflict", "True")],
        Verdict(
            Judgement.REFUSED, "Conflict", f"Conflict=True (since {T})", {"conflict": SHOWN_TRUE}
        ),
    ),
    (
        "invalid-without-reason",
        [cond("Valid", "False", message="no Service")],
        Verdict(
            Judgement.REFUSED,
            "Invalid",
            f"no Service (since {T})",
            {"valid": shown("False", message="no Service")},
        ),
    ),
    (
        "invalid-reason-only",
        [cond("Valid", "False", "ServiceUnavailable")],
        Verdict(
            Judgement.REFUSED,
            "ServiceUnavailable",
            f"ServiceUnavailable (since {T})",
            {"valid": shown("False", "ServiceUnavailable")},
        ),
    ),
    (
        "not-ready-without-reason",
        [cond("Ready", "False", message="failed")],
        Verdict(
            Judgement.REFUSED,
            "NotReady",
            f"failed (since {T})",
            {"ready": shown("False", message="failed")},
        ),
    ),
    (
        "ready-unknown-without-reason",
        [cond("Ready", "Unknown")],
        Verdict(
            Judgement.PENDING,
            "Unknown",
            f"Ready=Unknown (since {T})",
            {"ready": shown("Unknown")},
        ),
    ),
    (
        "awaiting",
        [cond("Ready", "False", "AwaitingExport", "awaiting aggregation")],
        Verdict(
            Judgement.PENDING,
            "AwaitingExport",
            f"awaiting aggregation (since {T})",
            {"ready": shown("False", "AwaitingExport", "awaiting aggregation")},
        ),
    ),
    (
        "ready",
        [cond("Valid", "True"), cond("Ready", "True")],
        Verdict(Judgement.CONFIRMED, view={"valid": SHOWN_TRUE, "ready": SHOWN_TRUE}),
    ),
    (
        "valid-only",
        [cond("Valid", "True")],
        Verdict(Judgement.CONFIRMED, view={"valid": SHOWN_TRUE}),
    ),
    (
        "valid-unknown",
        [cond("Valid", "Unknown", message="checking")],
        Verdict(
            Judgement.PENDING,
            "Unknown",
            f"checking (since {T})",
            {"valid": shown("Unknown", message="checking")},
        ),
    ),
    (
        "nothing-long-ago",
        [],
        Verdict(
            Judgement.UNCONFIRMED,
            "Unconfirmed",
            "the MCS implementation has written no condition since it was created at "
            "2026-11-30T12:00:00Z, longer than multiCluster.unconfirmedAfter (60s): is it "
            "running? (an implementation that never writes conditions wants "
            "multiCluster.confirmation: none)",
        ),
    ),
]


@pytest.mark.parametrize(("conditions", "want"), [r[1:] for r in EXACT], ids=[r[0] for r in EXACT])
def test_the_whole_verdict(conditions: list[dict[str, Any]], want: Verdict) -> None:
    assert verdict(export(*conditions), now=NOW) == want


def test_a_condition_without_a_time_is_quoted_without_one() -> None:
    c = {"type": "Valid", "status": "False", "reason": "R", "message": "m"}
    got = verdict(export(c), now=NOW)
    assert (got.message, got.view) == (
        "m",
        {"valid": {"status": "False", "reason": "R", "message": "m"}},
    )


def test_a_fresh_export_without_conditions_waits_until_exactly_the_grace_period() -> None:
    created = datetime(2026, 12, 1, 11, 59, 0, tzinfo=UTC)
    fresh = export(created="2026-12-01T11:59:00Z")
    recheck = created + UNCONFIRMED_AFTER
    assert verdict(fresh, now=NOW - timedelta(seconds=1)) == Verdict(
        Judgement.PENDING, AWAITING, AWAITING_MESSAGE, None, recheck
    )
    assert verdict(fresh, now=recheck).judgement is Judgement.UNCONFIRMED, "not after: at"


EXPORTED_EXACT = [
    (
        "withdrawn",
        [],
        {},
        False,
        Exported("False", ExportedReason.WITHDRAWN, "the pool is withdrawn: nothing is exported"),
    ),
    (
        "all-skipped",
        [StatusLine("a", "Skipped")],
        {},
        True,
        Exported(
            "False", ExportedReason.NOTHING_TO_EXPORT, "no Service of the pool can be exported"
        ),
    ),
    (
        "foreign",
        [StatusLine("a", "Exported"), StatusLine("b", "Foreign")],
        {"a": Verdict(Judgement.CONFIRMED)},
        True,
        Exported(
            "False",
            ExportedReason.NOT_CONTROLLED,
            "b: another owner (or none) controls this export; the implementation exports "
            "theirs, not the pool's",
            about="b",
        ),
    ),
    (
        "refused",
        [StatusLine("a", "Exported")],
        {"a": Verdict(Judgement.REFUSED, "ConflictingType", "types differ")},
        True,
        Exported("False", "ConflictingType", "a: types differ", about="a"),
    ),
    (
        "pending-and-being-deleted-and-not-cached",
        [StatusLine("a", "Pending"), StatusLine("b", "Exported"), StatusLine("c", "Exported")],
        {"b": Verdict(Judgement.PENDING, "AwaitingExport", "awaiting", recheck_at=NOW)},
        True,
        Exported(
            "Unknown",
            ExportedReason.PENDING,
            f"a: being deleted, created again once gone; b: awaiting; c: {AWAITING_MESSAGE}",
            NOW,
        ),
    ),
    (
        "pending-with-its-own-message",
        [StatusLine("a", "Pending", "ServiceReplaced", "replaced"), StatusLine("b", "Pending")],
        {},
        True,
        Exported(
            "Unknown",
            ExportedReason.PENDING,
            "a: replaced; b: being deleted, created again once gone",
        ),
    ),
    (
        "unconfirmed",
        [StatusLine("a", "Exported"), StatusLine("b", "Exported"), StatusLine("c", "Exported")],
        {
            "a": Verdict(Judgement.UNCONFIRMED, "Unconfirmed", "no word"),
            "b": Verdict(Judgement.CONFIRMED),
            "c": Verdict(Judgement.UNCONFIRMED, "Unconfirmed", "none yet"),
        },
        True,
        Exported("Unknown", ExportedReason.UNCONFIRMED, "a: no word; c: none yet", about="a"),
    ),
    (
        "confirmed",
        [StatusLine("a", "Exported"), StatusLine("s", "Skipped"), StatusLine("b", "Exported")],
        {"a": Verdict(Judgement.CONFIRMED), "b": Verdict(Judgement.CONFIRMED)},
        True,
        Exported(
            "True", ExportedReason.IMPLEMENTATION_READY, "the MCS implementation confirmed a, b"
        ),
    ),
]


@pytest.mark.parametrize(
    ("lines", "verdicts", "published", "want"),
    [r[1:] for r in EXPORTED_EXACT],
    ids=[r[0] for r in EXPORTED_EXACT],
)
def test_the_whole_exported_condition(
    lines: list[StatusLine], verdicts: dict[str, Verdict], published: bool, want: Exported
) -> None:
    assert exported(lines, verdicts, published=published) == want


def test_exported_says_the_api_is_unavailable_unless_the_pool_is_withdrawn() -> None:
    said = api_unavailable("no ServiceExport API: install it", published=True)
    assert (said.status, said.reason, said.message) == (
        "False",
        "ExportAPIUnavailable",
        "no ServiceExport API: install it",
    )
    assert said.reason in EXPORTED_REASONS  # documented (docs/crd.md, generated)
    withdrawn = api_unavailable("no ServiceExport API", published=False)
    assert (withdrawn.status, withdrawn.reason) == ("False", "Withdrawn")


def test_the_whole_verdict_of_a_conflict_next_to_ready_and_of_an_export_that_only_exists() -> None:
    from dynamo_pool_operator.api.mcs import Confirmation

    conflict = cond("Conflict", "True", "ConflictingPorts", "ports differ")
    e = export(cond("Ready", "True"), conflict)
    assert verdict(e, now=NOW) == Verdict(
        Judgement.CONFLICTED, "ConflictingPorts", f"ports differ (since {T})", view_of(e)
    )
    written = export(cond("Other", "True"), created=JUST_NOW)
    got = verdict(written, now=NOW, confirmation=Confirmation.NONE)
    assert got == Verdict(Judgement.EXISTS, view=view_of(written) or None)
    never = {"metadata": {"name": "x", "generation": 1}}
    assert verdict(never, now=NOW).message == (
        "the MCS implementation has written no condition, longer than "
        "multiCluster.unconfirmedAfter (60s): is it running? (an implementation that never "
        "writes conditions wants multiCluster.confirmation: none)"
    )


def test_several_conflicts_and_existing_exports_are_each_named() -> None:
    both = exported(
        lines(("a", "Exported"), ("b", "Exported")),
        {
            "a": v(Judgement.CONFLICTED, "ConflictingPorts", "p"),
            "b": v(Judgement.CONFLICTED, "ConflictingType", "t"),
        },
        published=True,
    )
    assert both.message == (
        "a: imported, with a conflict: ConflictingPorts: p; "
        "b: imported, with a conflict: ConflictingType: t"
    )
    exist = exported(
        lines(("a", "Exported"), ("b", "Exported")),
        {"a": v(Judgement.EXISTS), "b": v(Judgement.EXISTS)},
        published=True,
    )
    assert exist.message.startswith("the exports exist (a, b); ")


def test_an_export_that_only_exists_keeps_what_the_implementation_did_write() -> None:
    from dynamo_pool_operator.api.mcs import Confirmation

    e = export(cond("Conflict", "False", "NoConflict"), created=JUST_NOW)
    got = verdict(e, now=NOW, confirmation=Confirmation.NONE)
    assert got == Verdict(Judgement.EXISTS, view=view_of(e))
    assert got.view == {"conflict": shown("False", "NoConflict")}


def test_the_first_condition_of_each_type_is_read_and_malformed_entries_are_skipped() -> None:
    """One walk reads the three conditions a verdict needs as `Meta.condition` reads each:
    the first of its type; entries that are no condition (not a map) are skipped."""
    e = export(
        "not a condition",  # type: ignore[arg-type]
        cond("Ready", "True"),
        cond("Valid", "False", "First", "first"),
        cond("Valid", "True", "Second"),
        cond("Ready", "False", "Later"),
    )
    got = verdict(e, now=NOW)
    assert (got.judgement, got.reason) == (Judgement.REFUSED, "First")
    assert view_of(e)["ready"]["status"] == "True"
    e["status"]["conditions"] = "not a list"
    assert verdict(e, now=NOW).judgement is Judgement.UNCONFIRMED
