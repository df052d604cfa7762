"""What the MCS implementation says of an export, and whether the pool is exported. Pure.

KEP-1645 gives a ServiceExport three conditions an implementation may write:
`Valid` (it accepts the export), `Ready` (the export reached the ClusterSet) and
`Conflict` (it clashes with another cluster's export of the name). Implementations
disagree on reasons (Lighthouse writes `AwaitingExport`, `ServiceUnavailable`,
`ConflictingPorts`; Cilium and Antrea other words), some write nothing at all (AWS
Cloud Map), and some leave conditions stale (Lighthouse against mcs-api CRDs that
refuse its empty reasons). So the rules only read what the implementation wrote,
show its reason and message verbatim with the time it wrote them, and claim no more
than that:

- `Valid=False`, or `Ready=False` with a reason that is not a waiting one, or
  `Conflict=True` without `Ready=True`: **refused**, with the implementation's reason;
- `Conflict=True` next to `Ready=True`: **conflicted** — still imported (KEP-1645: the
  oldest export's properties win and the others join under them), the conflict quoted
  and warned about;
- `Ready=True`, or `Valid=True` with no `Ready` (`multiCluster.confirmation: valid`, the
  default with `mcs`, or `none`): **confirmed**; under `ready` an export with `Valid=True`
  and no `Ready` is **pending**, and once it has waited `unconfirmedAfter`
  **unconfirmed** (Antrea never writes `Ready`);
- `Ready=False` waiting (`AwaitingExport`, ...) or `Unknown`: **pending**;
- nothing written: with `multiCluster.confirmation: none` (an implementation that
  writes no conditions: Karmada, AWS Cloud Map, Clusternet) the export **exists**, and
  that is all that is claimed; with `ready` or `valid` **pending**, and once it has
  waited `unconfirmedAfter` **unconfirmed**: still not exported, and warned about;
- a condition whose `observedGeneration` is older than the export's generation
  says nothing about the export as it is: ignored (an old `Conflict` is no refusal).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from dynamo_pool_operator.api.conditions import (
    ConditionType,
    ExportedReason,
    ExportLineReason,
    ExportState,
    Status,
)
from dynamo_pool_operator.api.event_reasons import ADVISORY_ACTIONS, ExportWarning
from dynamo_pool_operator.api.mcs import WAITING_REASONS, Confirmation, ExportCondition
from dynamo_pool_operator.api.shown import ShownLine
from dynamo_pool_operator.pool.exports.plan import UNCONFIRMED_AFTER, ExportRules
from dynamo_pool_operator.pool.model import (
    ActionResult,
    Advisory,
    ConditionView,
    Contribution,
    Decision,
    Report,
    Result,
    Snapshot,
    StatusLine,
    Verb,
)
from dynamo_pool_operator.runtime.objects import (
    Meta,
    is_controlled_by,
    is_map,
    record,
    rfc3339,
    seconds_since,
)

VALID, READY, CONFLICT = ExportCondition.VALID, ExportCondition.READY, ExportCondition.CONFLICT
#: The conditions a verdict reads, in `_currents`' order.
_JUDGED = (VALID, READY, CONFLICT)
#: An export not yet (or no longer) judged: just created, or with nothing written.
AWAITING = "AwaitingImplementation"
AWAITING_MESSAGE = "waiting for the MCS implementation to write a condition"
#: `confirmation: ready`, and the export is accepted (`Valid=True`) but not yet `Ready`.
AWAITING_READY = "AwaitingReady"
AWAITING_READY_MESSAGE = (
    "the MCS implementation accepted the export (Valid=True); waiting for Ready"
)


class Judgement(StrEnum):
    CONFIRMED = "Confirmed"
    #: Imported, with a conflict reported (`Ready=True` and `Conflict=True`).
    CONFLICTED = "Conflicted"
    #: Nothing written, and none is required: the export exists.
    EXISTS = "Exists"
    #: Nothing written, waited for longer than `unconfirmedAfter`.
    UNCONFIRMED = "Unconfirmed"
    PENDING = "Pending"
    REFUSED = "Refused"


@record
class Verdict:
    judgement: Judgement
    reason: str = ""
    message: str = ""
    #: The implementation's view, as `status.exports[]` shows it: type -> condition.
    view: Mapping[str, Mapping[str, str]] | None = None
    #: When a pending export without conditions becomes unconfirmed (for a requeue).
    recheck_at: datetime | None = None


def _currents(
    export: Mapping[str, Any],
) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None, Mapping[str, Any] | None]:
    """`Valid`, `Ready` and `Conflict`, each unless it describes an older generation of
    the export (read in one walk of the conditions: a verdict reads all three)."""
    meta = Meta(export)
    generation = meta.generation
    status = export.get("status")
    conditions = status.get("conditions") if is_map(status) else None
    if conditions is None:  # none written yet (or no status at all)
        firsts: list[Mapping[str, Any] | None] = [None, None, None]
    elif not isinstance(conditions, list):  # not decoded JSON: as `Meta` reads any value
        firsts = [meta.condition(t) for t in _JUDGED]
    else:
        found: dict[str, Mapping[str, Any]] = {}
        for c in conditions:  # one walk; the first of each type, as `Meta.condition`
            if type(c) is dict or isinstance(c, Mapping):
                type_ = c.get("type")
                if type_ in _JUDGED and type_ not in found:
                    found[type_] = c
        firsts = [found.get(t) for t in _JUDGED]
    out: list[Mapping[str, Any] | None] = []
    for c in firsts:
        observed = c.get("observedGeneration") if c is not None else None
        if isinstance(observed, int) and generation and observed < generation:
            c = None
        out.append(c)
    return out[0], out[1], out[2]


def _said(c: Mapping[str, Any]) -> str:
    """What the implementation said, verbatim, with when it said it."""
    text = str(c.get("message") or c.get("reason") or f"{c.get('type')}={c.get('status')}")
    when = c.get("lastTransitionTime")
    return f"{text} (since {when})" if when else text


def view_of(export: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The implementation's conditions as a status line shows them (current ones)."""
    return _view(_currents(export))


