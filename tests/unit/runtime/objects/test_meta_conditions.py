"""metav1.Condition helpers (runtime/objects/meta.py): lastTransitionTime moves only with
the status."""

from __future__ import annotations

from datetime import UTC, datetime

from dynamo_pool_operator.runtime.objects.meta import find_condition

NOW = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
EARLIER = "2026-11-30T09:00:00Z"


def test_find_tolerates_malformed_lists() -> None:
    good = [{"type": "Ready", "status": "True"}]
    assert find_condition(good, "Ready") == good[0]
    assert find_condition(good, "Other") is None
    for bad in (None, "Ready", [None, "x"], {"type": "Ready"}):
        assert find_condition(bad, "Ready") is None
