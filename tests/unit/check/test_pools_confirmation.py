"""`check`'s confirmation check (check/pools.py `unconfirmed`): the pool exports that have
waited `unconfirmedAfter` and do not meet the configured level, judged as the operator
judges them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from dynamo_pool_operator.api.mcs import Confirmation
from dynamo_pool_operator.check.framework import Status
from dynamo_pool_operator.check.pools import unconfirmed

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
AFTER = timedelta(seconds=60)
OLD, FRESH = "2026-12-01T11:00:00Z", "2026-12-01T11:59:50Z"
ANTREA = {"type": "Valid", "status": "True", "reason": "Succeed"}


def export(*conditions: dict[str, Any], created: str = OLD, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "pool-pool-relay",
            "namespace": "team",
            "creationTimestamp": created,
            "labels": {"nvidia.com/dynamo-graph-deployment-name": "pool"},
            **meta,
        },
        "status": {"conditions": list(conditions)},
    }


def test_valid_only_cannot_meet_ready_and_the_fix_is_valid() -> None:
    got = unconfirmed([export(ANTREA)], Confirmation.READY, AFTER, NOW)
    assert got.status is Status.FAIL
    assert got.message == (
        "1 pool export(s) older than unconfirmedAfter (60s) have Valid but no Ready: "
        "confirmation ready cannot be met for them"
    )
    assert "multiCluster.confirmation: valid" in got.fix
    assert got.details == ("team/pool-pool-relay: Valid=True (Succeed), no Ready",)


def test_valid_only_meets_valid_and_a_fresh_export_is_not_judged_yet() -> None:
    assert unconfirmed([export(ANTREA)], Confirmation.VALID, AFTER, NOW).status is Status.OK
    fresh = export(ANTREA, created=FRESH)
    assert unconfirmed([fresh], Confirmation.READY, AFTER, NOW).status is Status.OK
    ready = export(ANTREA, {"type": "Ready", "status": "True"})
    assert unconfirmed([ready], Confirmation.READY, AFTER, NOW).status is Status.OK


def test_nothing_written_fails_ready_and_valid_and_points_at_none() -> None:
    for level in (Confirmation.READY, Confirmation.VALID):
        got = unconfirmed([export()], level, AFTER, NOW)
        assert got.status is Status.FAIL
        assert "multiCluster.confirmation: none" in got.fix
        assert got.details == ("team/pool-pool-relay: no condition written",)
    assert unconfirmed([export()], Confirmation.NONE, AFTER, NOW).status is Status.OK


def test_only_pool_exports_that_are_not_being_deleted_count() -> None:
    going = export(deletionTimestamp=OLD)
    users = export()
    users["metadata"]["labels"] = {}
    assert unconfirmed([going, users], Confirmation.READY, AFTER, NOW).status is Status.OK
