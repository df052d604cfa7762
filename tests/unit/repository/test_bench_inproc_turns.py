"""The fresh pass measured in turns (bench/inproc.alternate): the two trees take turns,
in alternating order, and the ratios are of their medians."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from bench import inproc


def test_the_trees_take_turns_in_alternating_order_and_medians_are_compared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    order: list[str] = []
    fresh = {sys.executable: iter([300, 200, 250]), "other": iter([400, 100, 380])}

    async def measured(python: str, cp: object, workers: int) -> dict[str, Any]:
        order.append("this" if python == sys.executable else "compared")
        us = next(fresh[python])
        return {
            "cpu_seconds_per_fresh_noop_reconcile": us / 1e6,
            "fresh_pass_phases_cpu_us": {"decode": us / 10},
        }

    monkeypatch.setattr(inproc, "_measure_in", measured)
    out = asyncio.run(inproc.alternate(object(), 4, "other", 3))  # type: ignore[arg-type]
    assert order == ["this", "compared", "compared", "this", "this", "compared"]
    assert out["this"]["fresh_us"] == [300, 200, 250]
    assert out["ratio_fresh_median"] == round(250 / 380, 3)
    assert out["ratio_fresh_min"] == round(200 / 100, 3)
    assert out["ratio_decode_median"] == round(25 / 38, 3)


def test_the_function_calls_of_a_fresh_pass_are_compared_by_their_medians(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CPU seconds of one tree vary by a third from one child process to the next on a
    shared box; the calls a profile counts for the same passes do not."""
    calls = {sys.executable: iter([1389.0, 1389.0, 1390.0]), "other": iter([1186.0] * 3)}

    async def measured(python: str, cp: object, workers: int) -> dict[str, Any]:
        return {
            "cpu_seconds_per_fresh_noop_reconcile": 1e-4,
            "fresh_pass_phases_cpu_us": {"decode": 10.0},
            "function_calls_per_fresh_pass": next(calls[python]),
        }

    monkeypatch.setattr(inproc, "_measure_in", measured)
    out = asyncio.run(inproc.alternate(object(), 4, "other", 3))  # type: ignore[arg-type]
    assert out["this"]["function_calls_per_fresh_pass"] == [1389.0, 1389.0, 1390.0]
    assert out["ratio_function_calls"] == round(1389 / 1186, 3)


def test_a_profile_reports_function_calls_from_its_first_line() -> None:
    stats = "         416101 function calls (414601 primitive calls) in 0.558 seconds\n\n"
    assert inproc.function_calls(stats) == 416101
    assert inproc.function_calls("no profile") is None