def _view(
    currents: tuple[Mapping[str, Any] | None, ...],
) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for type_, c in zip((VALID, READY, CONFLICT), currents, strict=True):
        if c is not None:
            shown = {"status": str(c.get("status", ""))}
            for key in ("reason", "message", "lastTransitionTime"):
                if c.get(key):
                    shown[key] = str(c[key])
            out[type_.lower()] = shown
    return out


def verdict(
    export: Mapping[str, Any],
    *,
    now: datetime,
    unconfirmed_after: timedelta = UNCONFIRMED_AFTER,
    confirmation: Confirmation = Confirmation.VALID,
) -> Verdict:
    currents = _currents(export)
    view = _view(currents) or None
    valid, ready, conflict = currents
    conflicting = conflict is not None and conflict.get("status") == Status.TRUE
    if valid is not None and valid.get("status") == Status.FALSE:
        return Verdict(Judgement.REFUSED, str(valid.get("reason") or "Invalid"), _said(valid), view)
    if conflicting and (ready is None or ready.get("status") != Status.TRUE):
        assert conflict is not None
        return Verdict(
            Judgement.REFUSED, str(conflict.get("reason") or CONFLICT), _said(conflict), view
        )
    if ready is not None:
        status, reason = ready.get("status"), str(ready.get("reason") or "")
        if status == Status.TRUE and conflicting:
            assert conflict is not None
            why = str(conflict.get("reason") or CONFLICT)
            return Verdict(Judgement.CONFLICTED, why, _said(conflict), view)
        if status == Status.TRUE:
            return Verdict(Judgement.CONFIRMED, view=view)
        if status == Status.FALSE and reason not in WAITING_REASONS:
            return Verdict(Judgement.REFUSED, reason or "NotReady", _said(ready), view)
        return Verdict(Judgement.PENDING, reason or "Unknown", _said(ready), view)
    accepted = valid is not None and valid.get("status") == Status.TRUE
    if accepted and confirmation is not Confirmation.READY:
        return Verdict(Judgement.CONFIRMED, view=view)
    if valid is not None and not accepted:
        return Verdict(Judgement.PENDING, str(valid.get("reason") or "Unknown"), _said(valid), view)
    if confirmation is Confirmation.NONE:
        return Verdict(Judgement.EXISTS, view=view)
    created = Meta(export).created
    if accepted:
        return _awaiting_ready(created, now, unconfirmed_after, view)
    if created is not None and now < created + unconfirmed_after:
        return Verdict(
            Judgement.PENDING, AWAITING, AWAITING_MESSAGE, view, created + unconfirmed_after
        )
    since = f" since it was created at {rfc3339(created)}" if created is not None else ""
    return Verdict(
        Judgement.UNCONFIRMED,
        ExportedReason.UNCONFIRMED,
        f"the MCS implementation has written no condition{since}, longer than "
        f"multiCluster.unconfirmedAfter ({unconfirmed_after.total_seconds():.0f}s): is it "
        "running? (an implementation that never writes conditions wants "
        "multiCluster.confirmation: none)",
        view,
    )


