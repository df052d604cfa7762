"""The profile summary's functions name code that exists: a module moved or a function
renamed would otherwise read as 0 % of a profile, a phase that costs nothing."""

from __future__ import annotations

import re
from pathlib import Path

from bench import profile_summary

SRC = Path(__file__).resolve().parents[3] / "src"


def _defines(text: str, qualified: str) -> bool:
    *owner, func = qualified.split(".")
    if owner and not re.search(rf"^class {owner[0]}\b", text, re.M):
        return False
    return re.search(rf"^\s*(async )?def {func}\(", text, re.M) is not None


def test_each_function_the_summary_reports_is_defined_where_it_says() -> None:
    ours = {p.relative_to(SRC).as_posix(): p.read_text() for p in SRC.rglob("*.py")}
    for label, needle in profile_summary.FUNCTIONS:
        func, _, where = needle.partition(" (")
        if func.endswith(".py"):  # a module's every function
            assert func in ours, f"{label}: {func} does not exist"
        elif where:
            assert where in ours, f"{label}: {where} does not exist"
            assert _defines(ours[where], func), f"{label}: {where} defines no {func}"
        else:
            assert any(_defines(text, func) for text in ours.values()), f"{label}: no {func}"


def test_a_thread_waiting_for_work_is_idle_not_busy(tmp_path: Path) -> None:
    """py-spy samples an idle thread-pool worker (the loop's executor, which resolves
    names) as running in `_worker`: counted busy, it read as a fifth of a mass event."""
    loop = "BaseEventLoop._run_once (asyncio/base_events.py:1922)"
    raw = tmp_path / "raw.txt"
    raw.write_text(
        f"{loop};EpollSelector.select (selectors.py:468) 10\n"
        "Thread.run (threading.py:982);_worker (concurrent/futures/thread.py:81) 20\n"
        f"{loop};Client._request (dynamo_pool_operator/runtime/client/rest.py:262) 30\n"
    )
    text = profile_summary.summarise(raw, top=5)
    assert text.startswith("samples: 60, idle: 30 (50%)"), text
    assert "100.0%  Client._request" in text, text
    assert "_worker" not in text, text
