"""CPU seconds of named processes over a phase (utime + stime from /proc): where a
phase's time went, between the operator, the API server, etcd and the bench itself.

Beside them, the box's steal time over the phase (`steal`, from /proc/stat, all CPUs):
on a virtual machine, the time its CPUs were runnable but the host ran something else.
The same work then takes longer, in wall time and often in CPU seconds too, so a phase
with more steal than its neighbour is not comparable with it."""

from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")
#: The key of the box's steal seconds in a `CpuMeter` reading (not a process's CPU).
STEAL = "steal (the box, not a process)"


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of `pid` so far (None once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def steal_seconds() -> float | None:
    """The box's steal time so far, all CPUs (None where /proc/stat does not say)."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if len(first) < 9 or first[0] != "cpu":
        return None
    return int(first[8]) / _TICK


class CpuMeter:
    """`start()`, then `stop()`: each process's CPU seconds in between."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = dict(pids)
        self._at: dict[str, float | None] = {}
        self._steal: float | None = None

    def start(self) -> None:
        self._at = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        self._steal = steal_seconds()

    def stop(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, pid in self.pids.items():
            now, then = cpu_seconds(pid), self._at.get(name)
            if now is not None and then is not None:
                out[name] = round(now - then, 2)
        steal = steal_seconds()
        if steal is not None and self._steal is not None:
            out[STEAL] = round(steal - self._steal, 2)
        return out


def processes(cp_pids: dict[str, int], operator_pid: int | None = None) -> dict[str, int]:
    """The processes a phase's CPU is shared between: the control plane's, the bench's
    own and (when running) the operator's."""
    out = {n: p for n, p in cp_pids.items() if n in ("kube-apiserver", "etcd")}
    out["bench"] = os.getpid()
    if operator_pid is not None:
        out["operator"] = operator_pid
    return out
