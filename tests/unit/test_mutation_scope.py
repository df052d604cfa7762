"""Mutation testing covers the pure core, and every module is classified: a module that
is neither excluded in `[tool.mutmut] do_not_mutate` nor part of the pure core listed
here would be mutated with no test selected for it (mutmut reports its mutants as
"no tests", which hides real survivors among thousands)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "dynamo_pool_operator"

#: The pure core: what `mutmut run` mutates, each with the unit tests that pin it.
PURE_CORE = {
    "api/dgd.py": "tests/unit/test_dgd.py",
    "api/mcs.py": "tests/unit/test_names.py",
    "api/names.py": "tests/unit/test_names.py",
    "api/podfields.py": "tests/unit/test_podfields.py",
    "api/relay.py": "tests/unit/test_relay.py",
    "api/status.py": "tests/unit/api/test_status.py",
    "config.py": "tests/unit/test_config.py",
    "config_fields.py": "tests/unit/test_config_rules.py",
    "exports/plan.py": "tests/unit/test_export_plan.py",
    "exports/verdict.py": "tests/unit/test_verdict.py",
    "poolrelay/availability.py": "tests/unit/test_availability.py",
    "poolrelay/checks.py": "tests/unit/test_checks.py",
    "poolrelay/objects.py": "tests/unit/test_objects.py",
    "poolrelay/plan.py": "tests/unit/test_objects.py",
    "poolrelay/render.py": "tests/unit/test_render.py",
    "poolrelay/status.py": "tests/unit/poolrelay/test_report.py",
}


def _config() -> dict[str, list[str]]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        mutmut: dict[str, list[str]] = tomllib.load(f)["tool"]["mutmut"]
    return mutmut


def _excluded(path: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(f"src/dynamo_pool_operator/{path}", p) for p in patterns)


def test_every_module_is_excluded_or_in_the_pure_core() -> None:
    patterns = _config()["do_not_mutate"]
    modules = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py"))
    unclassified = [m for m in modules if not _excluded(m, patterns) and m not in PURE_CORE]
    assert unclassified == [], (
        "add each to PURE_CORE (with its tests, and its tests to "
        f"pytest_add_cli_args_test_selection) or to do_not_mutate: {unclassified}"
    )
    wrongly_excluded = [m for m in PURE_CORE if _excluded(m, patterns)]
    assert wrongly_excluded == [], f"pure-core modules excluded from mutation: {wrongly_excluded}"


def test_the_pure_cores_tests_are_selected_for_mutation_runs() -> None:
    selected = set(_config()["pytest_add_cli_args_test_selection"])
    missing = sorted(set(PURE_CORE.values()) - selected)
    assert missing == [], f"not run against the mutants: {missing}"
    assert all((ROOT / t).is_file() for t in selected), "a selected test file is gone"
