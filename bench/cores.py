"""The control plane on cores of its own, its clients on the rest, for one phase.

On this bench's box the API server, etcd, the operator and the bench share every core,
so a CPU-second the operator spends deciding is one the server does not get: a mass
event's time there is the sum of everyone's CPU over the cores. In a cluster the
operator runs on a node of its own. `Separated` models that for a phase: the control
plane's processes (every thread, and the threads they start later) are bound to the
first half of the box's cores and the clients (the operator, the bench and its bare
client) to the rest, and the phase then takes the time the server needs for what it is
asked, not for what its clients compute. The same binding holds for the event and for
its floor, so their ratio is still taken within one set-up.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType


def threads(pid: int) -> list[int]:
    """Every thread of `pid` (an empty list once it is gone)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def bind(pid: int, cpus: Iterable[int]) -> int:
    """Bind every thread of `pid` to `cpus`; the threads bound (a thread may end meanwhile)."""
    want = set(cpus)
    bound = 0
    for tid in threads(pid):
        try:
            os.sched_setaffinity(tid, want)
        except OSError:  # ended since it was listed
            continue
        bound += 1
    return bound


def split(cpus: Iterable[int]) -> tuple[list[int], list[int]]:
    """The control plane's cores and the clients': the first half and the rest."""
    ordered = sorted(set(cpus))
    if len(ordered) < 2:
        raise ValueError(f"separating the control plane needs 2 cores or more, not {ordered}")
    half = len(ordered) // 2
    return ordered[:half], ordered[half:]


def allowed(pid: int) -> list[int]:
    """The cores `pid`'s main thread may run on."""
    return sorted(os.sched_getaffinity(pid))


class Separated:
    """`with Separated(server_pids, client_pids):` binds them apart; leaving it binds
    every one (still running) back to every core the bench was allowed at entry."""

    def __init__(self, server: Iterable[int], clients: Iterable[int]) -> None:
        self.server_pids = list(server)
        self.client_pids = list(clients)
        self.all = allowed(0)
        self.server_cpus, self.client_cpus = split(self.all)

    def describe(self) -> dict[str, object]:
        return {
            "control_plane_cpus": self.server_cpus,
            "client_cpus": self.client_cpus,
            "what": "the control plane's processes (the API server and etcd) bound to the "
            "first cores, the operator and the bench (its bare client too) to the rest, from "
            "the event's start to the floor's end",
        }

    def __enter__(self) -> Separated:
        for pid in self.server_pids:
            bind(pid, self.server_cpus)
        for pid in self.client_pids:
            bind(pid, self.client_cpus)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for pid in [*self.server_pids, *self.client_pids]:
            if Path(f"/proc/{pid}").exists():
                bind(pid, self.all)
