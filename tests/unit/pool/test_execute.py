"""Which actions the executor runs (pool/execute.py `waiting_for`): pure.

An action whose needs did not all succeed in this pass is skipped with what it waits
for; a held one with its cause; every other one runs.
"""

from __future__ import annotations

import pytest

from dynamo_pool_operator.pool.execute import waiting_for
from dynamo_pool_operator.pool.model import Action, ActionResult, EventNames, Result, Verb
from dynamo_pool_operator.runtime.objects.resources import SERVICES, Resource

SE = Resource("multicluster.x-k8s.io", "v1beta1", "serviceexports", "ServiceExport")
EXPORT = Action(Verb.WITHDRAW, SE, "ns", "p-pool-relay", EventNames("ExportFailed"), wanted=False)
SERVICE = Action(
    Verb.WITHDRAW, SERVICES, "ns", "p-pool-relay", EventNames("x"), needs=(EXPORT.key,)
)


@pytest.mark.parametrize(
    ("verb", "result", "message", "waits"),
    [
        (Verb.WITHDRAW, Result.DONE, "", None),
        (Verb.WITHDRAW, Result.GONE, "", None),
        (
            Verb.WITHDRAW,
            Result.FAILED,
            "delete ServiceExport p-pool-relay: 403 denied",
            "waits for delete ServiceExport p-pool-relay: "
            "delete ServiceExport p-pool-relay: 403 denied",
        ),
        (
            Verb.WITHDRAW,
            Result.LOST,
            "changed since read",
            "waits for delete ServiceExport p-pool-relay: changed since read",
        ),
        (
            Verb.WAIT,
            Result.DONE,
            "",
            "waits for wait ServiceExport p-pool-relay: it is being deleted",
        ),
        (
            Verb.WITHDRAW,
            Result.SKIPPED,
            "waits for x",
            "waits for delete ServiceExport p-pool-relay: waits for x",
        ),
    ],
)
def test_an_action_runs_only_when_what_it_needs_succeeded(
    verb: Verb, result: Result, message: str, waits: str | None
) -> None:
    import dataclasses

    need = dataclasses.replace(EXPORT, verb=verb)
    got = waiting_for(SERVICE, {EXPORT.key: ActionResult(need, result, message)})
    if waits is None:
        assert got is None
    else:
        assert got == ActionResult(SERVICE, Result.SKIPPED, waits)


def test_a_held_action_is_skipped_with_its_cause() -> None:
    held = Action(Verb.HOLD, SERVICES, "ns", "x", EventNames("x"), cause="the ID is unknown")
    assert waiting_for(held, {}) == ActionResult(held, Result.SKIPPED, "the ID is unknown")


def test_a_need_that_did_not_run_first_is_a_plan_error() -> None:
    with pytest.raises(ValueError, match="did not run before it"):
        waiting_for(SERVICE, {})


def test_an_action_without_needs_runs() -> None:
    assert waiting_for(EXPORT, {}) is None