def _awaiting_ready(
    created: datetime | None,
    now: datetime,
    unconfirmed_after: timedelta,
    view: Mapping[str, Mapping[str, str]] | None,
) -> Verdict:
    """`confirmation: ready` and the implementation accepted the export (`Valid=True`)
    but wrote no `Ready`: pending, and unconfirmed once it has waited `unconfirmed_after`
    (an implementation that never writes `Ready` leaves it so for good)."""
    if created is not None and now < created + unconfirmed_after:
        return Verdict(
            Judgement.PENDING,
            AWAITING_READY,
            AWAITING_READY_MESSAGE,
            view,
            created + unconfirmed_after,
        )
    since = f" since it was created at {rfc3339(created)}" if created is not None else ""
    return Verdict(
        Judgement.UNCONFIRMED,
        ExportedReason.UNCONFIRMED,
        f"the MCS implementation accepted the export (Valid=True) but has written no Ready"
        f"{since}, longer than multiCluster.unconfirmedAfter "
        f"({unconfirmed_after.total_seconds():.0f}s): an implementation that never writes "
        "Ready (Antrea) wants multiCluster.confirmation: valid",
        view,
    )


@record
class Exported:
    """The `Exported` condition as the export feature contributes it."""

    status: Status
    reason: str
    message: str
    recheck_at: datetime | None = None
    #: The export the condition is about, when one is to blame (for its Event).
    about: str = ""


NOT_PUBLISHED = Exported(
    Status.FALSE, ExportedReason.WITHDRAWN, "the pool is withdrawn: nothing is exported"
)


def api_unavailable(why: str, *, published: bool) -> Exported:
    """`Exported` while no export can be written (`why` names the API and what to do).
    A withdrawn pool says so first: it would export nothing even with the API."""
    if not published:
        return NOT_PUBLISHED
    return Exported(Status.FALSE, ExportedReason.EXPORT_API_UNAVAILABLE, why)


def exported(
    lines: Sequence[StatusLine],
    verdicts: Mapping[str, Verdict],
    *,
    published: bool,
) -> Exported:
    """The pool's `Exported` condition from its status lines (ours after execution) and
    the implementation's verdict on each export we hold."""
    if not published:
        return NOT_PUBLISHED
    wanted = [
        line for line in lines if line.state not in (ExportState.SKIPPED, ExportState.WITHDRAWING)
    ]
    if not wanted:
        return Exported(
            Status.FALSE, ExportedReason.NOTHING_TO_EXPORT, "no Service of the pool can be exported"
        )
    for line in wanted:
        if line.state == ExportState.FAILED:
            return Exported(
                Status.FALSE,
                ExportedReason.EXPORT_FAILED,
                f"{line.name}: {line.message}",
                about=line.name,
            )
    for line in wanted:
        if line.state == ExportState.FOREIGN:
            return Exported(
                Status.FALSE,
                ExportedReason.NOT_CONTROLLED,
                f"{line.name}: another owner (or none) controls this export; the "
                "implementation exports theirs, not the pool's",
                about=line.name,
            )
    judged = [
        (line.name, verdicts.get(line.name))
        for line in wanted
        if line.state == ExportState.EXPORTED
    ]
    for name, v in judged:
        if v is not None and v.judgement is Judgement.REFUSED:
            return Exported(Status.FALSE, v.reason, f"{name}: {v.message}", about=name)
    waiting = [line for line in wanted if line.state == ExportState.PENDING]
    pending = [(name, v) for name, v in judged if v is None or v.judgement is Judgement.PENDING]
    if waiting or pending:
        said = [
            f"{line.name}: {line.message or 'being deleted, created again once gone'}"
            for line in waiting
        ]
        # An export this pass created is not cached yet: said as a fresh one is, so the
        # next pass (its watch event) computes the same condition and writes nothing.
        said += [f"{name}: {v.message if v else AWAITING_MESSAGE}" for name, v in pending]
        rechecks = [v.recheck_at for _, v in pending if v is not None and v.recheck_at]
        return Exported(
            Status.UNKNOWN, ExportedReason.PENDING, "; ".join(said), min(rechecks, default=None)
        )
    unconfirmed = [
        (name, v) for name, v in judged if v is not None and v.judgement is Judgement.UNCONFIRMED
    ]
    if unconfirmed:
        return Exported(
            Status.UNKNOWN,
            ExportedReason.UNCONFIRMED,
            "; ".join(f"{name}: {v.message}" for name, v in unconfirmed),
            about=unconfirmed[0][0],
        )
    conflicted = [
        (name, v) for name, v in judged if v is not None and v.judgement is Judgement.CONFLICTED
    ]
    if conflicted:
        return Exported(
            Status.TRUE,
            ExportedReason.READY_WITH_CONFLICT,
            "; ".join(
                f"{name}: imported, with a conflict: {v.reason}: {v.message}"
                for name, v in conflicted
            ),
            about=conflicted[0][0],
        )
    existing = [name for name, v in judged if v is not None and v.judgement is Judgement.EXISTS]
    if existing:
        return Exported(
            Status.TRUE,
            ExportedReason.EXPORT_EXISTS,
            f"the exports exist ({', '.join(existing)}); the MCS implementation reports "
            "nothing on them (multiCluster.confirmation: none), so whether it imported them "
            "is not known here",
        )
    return Exported(
        Status.TRUE,
        ExportedReason.IMPLEMENTATION_READY,
        f"the MCS implementation confirmed {', '.join(name for name, _ in judged)}",
    )


