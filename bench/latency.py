"""Reaction latency: a change made through the API (rename a frontend in a DGD, or
delete an export as a user would) to the corrected export seen by a watching client."""

from __future__ import annotations

import asyncio
import functools
import random
import statistics
import time
from typing import Any

from dynamo_pool_operator.runtime.client.rest import Client

from .objects import EXPORTS, rename_chat
from .tracker import Tracker


def _replaced(tracker: Tracker, ns: str, name: str, old_uid: str | None) -> bool:
    """The export exists and is not the one that was there before the change."""
    return tracker.uid(EXPORTS, ns, name) not in (None, old_uid)


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s) + 0.5) - 1))]


async def reaction_latency(
    client: Client, tracker: Tracker, pools: list[tuple[str, str]], changes: int, gap: float = 0.1
) -> dict[str, Any]:
    """`changes` changes, one at a time with `gap` s between them, alternating kinds
    over random pools; latency from the API response to the export in the watch."""
    rng = random.Random(7)
    samples: list[dict[str, Any]] = []
    for k in range(changes):
        ns, pool = rng.choice(pools)
        if k % 2 == 0:
            chat = f"Chat{k}"
            want = f"{pool}-chat{k}"
            await rename_chat(client, ns, pool, chat)
            t0 = time.perf_counter()
            seen = tracker.wait(functools.partial(_replaced, tracker, ns, want, None))
            kind = "rename-frontend"
        else:
            want = f"{pool}-frontend"
            old = tracker.uid(EXPORTS, ns, want)
            await client.delete(EXPORTS, want, ns)
            t0 = time.perf_counter()
            seen = tracker.wait(functools.partial(_replaced, tracker, ns, want, old))
            kind = "delete-export"
        t1 = await asyncio.wait_for(seen, 60)
        samples.append({"kind": kind, "ms": round(max(t1 - t0, 0.0) * 1000, 2)})
        await asyncio.sleep(gap)
    ms = [s["ms"] for s in samples]
    summary = {
        "n": len(ms),
        "p50_ms": percentile(ms, 50),
        "p95_ms": percentile(ms, 95),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms),
        "mean_ms": round(statistics.fmean(ms), 2),
    }
    by_kind = {}
    for kind in ("rename-frontend", "delete-export"):
        ks = [s["ms"] for s in samples if s["kind"] == kind]
        if ks:
            by_kind[kind] = {"p50_ms": percentile(ks, 50), "p99_ms": percentile(ks, 99)}
    return {"summary": summary, "by_kind": by_kind, "samples": samples}
