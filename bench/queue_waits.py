"""Where a user's change waited in the operator: `python -m bench.queue_waits RESULT TRACE`.

Reads a result of `bench/run --trace-queue TRACE` (`--fairness`: the cold start's
changes; `--tenants`: tenant B's new pools) and the queue trace its operators wrote
(`TRACE.<pid>`, bench/queuetrace). For each change, from the first time its relay's key
was queued after the change was sent (a DGD's patch, a relay's create): the keys handed
to workers before it (`ahead`), the wait for a worker (`wait`), whether the worker kept
for changes took it, and how long that pass ran (`pass`: the change is seen before the
pass ends, its status write comes last). Then a summary: whether the changes went first
in the queue, and how the latency splits between waiting and the pass.
"""

from __future__ import annotations

import argparse
import bisect
import glob
import json
import statistics
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Line:
    t: float
    op: str
    key: str
    priority: str
    getter: str


def read_trace(prefix: str) -> tuple[list[Line], list[tuple[float, float]]]:
    lines: list[Line] = []
    collections: list[tuple[float, float]] = []
    for path in glob.glob(f"{prefix}.*"):
        with open(path) as f:
            for raw in f:
                parts = raw.split()
                if len(parts) >= 3 and parts[1] == "gc2":
                    collections.append((float(parts[0]), float(parts[2])))
                elif len(parts) >= 5:
                    lines.append(Line(float(parts[0]), parts[1], parts[2], parts[3], parts[4]))
    lines.sort(key=lambda line: line.t)
    return lines, collections


def changes(result: dict[str, Any]) -> list[dict[str, Any]]:
    """(key, since, ms) of each change: the cold start's, or B's in the fair rounds."""
    if "during_cold_start" in result:
        return [
            {"key": s["pool"], "since": s["made_at"], "ms": s["ms"]}
            for s in result["during_cold_start"]["samples"]
        ]
    return [
        {"key": f"tenant-b/{s['pool']}", "since": s["relay_sent_at"], "ms": s["ms"]}
        for r in result.get("rounds", [])
        if r["fair_queuing"]
        for s in r["b_samples"]
        if s["during"]
    ]


def explain(change: dict[str, Any], lines: list[Line], times: list[float]) -> dict[str, Any]:
    key = change["key"]
    start = bisect.bisect_left(times, change["since"])
    added = got = None
    ahead = 0
    for line in lines[start:]:
        if added is None:
            if line.op == "add" and line.key == key:
                added = line
            continue
        if got is None:
            if line.op == "get":
                if line.key == key:
                    got = line
                else:
                    ahead += 1
            continue
        if line.op == "done" and line.key == key:
            return {
                "ahead": ahead,
                "wait_ms": (got.t - added.t) * 1000,
                "pass_ms": (line.t - got.t) * 1000,
                "kept": got.getter == "kept",
                "priority": got.priority,
            }
    return {}


def percentiles(values: list[float]) -> str:
    s = sorted(values)
    if not s:
        return "-"
    return f"p50 {statistics.median(s):.1f}, p90 {s[int(0.9 * (len(s) - 1))]:.1f}, max {s[-1]:.1f}"


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.queue_waits", description=__doc__)
    p.add_argument("result")
    p.add_argument("trace", help="the --trace-queue prefix")
    a = p.parse_args()
    with open(a.result) as f:
        result = json.load(f)
    lines, collections = read_trace(a.trace)
    times = [line.t for line in lines]
    rows = []
    for change in sorted(changes(result), key=lambda c: -c["ms"]):
        found = explain(change, lines, times)
        if not found:
            print(f"{change['key']}: not in the trace")
            continue
        rows.append(found)
        print(
            f"{change['ms']:8.1f} ms  {change['key']:<28} ahead {found['ahead']:3d}  "
            f"wait {found['wait_ms']:7.1f} ms  pass {found['pass_ms']:7.1f} ms  "
            f"{'kept worker' if found['kept'] else 'any worker'}"
        )
    if not rows:
        return
    print(
        f"\n{len(rows)} changes: {sum(1 for r in rows if r['ahead'] == 0)} with no key handed "
        f"out before them, {sum(1 for r in rows if r['kept'])} taken by the kept worker; "
        f"wait ms {percentiles([r['wait_ms'] for r in rows])}; "
        f"pass ms {percentiles([r['pass_ms'] for r in rows])}; "
        f"full collections {len(collections)} "
        f"(longest {max((c[1] for c in collections), default=0.0):.3f} s)"
    )


if __name__ == "__main__":
    main()
