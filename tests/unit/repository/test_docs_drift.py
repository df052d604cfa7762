"""Generated docs must match the code they are generated from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.unit.repository.tool_modules import load_tool

ROOT = Path(__file__).resolve().parents[3]


def _generator() -> Any:
    return load_tool("generate_docs")


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
