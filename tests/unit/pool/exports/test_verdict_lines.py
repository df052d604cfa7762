"""The status lines after the actions ran (pool/exports/verdict.py `lines_after`)."""

from __future__ import annotations

from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.pool.exports.verdict import lines_after
from dynamo_pool_operator.pool.model import ActionResult, Result
from dynamo_pool_operator.pool.model import Contribution as Plan
from tests.unit.pool.exports.test_plan import (
    FE,
    K56,
    NAME,
    RELAY_EXPORT,
    WORKER,
    fe,
    foreign,
    make_pool,
    ours,
    run,
)


def _results(p: Plan, outcome: dict[str, Any]) -> list[ActionResult]:
    """Results of `p`'s actions: Done unless `outcome` names another for that export."""
    out = []
    for a in p.actions:
        result = outcome.get(a.name, Result.DONE)
        message = "delete ServiceExport x: 422 denied" if result is Result.FAILED else ""
        out.append(ActionResult(a, result, message))
    return out


def test_lines_after_show_each_export_as_its_action_ended() -> None:
    p = run(
        pool=make_pool(fe("Frontend"), fe("chat"), fe("Going"), WORKER),
        exports=[
            ours(RELAY_EXPORT),
            foreign("pool-chat", "user-no-owner"),
            ours("pool-going", terminating=True),
            ours("pool-old"),
        ],
    )
    lines = lines_after(p, _results(p, {}))
    assert [(x.name, x.state, x.reason) for x in lines] == [
        (RELAY_EXPORT, "Exported", ""),
        (FE, "Exported", ""),
        ("pool-chat", "Foreign", "NotControlled"),
        ("pool-going", "Pending", "Terminating"),
    ], "a withdrawn export has no line"


def test_a_failed_write_shows_on_its_line_and_a_gone_one_has_none() -> None:
    p = run(pool=make_pool(fe("Frontend"), WORKER), exports=[ours("pool-old")])
    lines = lines_after(p, _results(p, {FE: Result.FAILED, "pool-old": Result.GONE}))
    assert [(x.name, x.state) for x in lines] == [(RELAY_EXPORT, "Exported"), (FE, "Failed")]
    assert lines[1].reason == "ExportFailed"
    assert lines[1].message == "delete ServiceExport x: 422 denied"


def test_a_skipped_name_whose_withdrawal_fails_is_one_failed_line() -> None:
    long_fe = fe(K56)
    long_name = names.component_service_name(NAME, K56)
    p = run(pool=make_pool(long_fe, WORKER), exports=[ours(long_name)], implementation="karmada")
    assert [x.name for x in p.lines] == [long_name]
    failed = lines_after(p, _results(p, {long_name: Result.FAILED}))
    assert [(x.name, x.state) for x in failed] == [
        (long_name, "Failed"),
        (RELAY_EXPORT, "Exported"),
    ], "one line per name, where the skipped line was"
    withdrawn = lines_after(p, _results(p, {}))
    assert [(x.name, x.state) for x in withdrawn] == [
        (long_name, "Skipped"),
        (RELAY_EXPORT, "Exported"),
    ]


def test_a_lost_race_gives_no_line() -> None:
    p = run(pool=make_pool(WORKER))
    assert lines_after(p, _results(p, {RELAY_EXPORT: Result.LOST})) == []


def test_a_held_withdrawal_replaces_a_skip_of_its_name_and_nothing_else() -> None:
    """One line per name: a frontend skipped (its Service someone else's) whose export of
    ours is held shows Withdrawing; the relay Service's `ServiceReplaced` line, which the
    hold reads back, stays."""
    from datetime import UTC, datetime, timedelta

    from dynamo_pool_operator.api.mcs import serviceexports
    from dynamo_pool_operator.pool.exports.plan import EXPORT_EVENTS
    from dynamo_pool_operator.pool.exports.verdict import withdrawals
    from dynamo_pool_operator.pool.model import Action, StatusLine, Verb

    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    live = {"metadata": {"deletionTimestamp": "2026-12-01T11:50:00Z", "finalizers": ["x/y"]}}

    def held(name: str) -> ActionResult:
        a = Action(
            Verb.WAIT, serviceexports("v1beta1"), "team", name, EXPORT_EVENTS, live, wanted=False
        )
        return ActionResult(a, Result.DONE)

    present = {
        "skipped": StatusLine("skipped", "Skipped", "ForeignService", "not the DGD's"),
        "replaced": StatusLine("replaced", "Pending", "ServiceReplaced", "held"),
    }
    got = withdrawals(
        [held("skipped"), held("replaced"), held("gone")],
        {},
        present,
        grace=timedelta(seconds=60),
        now=now,
    )
    assert [(x.name, x.state, x.finalizers) for x in got.lines] == [
        ("skipped", "Withdrawing", ("x/y",)),
        ("gone", "Withdrawing", ("x/y",)),
    ]
    assert [w.message.split(":")[0] for w in got.warnings] == ["export skipped", "export gone"]
