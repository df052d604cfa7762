"""The repository's generators (`tools/*.py`) loaded as modules, so a test can compare
what they would write with what is committed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def load_tool(name: str) -> ModuleType:
    """`tools/<name>.py`, registered under `name` (a dataclass in it needs its module)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module
