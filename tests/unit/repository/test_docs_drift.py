"""Generated docs must match the code they are generated from."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "generate_docs", ROOT / "tools" / "generate_docs.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_crd_reference_sections_are_current() -> None:
    committed = (ROOT / "docs" / "crd.md").read_text()
    assert committed == _generator().crd_doc(), (
        "docs/crd.md is stale: run `tools/uv run python tools/generate_docs.py`"
    )
    assert "| `RelayTerminating` |" in committed
    assert "| `ScaledToZero` |" in committed
    assert "| `ImplementationReady` |" in committed


def test_configuration_reference_is_current() -> None:
    module = _generator()
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == module.configuration_doc(), (
        "docs/configuration.md is stale: run `tools/uv run python tools/generate_docs.py`"
    )


def test_the_events_table_is_current() -> None:
    committed = (ROOT / "docs" / "events.md").read_text()
    assert committed == _generator().events_doc(), (
        "docs/events.md is stale: run `tools/uv run python tools/generate_docs.py`"
    )
    assert "| Normal | `PoolReady` |" in committed
    assert "| Warning | `RelayWriteFailed` |" in committed
