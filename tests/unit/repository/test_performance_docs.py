"""docs/performance.md is a manual, and bench/results/README.md the index of the runs.

The manual stays short (at most 300 lines, none over 120 characters: no table rows
thousands of characters long). Each row of its table of today's figures links the run
it comes from, dated as that run's file is named, by a command the manual names; or it
says that it waits for a run. Every result file the docs name is committed, and the
index names every file in bench/results/, so no committed run goes without its line.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MANUAL = ROOT / "docs/performance.md"
RESULTS = ROOT / "bench/results"
INDEX = RESULTS / "README.md"
MAX_LINES, MAX_WIDTH = 300, 120
#: What a row that waits for a run says instead of a result.
WAITING = ("**to be re-measured on the sources**", "**to be measured**")
#: `[20261205T0220Z]: ../bench/results/20261205T0220Z-....json`
LINK = re.compile(r"^\[(\d{8}T\d{4}Z)\]: \.\./bench/results/(\S+)$", re.MULTILINE)
#: A result file named in backticks: `<...>-n<N>.json`, or a profile or a log beside one.
RESULT_NAME = re.compile(r"`([\w.-]+-n\d+(?:\.json|\.txt|\.operator\.log|\.bench\.log))`")


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _rows(section: str) -> list[list[str]]:
    """The cells of each table row in `section`, headers and separators left out."""
    rows = []
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows[1:]  # the header


def test_the_manual_is_short_and_its_lines_fit() -> None:
    lines = MANUAL.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"docs/performance.md has {len(lines)} lines"
    wide = [f"line {n}: {len(line)}" for n, line in enumerate(lines, 1) if len(line) > MAX_WIDTH]
    assert not wide, f"docs/performance.md lines over {MAX_WIDTH} characters: {wide}"


def test_each_figure_names_its_run_or_waits_for_one() -> None:
    text = MANUAL.read_text(encoding="utf-8")
    links = dict(LINK.findall(text))
    for run, name in links.items():
        assert name.startswith(f"{run}-"), f"[{run}] links {name}"
        assert (RESULTS / name).is_file(), f"[{run}] links {name}, not in bench/results/"
    commands = {cells[0] for cells in _rows(_section(text, "Running it")) if cells[0]}
    rows = _rows(_section(text, "Today's figures"))
    figures = [cells for cells in rows if not (cells[0].startswith("**") and not any(cells[1:]))]
    assert len(figures) >= 20, f"the table of today's figures has {len(figures)} rows"
    for figure, result, date, command, result_file in figures:
        if result in WAITING:
            assert not date, f"{figure!r} waits for a run, yet is dated {date}"
            assert not result_file, f"{figure!r} waits for a run, yet names {result_file}"
            continue
        assert command in commands, f"{figure!r}: {command} is not among the commands"
        run = re.fullmatch(r"\[(\d{8}T\d{4}Z)\]", result_file)
        assert run, f"{figure!r}: {result_file!r} is not a link to a run"
        assert run[1] in links, f"{figure!r}: [{run[1]}] is not defined"
        stamp = run[1]
        named = f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]} {stamp[9:11]}:{stamp[11:13]}"
        assert date == named, f"{figure!r} is dated {date}, its run {named}"


def test_every_result_file_the_docs_name_is_committed() -> None:
    for doc in (MANUAL, ROOT / "docs/operations.md", INDEX):
        named = set(RESULT_NAME.findall(doc.read_text(encoding="utf-8")))
        missing = sorted(name for name in named if not (RESULTS / name).is_file())
        assert not missing, f"{doc.relative_to(ROOT)} names absent result files: {missing}"


def test_the_index_names_every_result_file() -> None:
    text = INDEX.read_text(encoding="utf-8")
    files = sorted(p.name for p in RESULTS.iterdir() if p.name != INDEX.name)
    assert len(files) > 100, "bench/results/ holds fewer files than were committed"
    unnamed = [name for name in files if f"`{name}`" not in text]
    assert not unnamed, f"bench/results/README.md has no line for: {unnamed}"
