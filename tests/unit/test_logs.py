"""Log lines for people and for pipelines (logs.py), `dev --log-format` and `make dev
LOG_FORMAT=`, and the fields of a context (`dev --clusters 2`'s `cluster=`)."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
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


def test_dev_logs_lines_for_people_even_when_piped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make dev | tee dev.log` is still a person reading: `dev` decides by command,
    not by whether stderr is a terminal; `run` keeps `auto` (JSON in a pod)."""
    seen: list[str] = []
    monkeypatch.setattr(logs, "setup", lambda level, fmt: seen.append(str(fmt)))
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(logs.sys.stderr, "isatty", lambda: False)
    cli.main(["dev"])
    cli.main(["dev", "--log-format", "json"])
    cli.main(["dev", "--log-format", "auto"])
    assert seen == ["console", "json", "console"]
    assert logs.for_people("auto") == "console"
    assert logs.for_people("text") == "console"


def test_make_dev_passes_a_log_format() -> None:
    """`make dev LOG_FORMAT=json` reaches `dev --log-format json`; without it, none."""
    root = Path(__file__).parents[2]

    def recipe(*variables: str) -> str:
        done = subprocess.run(
            ["make", "-n", "-C", str(root), "dev", *variables],
            capture_output=True,
            text=True,
            check=True,
        )
        return " ".join(done.stdout.replace("\\\n", " ").split())

    assert "dynamo-pool-operator dev --clusters 2 --log-format json" in recipe(
        "LOG_FORMAT=json", "CLUSTERS=2"
    )
    assert "--log-format" not in recipe()


@pytest.mark.parametrize("fmt", ["console", "json"])
async def test_every_line_of_a_context_carries_its_fields(
    fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`dev --clusters 2` runs each cluster's operator in a task of its own context: every
    line it logs, from the tasks and threads it starts too, says `cluster=`, first among
    the fields; a call site's own field of that name wins."""
    log = logging.getLogger("dynamo_pool_operator.test")
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    logs.setup("info", fmt)
    try:

        async def work() -> None:
            log.info("a task of it")

        async def operator() -> None:
            log.info("started", extra={"namespace": "ns"})
            await asyncio.create_task(work())
            await asyncio.to_thread(log.info, "a thread of it")

        await asyncio.gather(
            *(
                asyncio.create_task(operator(), context=logs.context(cluster=c))
                for c in ("east", "west")
            )
        )
        log.info("the harness's own line")
        log.info("named", extra={"cluster": "mine"})
    finally:
        root.handlers[:], root.level = handlers, level
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 8, lines
    if fmt == "json":
        docs = [json.loads(line) for line in lines]
        assert sorted(d.get("cluster", "") for d in docs) == [
            "",
            *["east"] * 3,
            "mine",
            *["west"] * 3,
        ]
        started = next(d for d in docs if d["msg"] == "started" and d["cluster"] == "east")
        assert list(started)[4:] == ["cluster", "namespace"], started
    else:
        tagged = [line for line in lines if "cluster=" in line]
        assert len(tagged) == 7, lines
        east = [line for line in lines if "cluster=east" in line]
        assert len(east) == 3, lines
        assert any(line.endswith("started cluster=east namespace=ns") for line in east), east
        assert next(line for line in lines if "harness" in line).endswith("own line")


async def test_dev_with_two_clusters_runs_each_operator_in_its_clusters_context(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The wiring of `dev --clusters 2` (dev.py): each cluster's `process.run` logs with
    `cluster=` its cluster (the operators themselves stand in: no cluster is started)."""
    from dynamo_pool_operator import dev
    from dynamo_pool_operator.config import OperatorConfiguration

    class Plane:
        def __init__(self, name: str) -> None:
            self.url, self.kubeconfig = f"https://{name}", Path(f"/{name}")

        def create_namespace(self, _: str) -> None:
            pass

    class World:
        members = {"east": Plane("east"), "west": Plane("west")}

    async def run(_: object, *, kubeconfig: str, stop: asyncio.Event) -> int:
        logging.getLogger("dynamo_pool_operator.process").info("running on %s", kubeconfig)
        await stop.wait()
        return 0

    async def nothing(*_: object) -> list[str]:
        return []

    monkeypatch.setattr(dev.process, "run", run)
    monkeypatch.setattr(dev, "_as_west_sees_it", nothing)
    monkeypatch.setattr(dev, "_stop_on_signals", lambda stop: None)

    class NoClient:
        def __init__(self, *_: object, **__: object) -> None:
            pass

        async def __aenter__(self) -> NoClient:
            return self

        async def __aexit__(self, *_: object) -> None:
            pass

    async def deployed(*_: object) -> None:
        pass

    monkeypatch.setattr(dev, "Client", NoClient)
    monkeypatch.setattr(dev, "load_kubeconfig", lambda path: path)
    monkeypatch.setattr(dev, "_as_deployed", deployed)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    logs.setup("info", "console")
    try:
        world: Any = World()
        assets: Any = None  # what only the report, stood in for, reads
        code = await dev._two_clusters(
            world,
            OperatorConfiguration(),
            assets,
            Path("/dev-kubeconfig"),
            asyncio.Event(),
            None,
            exit_when_ready=True,
        )
    finally:
        root.handlers[:], root.level = handlers, level
    assert code == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "running on" in line]
    assert sorted(line.split("running on ")[1] for line in lines) == [
        "/east cluster=east",
        "/west cluster=west",
    ]
