"""Write the generated documentation: docs/configuration.md from the config loader.

Run: uv run python tools/generate_docs.py   (tests/unit/test_docs_drift.py checks it)
"""

from __future__ import annotations

from pathlib import Path

from dynamo_pool_operator.config import configuration_reference

ROOT = Path(__file__).resolve().parents[1]


def configuration_doc() -> str:
    return configuration_reference()


def main() -> None:
    (ROOT / "docs" / "configuration.md").write_text(configuration_doc())


if __name__ == "__main__":
    main()