def _line(result: ActionResult) -> StatusLine | None:
    """The status line one executed export action gives (None: no line)."""
    a = result.action
    if result.result is Result.FAILED:
        return StatusLine(
            a.name, ExportState.FAILED, ExportLineReason.EXPORT_FAILED, result.message
        )
    if result.result is Result.SKIPPED:
        if not a.wanted:
            return None
        return StatusLine(a.name, ExportState.PENDING, ExportLineReason.WAITING, result.message)
    if result.result is not Result.DONE:
        return None  # gone, or lost (the pass is retried and writes no status)
    if a.verb is Verb.WAIT:
        return (
            StatusLine(a.name, ExportState.PENDING, ExportLineReason.TERMINATING)
            if a.wanted
            else None
        )
    if a.verb is Verb.FOREIGN:
        return StatusLine(
            a.name,
            ExportState.FOREIGN,
            ExportLineReason.NOT_CONTROLLED,
            "another owner (or none) controls this export; it is left alone",
        )
    if a.verb is Verb.WITHDRAW:
        return None
    return StatusLine(a.name, ExportState.EXPORTED)


def lines_after(contribution: Contribution, results: Sequence[ActionResult]) -> list[StatusLine]:
    """`status.exports[]` after the actions ran: one line per name. A skipped name whose
    withdrawal then failed shows the failure (status.exports is a list keyed by name;
    two lines of one name would make the API server refuse the whole status)."""
    lines = {line.name: line for line in contribution.lines}
    notes = contribution.notes
    for result in results:
        line = _line(result)
        if line is not None:
            note = notes.get(line.name) if notes else None
            if note is not None and line.state == ExportState.EXPORTED and not line.reason:
                line = StatusLine(line.name, line.state, *note)
            lines[line.name] = line
    return list(lines.values())


@record
class Withdrawals:
    """Withdrawn exports of ours still being deleted: the lines of those held past the
    grace, the Warnings of those whose line just appeared, and when the next grace ends."""

    lines: tuple[StatusLine, ...] = ()
    warnings: tuple[Advisory, ...] = ()
    recheck_at: datetime | None = None


