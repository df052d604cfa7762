"""Restart on the converged fleet: time to "every relay reconciled", the restart's
memory peak, and what the API server read for it (its own metrics).

"Every relay reconciled" comes from the operator's /metrics: N reconciles done and an
empty queue (the restart lists every relay and queues it). The memory peak is the
process's VmHWM: the list path was the peak of earlier runs. `python` runs another
interpreter (another checkout's environment), so two versions of the operator can be
compared on the same fleet, seconds apart.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dynamo_pool_operator.localcluster.controlplane import ControlPlane

from . import procs
from .fairness import QueueProbe


async def restart(
    cp: ControlPlane,
    n: int,
    workers: int,
    log: Path,
    *,
    timeout: float,
    python: str | None = None,
) -> tuple[dict[str, Any], procs.OperatorProcess]:
    """Start an operator process on the converged fleet and wait until it reconciled
    every relay; returns the figures and the (running) process."""
    reads0 = procs.storage_reads(cp)
    reqs0 = procs.request_counts(cp)
    op = procs.OperatorProcess(cp, workers, log, python)
    t0 = time.perf_counter()
    op.start()
    await QueueProbe(op, n, every=0.1).wait_done(timeout)
    seconds = time.perf_counter() - t0
    status = op.status()
    out = {
        "python": python or "this checkout",
        "seconds_to_every_relay_reconciled": round(seconds, 3),
        "VmHWM": status["VmHWM"],
        "VmRSS": status["VmRSS"],
        "cpu_seconds": round(status["cpu_ticks"] / 100, 2),
        "apiserver_storage_reads": procs.diff(procs.storage_reads(cp), reads0),
        "apiserver_requests_delta": procs.diff(procs.request_counts(cp), reqs0),
    }
    return out, op
