"""The operator's memory sizing is one formula, in every place a user reads it, and it
covers what the newest committed benchmark runs measured.

values.yaml, the chart's README and docs/operations.md give the request and the limit
as `<base>Mi + <k>Ki x N` relays. docs/operations.md ("Memory and CPU") sizes them from a
table of runs, each row naming its result file in bench/results/. Each row must give
its file's own figures; the table must cite the newest run at each N it lists; and the
request must cover the held memory, the limit the high-water, of every run committed
since the oldest row's. Older runs measured older code and are history
(bench/results/README.md).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "bench/results"
OPERATIONS = ROOT / "docs/operations.md"
MI, KI, MB = 2**20, 2**10, 10**6
#: Where a run records the high-water of this checkout's operator processes (a
#: `--compare-python` restart is another checkout's operator, and is left out).
HIGH_WATER = (
    ("cold_start", "peak_rss_bytes"),
    ("rss_after_convergence", "VmHWM"),
    ("rss_after", "VmHWM"),
    ("rss_after_reaction", "VmHWM"),
    ("restart", "VmHWM"),
    ("restart_with_unrelated", "VmHWM"),
)
#: A row of the table: `| 1,000 | 64 MB | 70 MB | `<file>.json`...`.
ROW = re.compile(r"^\| ([\d,]+) \| (\d+) MB \| (\d+) MB \| `([^`]+\.json)`", re.MULTILINE)


def _held(run: dict[str, Any]) -> int | None:
    """What the operator held after a restart on the converged fleet."""
    held = (run.get("restart") or {}).get("VmRSS")
    return int(held) if held else None


def _high_water(run: dict[str, Any]) -> int | None:
    """The most this checkout's operator held at any point of the run."""
    found = [(run.get(part) or {}).get(field) for part, field in HIGH_WATER]
    return max((int(v) for v in found if v), default=None)


def _table() -> list[tuple[int, int, int, str]]:
    """(relays, held MB, high-water MB, result file) for each row of the sizing table."""
    text = OPERATIONS.read_text(encoding="utf-8")
    section = text[text.index("## Memory and CPU") :]
    section = section[: section.index("\n## ", 1)]
    return [
        (int(n.replace(",", "")), int(held), int(peak), name)
        for n, held, peak, name in ROW.findall(section)
    ]


def _run(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / name).read_text())


def _this_checkouts_runs() -> dict[str, dict[str, Any]]:
    """Every committed run of an operator (a micro-benchmark runs none) whose operator is
    this checkout's, by file name."""
    runs = {p.name: json.loads(p.read_text()) for p in RESULTS.glob("*.json")}
    return {
        name: run
        for name, run in runs.items()
        if "pools" in run and run.get("operator_python", "this checkout") == "this checkout"
    }


def _formulas(text: str) -> list[tuple[int, int]]:
    """Every `72Mi + 16Ki x N` (or with MiB, KiB and a multiplication sign) in `text`,
    as (base, per relay)."""
    found = re.findall(r"(\d+) ?Mi(?:B)? \+ (\d+) ?Ki(?:B)? [x\u00d7] N", text)
    return [(int(base), int(per)) for base, per in found]


def _sizing() -> dict[str, list[tuple[int, int]]]:
    files = {
        "values.yaml": ROOT / "deploy/helm/dynamo-pool-operator/values.yaml",
        "chart README": ROOT / "deploy/helm/dynamo-pool-operator/README.md",
        "docs/operations.md": OPERATIONS,
    }
    return {name: _formulas(path.read_text()) for name, path in files.items()}


def test_every_place_gives_the_same_request_and_limit() -> None:
    sizing = _sizing()
    assert all(len(f) == 2 for f in sizing.values()), sizing
    assert len({tuple(f) for f in sizing.values()}) == 1, sizing


def test_the_table_gives_each_runs_own_figures() -> None:
    rows = _table()
    assert len({n for n, *_ in rows}) >= 3, f"the sizing table lists too few sizes: {rows}"
    for n, held_mb, peak_mb, name in rows:
        run = _run(name)
        assert run["pools"] == n, f"{name} ran {run['pools']} pools, the table says {n}"
        held, peak = _held(run), _high_water(run)
        assert held is not None, f"{name} measured no held memory"
        assert peak is not None, f"{name} measured no high-water"
        assert round(held / MB) == held_mb, f"{name}: held {held / MB:.1f} MB, table {held_mb}"
        assert round(peak / MB) == peak_mb, f"{name}: high-water {peak / MB:.1f} MB, not {peak_mb}"


def test_the_table_cites_the_newest_run_at_each_size() -> None:
    rows = _table()
    cited = {name for *_, name in rows}
    sizes = {n for n, *_ in rows}
    newest: dict[int, tuple[str, str]] = {}
    for name, run in _this_checkouts_runs().items():
        if _held(run) is not None and run["pools"] in sizes:
            newest[run["pools"]] = max(newest.get(run["pools"], ("", "")), (run["started"], name))
    stale = {n: name for n, (_, name) in newest.items() if name not in cited}
    assert not stale, f"newer runs than docs/operations.md's sizing table cites: {stale}"


def test_the_formula_covers_every_run_since_the_tables_oldest() -> None:
    (request_base, request_per), (limit_base, limit_per) = _sizing()["values.yaml"]
    runs, rows = _this_checkouts_runs(), _table()
    since = min(runs[name]["started"] for *_, name in rows)
    checked = 0
    for name, run in sorted(runs.items()):
        if run["started"] < since:
            continue
        n = run["pools"]
        request = request_base * MI + request_per * KI * n
        limit = limit_base * MI + limit_per * KI * n
        held, peak = _held(run), _high_water(run)
        if held is not None:
            assert held <= request, f"{name}: held {held / MI:.0f} MiB > request {request / MI:.0f}"
        if peak is not None:
            assert peak <= limit, f"{name}: high-water {peak / MI:.0f} MiB > limit {limit / MI:.0f}"
        checked += held is not None
    assert checked >= len(rows), "the runs since the table's oldest hold fewer than its rows"
