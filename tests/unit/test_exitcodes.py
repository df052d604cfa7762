"""One table of exit codes for every command (exitcodes.py): the documented table is it,
and every command's `--help` says the same codes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dynamo_pool_operator import cli
from dynamo_pool_operator.exitcodes import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    TABLE,
)

DOC = Path(__file__).parents[2] / "docs" / "troubleshooting.md"


def test_the_documented_table_is_exitcodes_py() -> None:
    text = DOC.read_text()
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", section, flags=re.MULTILINE)
    assert [(int(code), meaning) for code, meaning in rows] == list(TABLE)


def test_each_code_has_one_meaning() -> None:
    codes = [code for code, _ in TABLE]
    assert codes == [EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED]
    assert len(set(codes)) == len(codes)


@pytest.mark.parametrize("command", ["run", "dev", "status", "discover", "check"])
def test_every_command_help_says_the_same_codes(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert "exit codes: 0 ok, 1 " in said, said
    assert ", 2 bad usage (flags, configuration, kubeconfig), 130 interrupted" in said


def test_the_top_help_shows_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    said = " ".join(capsys.readouterr().out.split())
    for code, meaning in TABLE:
        assert " ".join(f"{code} {meaning}".split()) in said
