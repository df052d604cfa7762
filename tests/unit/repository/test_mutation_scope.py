"""The unit tests mirror the source, and mutation testing reads that mirror.

Layout: the tests of `src/dynamo_pool_operator/<package>/<module>.py` are
`tests/unit/<package>/test_<module>.py` (and `test_<module>_<topic>.py` when one file
would be too long); tests that span the whole project live in `repository/` (drift,
layout, write paths) and `pure_core/` (words and messages pinned across the core, the
fuzzers). So the name of a test file says which module it tests, and nothing else.

Mutation testing (`[tool.mutmut]` in pyproject.toml) mutates `only_mutate`, the pure
core, and runs `pytest_add_cli_args_test_selection`: that selection must be exactly the
mirror tests of the mutated modules plus the cross-cutting files named in `CROSS`. A
module mutated with no test selected would report its mutants as "no tests" and hide
real survivors; a test selected for no mutated module only slows the run.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "src" / "dynamo_pool_operator"
UNIT = ROOT / "tests" / "unit"
#: Directories of tests that span the project rather than one module.
SPANNING = ("repository", "pure_core")
#: Cross-cutting tests that pin the pure core's words (selected for mutation runs).
CROSS = {
    "tests/unit/pure_core/test_exact_words.py",
    "tests/unit/pure_core/test_messages.py",
    "tests/unit/api/test_crd.py",
    "tests/unit/repository/test_docs_drift.py",
}


def _mutmut() -> dict[str, list[str]]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        config: dict[str, list[str]] = tomllib.load(f)["tool"]["mutmut"]
    return config


def _modules() -> list[Path]:
    return sorted(p.relative_to(PACKAGE) for p in PACKAGE.rglob("*.py"))


def module_of(test: Path) -> Path | None:
    """The source module a mirrored test file tests (None: it mirrors none)."""
    rel = test.relative_to(UNIT)
    stem = rel.stem.removeprefix("test_")
    parts = stem.split("_")
    # The longest prefix of the name that is a module of the mirrored package wins:
    # test_report_status.py tests report.py, test_config_fields.py config_fields.py.
    for n in range(len(parts), 0, -1):
        candidate = rel.parent / ("_".join(parts[:n]) + ".py")
        if (PACKAGE / candidate).is_file():
            return candidate
    return None


def _test_files() -> list[Path]:
    return sorted(
        p for p in UNIT.rglob("test_*.py") if p.relative_to(UNIT).parts[0] not in SPANNING
    )


def test_every_unit_test_file_mirrors_a_module() -> None:
    strays = [str(p.relative_to(ROOT)) for p in _test_files() if module_of(p) is None]
    assert strays == [], (
        "name each test file after the module it tests (tests/unit/<package>/"
        f"test_<module>[_<topic>].py), or move it to one of {SPANNING}: {strays}"
    )


def test_every_mutated_module_is_a_module_with_tests() -> None:
    mutated = _mutmut()["only_mutate"]
    modules = {f"src/dynamo_pool_operator/{m}" for m in map(str, _modules())}
    assert [p for p in mutated if p not in modules] == [], "only_mutate names a missing module"
    tested = {str(module_of(p)) for p in _test_files()}
    untested = [p for p in mutated if p.removeprefix("src/dynamo_pool_operator/") not in tested]
    assert untested == [], f"mutated with no mirror test: {untested}"


def test_the_selection_is_the_mirror_of_the_mutated_modules() -> None:
    config = _mutmut()
    mutated = {p.removeprefix("src/dynamo_pool_operator/") for p in config["only_mutate"]}
    mirror = {str(p.relative_to(ROOT)) for p in _test_files() if str(module_of(p)) in mutated}
    selected = set(config["pytest_add_cli_args_test_selection"])
    assert sorted(selected - mirror - CROSS) == [], "selected, but tests no mutated module"
    assert sorted((mirror | CROSS) - selected) == [], "not run against the mutants"


def _contracts() -> list[dict[str, object]]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        contracts: list[dict[str, object]] = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    return contracts


def pure_core() -> set[str]:
    """The pure core as the import-linter contract names it, each package spelled out
    into its modules (a face, `__init__.py`, hands names on and is no module of it)."""
    (forbidden,) = [c for c in _contracts() if str(c["name"]).startswith("The pure modules never")]
    out: set[str] = set()
    for dotted in forbidden["source_modules"]:  # type: ignore[attr-defined]
        path = ROOT / "src" / Path(*str(dotted).split("."))
        if path.is_dir():
            out |= {str(p.relative_to(ROOT)) for p in path.rglob("*.py") if p.name != "__init__.py"}
        else:
            out.add(str(path.relative_to(ROOT)) + ".py")
    return out


def test_the_mutated_modules_are_the_pure_core() -> None:
    """One list of the pure core: the import-linter contract keeps it pure, mutation
    testing mutates exactly it. A module added to one and not the other fails here."""
    mutated = set(_mutmut()["only_mutate"])
    core = pure_core()
    assert sorted(core - mutated) == [], "pure, and not mutated: add it to only_mutate"
    assert sorted(mutated - core) == [], "mutated, and not in the pure contract"


def test_every_runtime_module_is_in_the_runtime_layers_contract() -> None:
    """A room of the runtime outside its layers contract could import any other room."""
    (layers,) = [c for c in _contracts() if str(c["name"]).startswith("runtime/: each room")]
    named = {
        name.strip()
        for layer in layers["layers"]  # type: ignore[attr-defined]
        for name in str(layer).replace("|", ":").split(":")
    }
    runtime = PACKAGE / "runtime"
    rooms = {p.stem for p in runtime.glob("*.py") if p.name != "__init__.py"}
    rooms |= {p.name for p in runtime.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert sorted(rooms - named) == [], "a runtime room in no layer of its contract"


def test_fnmatch_of_only_mutate_matches_nothing_else() -> None:
    patterns = _mutmut()["only_mutate"]
    matched = [
        str(m)
        for m in _modules()
        if any(fnmatch.fnmatch(f"src/dynamo_pool_operator/{m}", p) for p in patterns)
    ]
    assert len(matched) == len(patterns)
