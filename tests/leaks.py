"""Nothing a test starts may outlive it: the processes (by PID) and directories of the
control planes every tier starts are checked the same way."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any


def surviving(pids: Iterable[int]) -> list[int]:
    """The PIDs among `pids` that still run."""
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        alive.append(pid)
    return alive


def run_plane(cp: Any) -> Iterator[Any]:
    """Start `cp`, yield it, stop it, and assert that no process (by the PIDs it
    started) and no temporary directory survive."""
    cp.start()
    try:
        yield cp
    finally:
        pids, tmp = cp.pids, cp.dir
        cp.stop()
        leaked = surviving(pids)
        assert not leaked, f"control-plane processes survived stop(): {leaked}"
        assert not tmp.exists(), f"control-plane directory survived stop(): {tmp}"
