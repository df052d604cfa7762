"""The repository stands alone: its code, tests and docs speak of the project only.

A reader has this repository and nothing else, so no text in it may send them to a
file outside it (a specification or design note, a shared research folder) or to a
numbered section of one, nor date a fact by who worked on it when ("session 3",
"run C", "issue 7"). A rule is cited by the repo's own doc and section heading (say
docs/exports.md, 'Ownership, repair and withdrawal'), or stated where it is used; a
measurement is dated by the day and the command that made it.

The scan reads every tracked text file under the directories below and fails naming
each offending file:line and the pattern it matched.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()

SCANNED = ["src", "tests", "docs", "tools", "deploy", "bench", ".ci"]
SCANNED_FILES = ["README.md", "Makefile", "pyproject.toml", "Dockerfile"]
# Not scanned: this file (it spells the patterns out) and recorded benchmark output
# (data, not prose). The results' index is prose, and is scanned.
EXCLUDED_PREFIXES = (THIS, "bench/results/")
RESULTS_INDEX = "bench/results/README.md"
BINARY_SUFFIXES = (".png", ".jpg", ".gif", ".ico", ".gz", ".tgz", ".zip")

FORBIDDEN: dict[str, re.Pattern[str]] = {
    "a numbered section of an outside document": re.compile(r"§"),
    "the outside specification": re.compile(r"\bSPEC\b|SPEC\.md"),
    "the outside design note": re.compile(r"DESIGN\.md"),
    "a file outside the repository": re.compile(r"\.\./shared|/work/|\bshared/research\b"),
    "the outside research notes": re.compile(r"\bresearch/[\w-]+\.md"),
    "an issue by number": re.compile(r"\bissues? #?\d+", re.IGNORECASE),
    "a work session by number": re.compile(r"\bsessions?[- ]\d+", re.IGNORECASE),
    "a work session": re.compile(
        r"\b(this|previous|earlier|last|next|helper|review) session\b", re.IGNORECASE
    ),
    "a run by letter": re.compile(r"\b[Rr]uns? [A-E]\d?\b"),
    "an outside discussion": re.compile(r"\bseed discussion\b", re.IGNORECASE),
}


def scanned_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *SCANNED, *SCANNED_FILES],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted(
        path
        for path in listed.split("\0")
        if path
        and (path == RESULTS_INDEX or not path.startswith(EXCLUDED_PREFIXES))
        and not path.endswith(BINARY_SUFFIXES)
    )


def offences(path: str, text: str) -> list[str]:
    return [
        f"{path}:{number}: {what}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        for what, pattern in FORBIDDEN.items()
        if pattern.search(line)
    ]


def test_no_text_cites_outside_documents_or_dates_by_session() -> None:
    found: list[str] = []
    for path in scanned_files():
        try:
            text = (ROOT / path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # binary, or deleted in the work tree but not yet in the index
        found += offences(path, text)
    assert not found, "the repository must stand alone:\n" + "\n".join(found)


def test_the_scan_covers_code_tests_and_docs() -> None:
    """A scan that lists nothing passes vacuously: it must see the parts it guards."""
    files = scanned_files()
    for expected in (
        "README.md",
        "src/dynamo_pool_operator/operator.py",
        "tests/conftest.py",
        "docs/testing.md",
        "docs/exports.md",
        "tools/generate_docs.py",
    ):
        assert expected in files, f"{expected} is not scanned"
    assert THIS not in files
    assert RESULTS_INDEX in files
    assert not any(f.startswith("bench/results/") and f != RESULTS_INDEX for f in files)


def test_each_pattern_catches_what_it_forbids_and_spares_ordinary_words() -> None:
    caught = [
        "as SPEC §4.2 says",
        "see /work/shared/SPEC.md",
        "style per DESIGN.md",
        "the facts in research/dynamo-facts.md",
        "adversarial interleavings (issue 8)",
        "found by the reviewer in session 2",
        "these are the session-3 figures",
        "the helper session that ran it ended first",
        "run C's numbers",
        "as agreed in the seed discussion",
    ]
    spared = [
        'SPEC_KEYS = ["clusterId"]',
        '@pytest.fixture(scope="session")',
        "one control plane per test session",
        "self._session = aiohttp.ClientSession()",
        "run E2E tests; run a check; a run of `make test`",
        "seed ours with their hashes; random.Random(seed)",
        "certificate authority: ca.issue(name)",
    ]
    for text in caught:
        assert offences("x", text), f"not caught: {text!r}"
    for text in spared:
        assert not offences("x", text), f"caught but legitimate: {text!r}"


def test_test_helpers_are_imported_by_their_package() -> None:
    """`tests/` is a package: a helper module (`relay_fixtures`, `chart_helpers`, ...) is
    imported as `tests.<tier>.<module>`, never as a bare top-level name that only
    resolves because pytest put its directory on `sys.path`."""
    tests = ROOT / "tests"
    helpers = {
        p.stem
        for p in tests.rglob("*.py")
        if not p.name.startswith("test_") and p.name not in ("conftest.py", "__init__.py")
    }
    assert {"relay_fixtures", "chart_helpers", "fleet"} <= helpers
    bare = re.compile(rf"^\s*(?:from|import) ({'|'.join(sorted(helpers))})\b", re.M)
    found = [
        f"{p.relative_to(ROOT)}: {m.group(0).strip()}"
        for p in tests.rglob("*.py")
        for m in bare.finditer(p.read_text())
    ]
    assert found == []
    packages = {p.parent for p in tests.rglob("*.py")}
    assert [
        str(d.relative_to(ROOT)) for d in sorted(packages) if not (d / "__init__.py").exists()
    ] == []
