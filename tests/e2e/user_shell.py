"""A user's shell next to a running `make dev`: what dev printed, run as printed.

`running_dev` starts dev as the CLI does (`dev.run`, default configuration) with its
kubeconfig at a path of the test's, until the block ends; `Shell` runs command lines
as a user would in the checkout (bash, `helm`, `kubectl` and `dynamo-pool-operator` on
PATH, the lines dev said to export first).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dynamo_pool_operator import dev, process
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.localcluster.assets import resolve
from tests.e2e.chart_helpers import ROOT, helm_binary

#: How long one command may take (Helm's own wait for a hook is 5 minutes).
COMMAND_TIMEOUT = 150.0


@contextlib.asynccontextmanager
async def running_dev(
    capsys: pytest.CaptureFixture[str], kubeconfig: Path, clusters: int = 1
) -> AsyncIterator[str]:
    """dev running, reported (what it printed); stopped after the block, which must
    end it with exit code 0 and its kubeconfig removed."""
    stop, ready = asyncio.Event(), asyncio.Event()
    config = OperatorConfiguration()
    running = asyncio.create_task(
        dev.run(config, clusters=clusters, kubeconfig=kubeconfig, stop=stop, ready=ready)
    )
    try:
        reported = asyncio.create_task(ready.wait())
        await asyncio.wait({running, reported}, timeout=180, return_when=asyncio.FIRST_COMPLETED)
        reported.cancel()
        report = capsys.readouterr().out
        assert ready.is_set(), f"dev did not report:\n{report}"
        yield report
    finally:
        stop.set()
        code = await running
    assert code == process.EXIT_OK
    assert not await asyncio.to_thread(kubeconfig.exists), "dev left its kubeconfig behind"


def printed_lines(report: str) -> tuple[str, list[str]]:
    """What dev printed under "Look at it": its `export KUBECONFIG=...` and the commands
    after it, up to the first blank line."""
    lines = report.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Look at it"))
    block = []
    for line in lines[at + 1 :]:
        if not line.strip():
            break
        block.append(line.strip())
    export, *commands = block
    assert export.startswith("export KUBECONFIG="), block
    return export, commands


@dataclass(frozen=True)
class Ran:
    """One command's outcome. Assert with `str(ran)` as the message: pytest cuts the repr of
    a message that is not a string to 240 characters, which hides the lines that failed."""

    command: str
    code: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"$ {self.command}\n(exit {self.code})\n{self.out}\n{self.err}"


class Shell:
    """A user's shell in the checkout: `helm`, `kubectl` and the CLI on PATH, a home of
    its own (helm's caches), and the lines a user exported before each command."""

    def __init__(self, home: Path, exports: str) -> None:
        assets = resolve()
        bin_dir = home / "bin"
        bin_dir.mkdir(parents=True)
        assert assets.kubectl is not None
        (bin_dir / "helm").symlink_to(helm_binary())
        (bin_dir / "kubectl").symlink_to(assets.kubectl)
        cli = bin_dir / "dynamo-pool-operator"
        # What `uv tool install .` puts on PATH: this checkout's code, by its name.
        cli.write_text(
            f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m dynamo_pool_operator.cli "$@"\n'
        )
        cli.chmod(0o755)
        self.env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home)}
        if "PYTHONPATH" in os.environ:
            self.env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        self.exports = exports

    async def run(self, command: str, timeout: float = COMMAND_TIMEOUT) -> Ran:
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            f"{self.exports}\n{command}",
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = await proc.communicate()
            return Ran(command, -1, out.decode(), err.decode() + f"\n(killed after {timeout:.0f}s)")
        assert proc.returncode is not None
        return Ran(command, proc.returncode, out.decode(), err.decode())
