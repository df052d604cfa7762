"""The compiled core (tools/compile_core.py): what `make compiled` runs the unit tier on.

`make compiled` sets DPO_COMPILED_CORE to the compiled tree it put first on the path;
there, every module of `MODULES` must be imported as its extension, or the run would
test the sources a second time and say nothing of the compiled core."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from tests.unit.repository.tool_modules import load_tool

ROOT = Path(__file__).resolve().parents[3]
compile_core = load_tool("compile_core")
MODULES: tuple[str, ...] = compile_core.MODULES
PACKAGE: str = compile_core.PACKAGE


def _dotted(module: str) -> str:
    return f"{PACKAGE}.{module.removesuffix('.py').replace('/', '.')}"


def test_every_compiled_module_is_a_module_of_the_pure_core() -> None:
    for module in MODULES:
        assert (ROOT / "src" / PACKAGE / module).is_file(), module
        importlib.import_module(_dotted(module))


@pytest.mark.skipif(not os.environ.get("DPO_COMPILED_CORE"), reason="not the compiled run")
def test_the_compiled_run_imports_each_compiled_module_as_its_extension() -> None:
    tree = Path(os.environ["DPO_COMPILED_CORE"]).resolve()
    for module in MODULES:
        loaded = Path(importlib.import_module(_dotted(module)).__file__ or "").resolve()
        assert loaded.suffix == ".so", f"{module} was imported from {loaded}"
        assert loaded.is_relative_to(tree), f"{module} was imported from {loaded}"
