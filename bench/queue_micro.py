"""The work queue's cost per add and per get, with and without fair queuing.

`python -m bench.queue_micro` (no control plane): a queue is filled to a depth (100 or
10,000 keys), then held there while keys go through it, `BATCH` gets (+`done`) then
`BATCH` adds of new keys, timed apart; then each waiting key is moved up from `LOW` to
`NORMAL` (an `add` at a higher priority). Flows: none (FIFO, the queue without a flow
function), one namespace, 100 namespaces, and one namespace per key. `--baseline REV`
adds the queue of git revision REV (before fair queuing: 754257a), FIFO, as a row of
its own. The figures that matter are ratios within the run: a key's cost at 10,000
queued against at 100 (1.0: O(1)), and each row's against FIFO (the baseline's when
given) at 10,000. The clock is the process's CPU time, and each figure the fastest of
`--repeats` rounds (the machine is shared).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.clock import SystemClock
from dynamo_pool_operator.runtime.control.controller import Request, by_namespace
from dynamo_pool_operator.runtime.control.queue import LOW, NORMAL, WorkQueue

ROOT = Path(__file__).resolve().parent.parent

#: name -> (flow function, namespaces the keys are spread over; 0: one per key)
FLOWS: dict[str, tuple[Callable[[Request], Hashable] | None, int]] = {
    "fifo": (None, 100),
    "1 flow": (by_namespace, 1),
    "100 flows": (by_namespace, 100),
    "a flow a key": (by_namespace, 0),
}
DEPTHS = (100, 10_000)


def key(i: int, namespaces: int) -> Request:
    return (f"ns-{i if namespaces == 0 else i % namespaces}", f"pool-{i}")


#: Keys got (then added) between two readings of the clock.
BATCH = 10


def queue_at(rev: str) -> Any:
    """`WorkQueue` as git revision `rev` has it (its module loaded from a scratch file)."""
    path = "src/dynamo_pool_operator/runtime/control/queue.py"
    text = subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location(f"queue_{rev}", f.name)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    os.unlink(f.name)
    return module.WorkQueue


def make_queue(name: str, flow: Callable[[Request], Hashable] | None, baseline: Any) -> Any:
    if baseline is not None:
        return baseline(name, clock=SystemClock(), registry=CollectorRegistry())
    return WorkQueue[Request](name, clock=SystemClock(), registry=CollectorRegistry(), flow=flow)


async def one_round(
    flow: Callable[[Request], Hashable] | None,
    spread: int,
    depth: int,
    cycles: int,
    baseline: Any = None,
) -> dict[str, float]:
    """CPU ns per add, per get (+done) and per move up, at `depth` keys queued (the
    process's CPU time: a preempted moment is not counted; `BATCH` keys a reading)."""
    q = make_queue("micro", flow, baseline)
    for i in range(depth):
        q.add(key(i, spread))
    add_ns = get_ns = 0
    clock = time.process_time_ns
    for n in range(depth, depth + cycles, BATCH):
        t0 = clock()
        for _ in range(BATCH):
            q.done(await q.get())
        t1 = clock()
        for i in range(n, n + BATCH):
            q.add(key(i, spread))
        t2 = clock()
        get_ns += t1 - t0
        add_ns += t2 - t1
    assert len(q) == depth
    low = make_queue("micro-low", flow, baseline)
    keys = [key(i, spread) for i in range(depth)]
    for k in keys:
        low.add(k, LOW)
    t0 = clock()
    for k in keys:
        low.add(k, NORMAL)
    move_ns = clock() - t0
    done = cycles // BATCH * BATCH
    return {"add_ns": add_ns / done, "get_ns": get_ns / done, "move_up_ns": move_ns / depth}


async def measure(cycles: int, repeats: int, baseline: str | None) -> dict[str, Any]:
    rows: dict[str, tuple[Callable[[Request], Hashable] | None, int, Any]] = {
        name: (flow, spread, None) for name, (flow, spread) in FLOWS.items()
    }
    if baseline:
        rows[f"fifo at {baseline}"] = (None, 100, queue_at(baseline))
    figures: dict[str, dict[str, dict[str, float]]] = {}
    for name, (flow, spread, old) in rows.items():
        figures[name] = {}
        for depth in DEPTHS:
            rounds = [await one_round(flow, spread, depth, cycles, old) for _ in range(repeats)]
            figures[name][str(depth)] = {
                op: round(min(r[op] for r in rounds), 1) for op in rounds[0]
            }
    ratios: dict[str, Any] = {}
    reference = f"fifo at {baseline}" if baseline else "fifo"
    against = "baseline" if baseline else "fifo"
    for name in rows:
        deep, shallow = figures[name][str(DEPTHS[-1])], figures[name][str(DEPTHS[0])]
        fifo = figures[reference][str(DEPTHS[-1])]
        ratios[name] = {
            f"{op}_at_{DEPTHS[-1]}_to_{DEPTHS[0]}": round(deep[op] / shallow[op], 2) for op in deep
        } | {f"{op}_to_{against}_at_{DEPTHS[-1]}": round(deep[op] / fifo[op], 2) for op in deep}
    return {"cpu_ns_per_operation": figures, "ratios": ratios}


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.queue_micro", description=__doc__)
    p.add_argument("--cycles", type=int, default=20_000, help="get+add cycles a round")
    p.add_argument("--repeats", type=int, default=5, help="rounds; the fastest counts")
    p.add_argument("--baseline", help="also the queue of this git revision (FIFO)")
    p.add_argument(
        "--out", type=Path, help="results JSON (default bench/results/<ts>-queue-micro.json)"
    )
    a = p.parse_args()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%MZ")
    out = a.out or ROOT / "bench" / "results" / f"{stamp}-queue-micro.json"
    result: dict[str, Any] = {
        "command": "python -m bench.queue_micro " + " ".join(sys.argv[1:]),
        "cycles": a.cycles,
        "repeats": a.repeats,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    result |= asyncio.run(measure(a.cycles, a.repeats, a.baseline))
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    out.write_text(json.dumps(result, indent=1) + "\n")
    for name, by_depth in result["cpu_ns_per_operation"].items():
        print(f"{name:>14}: {by_depth}  {result['ratios'][name]}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
