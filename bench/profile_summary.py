"""Summarise a py-spy raw (collapsed stacks) profile: where the cold start's time goes.

    uv run python -m bench.profile_summary PROFILE.txt [--top 25]

Prints self time by function and inclusive time by module area (our runtime,
reconcile, exports, aiohttp/ssl, json, asyncio, logging, imports), as % of samples.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.+?) \((?P<file>[^:]+):\d+\)$")

AREAS = (
    ("imports (process start)", ("importlib._bootstrap",)),
    ("TLS / ssl", ("ssl.py",)),
    ("aiohttp (HTTP client)", ("aiohttp/",)),
    ("asyncio event loop", ("asyncio/",)),
    ("json encode/decode", ("json/", "orjson", "msgspec")),
    ("logging", ("logging/",)),
    ("informers / stores", ("runtime/cache/informer.py", "runtime/cache/store.py")),
    ("work queue / controller", ("runtime/control/queue.py", "runtime/control/controller.py")),
    ("events recorder", ("runtime/events.py",)),
    ("exports", ("pool/exports/",)),
    ("relay reconcile", ("pool/",)),
    ("client", ("runtime/client/rest.py",)),
    ("deepcopy", ("copy.py",)),
)


def frames(stack: str) -> list[tuple[str, str]]:
    out = []
    for f in stack.split(";"):
        m = _FRAME.match(f.strip())
        if m:
            out.append((m["func"], m["file"]))
    return out


#: Functions whose inclusive share is printed as well: the phases of a pass, the writes
#: and the watch, so a profile of a mass event says how much of it is deciding.
FUNCTIONS = (
    ("a pass (PoolRelayReconciler.reconcile)", "PoolRelayReconciler.reconcile"),
    ("  its snapshot (gather)", "PoolRelayReconciler.gather"),
    ("  its plan (pool/plan.py make_plan)", "make_plan (dynamo_pool_operator/pool/plan.py"),
    ("  its report (pool/report.py report)", "report (dynamo_pool_operator/pool/report.py"),
    ("  its writes (Executor.run)", "Executor.run"),
    ("a request (Client._request)", "Client._request"),
    ("the Event recorder (runtime/events.py)", "dynamo_pool_operator/runtime/events.py"),
    ("a watch event read (Informer._handle_line)", "Informer._handle_line"),
)


#: Leaves where a thread waits: the loop in its selector, and a thread-pool worker (the
#: loop's executor, which resolves names) waiting for work, which py-spy samples as if it ran.
_WAITING = (("_worker", "concurrent/futures/thread.py"),)


def _idle(leaf: tuple[str, str]) -> bool:
    name, file = leaf
    if name in ("select", "poll", "epoll.poll") or file.endswith("selectors.py"):
        return True
    return any(name == n and file.endswith(f) for n, f in _WAITING)


def summarise(path: Path, top: int) -> str:
    self_time: Counter[str] = Counter()
    area: Counter[str] = Counter()
    function: Counter[str] = Counter()
    idle = total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        fs = frames(stack)
        if not fs:
            continue
        if _idle(fs[-1]):
            idle += n
            continue
        leaf = fs[-1]
        self_time[f"{leaf[0]} ({leaf[1]})"] += n
        files = " ".join(f for _, f in fs)
        for name, needles in AREAS:
            if any(x in files for x in needles):
                area[name] += n
        for name, needle in FUNCTIONS:
            if needle in stack:
                function[name] += n
    busy = max(total - idle, 1)
    lines = [f"samples: {total}, idle: {idle} ({100 * idle / max(total, 1):.0f}%)"]
    lines.append("\ninclusive, % of busy samples (areas overlap):")
    lines += [f"  {100 * v / busy:5.1f}%  {k}" for k, v in area.most_common()]
    lines.append("\ninclusive, % of busy samples, by function:")
    lines += [f"  {100 * function[k] / busy:5.1f}%  {k}" for k, _ in FUNCTIONS]
    lines.append(f"\nself time, top {top}, % of busy samples:")
    lines += [f"  {100 * v / busy:5.1f}%  {k}" for k, v in self_time.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("profile", type=Path)
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args()
    print(summarise(a.profile, a.top))


if __name__ == "__main__":
    main()
