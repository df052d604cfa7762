"""Log lines for people and for pipelines (logs.py), and `dev --log-format`."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from dynamo_pool_operator import cli, logs
from dynamo_pool_operator.config import API_VERSION, KIND


def record(msg: str, **extra: Any) -> logging.LogRecord:
    r = logging.makeLogRecord(
        {"name": "dynamo_pool_operator.pool", "levelname": "WARNING", "msg": msg, **extra}
    )
    r.created = 1_780_000_000.25
    return r


def test_console_lines_are_time_level_logger_message_and_key_values() -> None:
    r = record("export held", namespace="team", object="pool", why="held by x/y z")
    when = datetime.fromtimestamp(r.created).strftime("%H:%M:%S.%f")[:-3]
    assert logs.ConsoleFormatter().format(r) == (
        f"{when} WARNING dynamo_pool_operator.pool export held namespace=team object=pool "
        'why="held by x/y z"'
    )


def test_json_lines_keep_their_fields() -> None:
    doc = json.loads(logs.JSONFormatter().format(record("m", namespace="team")))
    assert (doc["level"], doc["logger"], doc["msg"], doc["namespace"]) == (
        "warning",
        "dynamo_pool_operator.pool",
        "m",
        "team",
    )


@pytest.mark.parametrize("formatter", [logs.ConsoleFormatter, logs.JSONFormatter])
def test_a_lone_surrogate_in_a_value_or_the_message_loses_no_line(
    formatter: type[logging.Formatter],
) -> None:
    """A name decoded from the API server can hold what UTF-8 cannot (a lone surrogate,
    "\\udc80"): the line is written with it escaped, not lost to an encoding error."""
    r = record("read \udc80 here", namespace="team", object="bad \udc80 name")
    line = formatter().format(r)
    line.encode("utf-8")  # what the stream will do with it
    assert "team" in line
    assert "udc80" in line


@pytest.mark.parametrize(
    ("fmt", "terminal", "effective"),
    [
        ("auto", True, "console"),
        ("auto", False, "json"),
        ("console", False, "console"),
        ("text", False, "console"),  # the old name
        ("json", True, "json"),  # the chart's: JSON even when someone attaches a terminal
    ],
)
def test_the_format_in_effect(fmt: str, terminal: bool, effective: str) -> None:
    assert logs.resolve(fmt, terminal=terminal) == effective


def test_dev_log_format_overrides_the_configured_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"apiVersion: {API_VERSION}\nkind: {KIND}\nlogging:\n  format: json\n")
    seen: list[str] = []
    monkeypatch.setattr(logs, "setup", lambda level, fmt: seen.append(str(fmt)))
    # Stop right after logging is set up: no local cluster to start.
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: None)
    cli.main(["dev", "--config", str(config), "--log-format", "console"])
    cli.main(["dev", "--config", str(config)])
    assert seen == ["console", "json"]
