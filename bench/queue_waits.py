"""Where a user's change waited in the operator: `python -m bench.queue_waits RESULT TRACE`.

Reads a result of `bench/run --trace-queue TRACE` (`--fairness`: the cold start's
changes; `--tenants`: tenant B's new pools) and the queue trace its operators wrote
(`TRACE.<pid>`, bench/queuetrace). For each change, the pass that published it (of those
handed out before the bench saw it published, the longest: the others found nothing to
do yet, or ran on the events of its writes): when its key was queued after the change
was sent (a DGD's patch, a relay's create: the watch's delivery), the keys handed to
workers before it (`ahead`), the wait for a worker (`wait`), whether the worker kept for
changes took it, and how long that pass ran (`pass`: its writes; the status write comes
last). Then a summary: whether the changes went first in the queue, and how the latency
splits between the watch, the queue and the pass.
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
    """The pass that published the change: of those handed out before the bench saw it
    published, the longest. Others did nothing yet (a DGD's event can reach the operator
    before its relay's: its pass finds no relay) or ran on the events of its writes."""
    key, since = change["key"], change["since"]
    seen = since + change["ms"] / 1000
    start = bisect.bisect_left(times, since)
    passes: list[dict[str, Any]] = []
    added: Line | None = None  # the add the next pass answers
    again: Line | None = None  # an add while a pass ran: queued again at its end
    ahead = 0
    current: dict[str, Any] | None = None
    for line in lines[start:]:
        if line.t > seen and current is None:
            break
        if line.key != key:
            if line.op == "get" and added is not None and current is None:
                ahead += 1
            continue
        if line.op == "add" and current is not None:
            again = again or line
        elif line.op == "add" and added is None:
            added, ahead = line, 0
        elif line.op == "get" and added is not None:
            current = {"added": added, "got": line, "ahead": ahead}
        elif line.op == "done" and current is not None:
            current["done"] = line
            passes.append(current)
            current, added, again, ahead = None, again, None, 0
    if not passes:
        return {}
    # Its writes make it the longest (a pass on the events of those writes is short).
    index = max(range(len(passes)), key=lambda i: passes[i]["done"].t - passes[i]["got"].t)
    found = passes[index]
    return {
        "ahead": found["ahead"],
        "delivered_ms": (found["added"].t - since) * 1000,
        "wait_ms": (found["got"].t - found["added"].t) * 1000,
        "pass_ms": (found["done"].t - found["got"].t) * 1000,
        "passes_before": index,
        "kept": found["got"].getter == "kept",
        "priority": found["got"].priority,
    }


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
            f"{change['ms']:8.1f} ms  {change['key']:<28} "
            f"queued at {found['delivered_ms']:6.1f} ms  "
            f"ahead {found['ahead']:3d}  wait {found['wait_ms']:6.1f} ms  "
            f"pass {found['pass_ms']:6.1f} ms  after {found['passes_before']} passes  "
            f"{'kept worker' if found['kept'] else 'any worker'}"
        )
    if not rows:
        return
    print(
        f"\n{len(rows)} changes: {sum(1 for r in rows if r['ahead'] == 0)} with no key handed "
        f"out before them, {sum(1 for r in rows if r['kept'])} taken by the kept worker; "
        f"queued at ms {percentiles([r['delivered_ms'] for r in rows])}; "
        f"wait ms {percentiles([r['wait_ms'] for r in rows])}; "
        f"pass ms {percentiles([r['pass_ms'] for r in rows])}; "
        f"full collections {len(collections)} "
        f"(longest {max((c[1] for c in collections), default=0.0):.3f} s)"
    )


if __name__ == "__main__":
    main()
