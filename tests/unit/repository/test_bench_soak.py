"""The soak's pure parts (bench/soak.py): what a round writes, and the verdict on the
operator's held RSS."""

from __future__ import annotations

import pytest
from bench import soak
from bench.main import parse_args

MIB = 2**20


def test_a_rounds_messages_are_new_and_short_enough_to_have_been_interned() -> None:
    one = soak.churn_status("bench-pool-002", "p00299", 19, 10, "2026-12-03T10:00:00Z")
    again = soak.churn_status("bench-pool-002", "p00299", 20, 10, "2026-12-03T10:00:05Z")
    other = soak.churn_status("bench-pool-002", "p00298", 19, 10, "2026-12-03T10:00:00Z")
    messages = [c["message"] for body in (one, again, other) for c in body["status"]["conditions"]]
    assert len(set(messages)) == 30
    assert max(len(m) for m in messages) <= 64
    assert [c["type"] for c in one["status"]["conditions"]] == [f"BenchChurn{i}" for i in range(10)]
    assert one["metadata"] == {"name": "p00299", "namespace": "bench-pool-002"}
    # Each distinct message and time once: 10 + 10 messages, 1 time.
    assert soak.churned_bytes([one, other]) < soak.churned_bytes([one, other, again])


def test_the_slope_is_the_least_squares_one() -> None:
    assert soak.slope([5]) == 0.0
    assert soak.slope([1, 3, 5, 7]) == pytest.approx(2.0)
    assert soak.slope([4, 0, 4, 0]) == pytest.approx(-0.8)


def test_held_rss_that_grows_with_what_was_written_is_not_flat() -> None:
    written = [1 * MIB] * 10
    growing = [100 * MIB + r * MIB for r in range(10)]  # keeps every round's strings
    verdict = soak.held_trend(growing, written)
    assert not verdict["flat"]
    assert verdict["measured_rounds"] == 8
    assert verdict["trend_growth_bytes"] == 8 * MIB
    assert verdict["churned_string_bytes"] == 8 * MIB
    assert verdict["trend_growth_share_of_churned"] == 1.0


def test_held_rss_that_only_grows_in_the_warmup_or_wobbles_is_flat() -> None:
    written = [1 * MIB] * 10
    # The first round adds the conditions to every cached relay: the caches grow once.
    wobbly = [130 * MIB, 140 * MIB] + [140 * MIB + (r % 2) * MIB // 2 for r in range(8)]
    verdict = soak.held_trend(wobbly, written)
    assert verdict["flat"]
    assert verdict["held_rss_at_warmup_end"] == 140 * MIB
    assert abs(verdict["trend_bytes_per_round"]) < MIB // 10


def test_the_verdict_needs_rounds_after_the_warmup() -> None:
    with pytest.raises(ValueError, match="rounds"):
        soak.held_trend([1, 2, 3], [1, 1, 1])
    with pytest.raises(ValueError, match="rounds"):
        soak.held_trend([1, 2, 3, 4], [1, 1, 1])


def test_the_soak_defaults_to_a_few_hundred_relays_and_names_its_result() -> None:
    args = parse_args(["--soak"])
    assert args.pools == 300
    assert (args.soak_rounds, args.soak_conditions) == (20, 10)
    assert args.out.name.endswith("-soak-n300.json")
    assert parse_args(["--soak", "--pools", "200"]).pools == 200
    assert parse_args([]).pools == 1000