def withdrawals(
    results: Sequence[ActionResult],
    shown: Mapping[str, ShownLine],
    lines: Mapping[str, StatusLine],
    *,
    grace: timedelta,
    now: datetime,
) -> Withdrawals:
    """A withdrawn export of ours goes once every finalizer on it is removed; ours adds
    none, so one still being deleted `grace` after its deletion began is held by someone
    else's (AWS Cloud Map and Clusternet add theirs to every export). Its line says
    `Withdrawing` and names them; the Warning is recorded when that line appears (`shown`:
    the lines the relay shows by name), so once per export, however many passes see it.
    `lines`: this pass's lines by name; a line of the name other than a skip (the relay
    Service's `ServiceReplaced`, read back by the hold) stays, and no Withdrawing is said
    (one line per name)."""
    out: list[StatusLine] = []
    warnings: list[Advisory] = []
    rechecks: list[datetime] = []
    for r in results:
        a, live = r.action, r.action.live
        if a.verb is not Verb.WAIT or a.wanted or r.result is not Result.DONE or live is None:
            continue
        meta = live.get("metadata") or {}
        since = meta.get("deletionTimestamp")
        waited = seconds_since(since, now)
        present = lines.get(a.name)
        if waited is None or (present is not None and present.state != ExportState.SKIPPED):
            continue
        if waited < grace.total_seconds():
            rechecks.append(now + grace - timedelta(seconds=waited))
            continue
        raw = meta.get("finalizers")
        held_by = tuple(str(f) for f in raw) if isinstance(raw, list) else ()
        named = ", ".join(held_by) or "none left (the deletion should complete at once)"
        line = StatusLine(
            a.name,
            ExportState.WITHDRAWING,
            ExportLineReason.HELD_BY_FINALIZERS,
            f"withdrawn, and being deleted since {since}, longer than "
            f"multiCluster.unconfirmedAfter ({grace.total_seconds():.0f}s): held by "
            f"finalizers {named}; the MCS implementation may still import it",
            finalizers=held_by,
        )
        out.append(line)
        before = shown.get(a.name)
        if (before.state if before is not None else None) != ExportState.WITHDRAWING:
            warnings.append(
                Advisory(
                    ExportWarning.EXPORT_STUCK_TERMINATING,
                    ADVISORY_ACTIONS[ExportWarning.EXPORT_STUCK_TERMINATING],
                    f"export {a.name}: {line.message}",
                    a.resource.reference(dict(live)),
                )
            )
    return Withdrawals(tuple(out), tuple(warnings), min(rechecks, default=None))


def seen_as(line: StatusLine, implementation: Mapping[str, Mapping[str, str]] | None) -> StatusLine:
    """`line` with what the implementation wrote on its export: made directly, not by
    `dataclasses.replace` (a report makes one per export, every pass), and not at all
    when the line already shows that (nothing written: None)."""
    if implementation is line.implementation:
        return line
    return StatusLine(
        line.name, line.state, line.reason, line.message, implementation, line.finalizers
    )


def report_exports(
    snapshot: Snapshot,
    decision: Decision,
    contribution: Contribution,
    results: Sequence[ActionResult],
    rules: ExportRules,
    *,
    now: datetime,
) -> Report:
    """The lines after execution, each export we hold with the implementation's own
    view of it, and the `Exported` condition from the implementation's verdicts."""
    relay = snapshot.relay
    if snapshot.exports_unavailable:
        said = api_unavailable(snapshot.exports_unavailable, published=decision.keeps_pool)
        return Report(
            (), ConditionView(ConditionType.EXPORTED, said.status, said.reason, said.message)
        )
    held = {name: obj for name, obj in snapshot.exports.items() if is_controlled_by(obj, relay.uid)}
    # An export this pass created is not cached yet: judged as the fresh export it
    # is (created now, nothing written), as the next pass will see it from the cache.
    for r in results:
        if r.action.verb is Verb.CREATE and r.result is Result.DONE:
            held[r.action.name] = {"metadata": {"creationTimestamp": rfc3339(now)}}
    verdicts = {
        name: verdict(
            obj,
            now=now,
            unconfirmed_after=rules.unconfirmed_after,
            confirmation=rules.confirmation,
        )
        for name, obj in held.items()
    }
    lines = [
        seen_as(line, verdicts[line.name].view)
        if line.state == ExportState.EXPORTED and line.name in verdicts
        else line
        for line in lines_after(contribution, results)
    ]
    by_name = {line.name: line for line in lines}
    going = withdrawals(
        results, snapshot.shown_exports, by_name, grace=rules.unconfirmed_after, now=now
    )
    by_name.update((line.name, line) for line in going.lines)
    lines = list(by_name.values())
    overall = exported(lines, verdicts, published=decision.keeps_pool)
    about = snapshot.exports.get(overall.about)
    # The resource of the plan's actions: the one in effect may have changed since.
    resource = next((a.resource for a in contribution.actions), rules.resource)
    related = (
        resource.reference(dict(about)) if about is not None and resource is not None else None
    )
    rechecks = [
        t for t in (overall.recheck_at, contribution.recheck_at, going.recheck_at) if t is not None
    ]
    condition = ConditionView(
        ConditionType.EXPORTED,
        overall.status,
        overall.reason,
        overall.message,
        min(rechecks, default=None),
        related,
    )
    return Report(tuple(lines), condition, going.warnings)
