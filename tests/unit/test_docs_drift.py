"""Generated docs must match the code they are generated from."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_configuration_reference_is_current() -> None:
    spec = importlib.util.spec_from_file_location(
        "generate_docs", ROOT / "tools" / "generate_docs.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == module.configuration_doc(), (
        "docs/configuration.md is stale: run `tools/uv run python tools/generate_docs.py`"
    )
