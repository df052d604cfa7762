"""Generated docs must match the code they are generated from."""

from __future__ import annotations

from pathlib import Path

from tests.unit.repository.tool_modules import load_tool

ROOT = Path(__file__).resolve().parents[3]


def _current(doc: str, generate: str) -> str:
    """`docs/<doc>` as committed, once it is known to be what `generate` writes now."""
    committed = (ROOT / "docs" / doc).read_text()
    assert committed == getattr(load_tool("generate_docs"), generate)(), (
        f"docs/{doc} is stale: run `tools/uv run python tools/generate_docs.py`"
    )
    return committed


def test_the_crd_reference_sections_are_current() -> None:
    committed = _current("crd.md", "crd_doc")
    assert "| `RelayTerminating` |" in committed
    assert "| `ScaledToZero` |" in committed
    assert "| `ImplementationReady` |" in committed


def test_configuration_reference_is_current() -> None:
    _current("configuration.md", "configuration_doc")


def test_the_events_table_is_current() -> None:
    committed = _current("events.md", "events_doc")
    assert "| Normal | `PoolReady` |" in committed
    assert "| Warning | `RelayWriteFailed` |" in committed
