"""The ClusterProperty floor's pure part (bench/cpfloor.py): which level an operator that
keeps a user change's budget can reach."""

from __future__ import annotations

from typing import Any

import pytest
from bench import cpfloor


def level(concurrency: int, seconds: float, p99_ms: float | None) -> dict[str, Any]:
    trip = {} if p99_ms is None else {"p50_ms": 1.0, "p95_ms": 2.0, "p99_ms": p99_ms}
    return {"concurrency": concurrency, "seconds": seconds, "write_round_trip": trip}


def test_the_fastest_level_within_the_budget_is_taken_not_the_fastest() -> None:
    levels = [level(4, 38.5, 56.0), level(8, 38.0, 100.0), level(16, 36.4, 206.0)]
    chosen = cpfloor.fastest_within_budget(levels)
    assert chosen is not None
    assert chosen["concurrency"] == 8


def test_a_level_with_no_timed_write_is_not_within_the_budget() -> None:
    assert cpfloor.fastest_within_budget([level(4, 1.0, None), level(8, 9.0, 150.0)]) is None
    chosen = cpfloor.fastest_within_budget([level(4, 1.0, None), level(8, 9.0, 50.0)])
    assert chosen is not None
    assert chosen["concurrency"] == 8


def test_a_level_ending_in_w_is_run_with_the_relays_watched() -> None:
    assert cpfloor.parse_levels("4, 4w,16") == [(4, False), (4, True), (16, False)]
    for bad in ("0w", "w", "four"):
        with pytest.raises(ValueError, match="at least 1"):
            cpfloor.parse_levels(bad)
