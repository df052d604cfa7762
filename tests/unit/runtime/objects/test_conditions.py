"""metav1.Condition helpers (runtime/objects/conditions.py): lastTransitionTime moves only with
the status."""

from __future__ import annotations

from datetime import UTC, datetime

from dynamo_pool_operator.runtime.objects import conditions

NOW = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
EARLIER = "2026-11-30T09:00:00Z"


def test_find_tolerates_malformed_lists() -> None:
    good = [{"type": "Ready", "status": "True"}]
    assert conditions.find(good, "Ready") == good[0]
    assert conditions.find(good, "Other") is None
    for bad in (None, "Ready", [None, "x"], {"type": "Ready"}):
        assert conditions.find(bad, "Ready") is None


def test_the_transition_time_is_kept_while_the_status_holds() -> None:
    before = {"type": "Ready", "status": "True", "lastTransitionTime": EARLIER}
    same = conditions.condition("Ready", "True", "R", "m", generation=2, previous=before, now=NOW)
    assert same["lastTransitionTime"] == EARLIER
    flipped = conditions.condition(
        "Ready", "False", "R", "m", generation=2, previous=before, now=NOW
    )
    assert flipped["lastTransitionTime"] == "2026-12-01T10:00:00Z"
    fresh = conditions.condition("Ready", "True", "R", "m", generation=2, previous=None, now=NOW)
    assert fresh == {
        "type": "Ready",
        "status": "True",
        "reason": "R",
        "message": "m",
        "observedGeneration": 2,
        "lastTransitionTime": "2026-12-01T10:00:00Z",
    }


def test_the_message_is_cut_to_the_api_limit() -> None:
    c = conditions.condition("T", "True", "R", "x" * 40000, generation=1, previous=None, now=NOW)
    assert len(c["message"]) == conditions.MESSAGE_LIMIT
