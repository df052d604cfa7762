"""Fairness: user changes made *while* the operator works through a mass event.

Two mass events, each with `changes` user changes issued one at a time, `gap` seconds
apart, on random pools, *open loop*: a change is made on schedule whether or not the
previous one has been reflected yet, so that they all fall inside the mass event
(waiting for each, as the reaction phase does, would push all but the first past its
end). The gap (0.25 s by default) keeps the changes a user's, not a load of their own:
at 0.02 s (`--fairness-gap 0.02`), 50 changes a second of not-yet-reconciled pools
were more pool reconciles than 4 workers serve during a cold start, and the changes
queued behind each other (p50 2.2 s at N = 1,000, 2026-12-01). Each change is timed
from its API response to the corrected export in the bench's watch, as in
`latency.py`.

* **Cold start**: the operator starts on N unreconciled pools; the changes begin with
  its first converged object. Only renames (a new frontend name -> a new export):
  an export to delete may not exist yet.
* **ClusterProperty change** over N converged pools: the cluster ID changes, so every
  relay is requeued (the relays keep their spec.clusterId, so each reconcile records
  a ClusterIDMismatch Warning): the mass requeue a ClusterProperty watch causes. The
  event lasts from the API server's receipt of the change to its answer to the event's
  last write (each relay's first status write, the Events about the property: the
  audit log, bench/cpfloor.py); the bench waits for it by the operator's queue (empty
  after N more reconciles, its /metrics, scraped once a second). Renames alternate
  with export deletions. The property
  is set back afterwards (untimed) and the fleet settles again.

A change counts as *during* the mass event if it was made before the event's last
write was answered; the percentiles are over those (all samples are kept in the file).
"""

from __future__ import annotations

import asyncio
import functools
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from dynamo_pool_operator.runtime.client.rest import Client

from .cpfloor import Recorder
from .latency import _replaced, percentile
from .objects import CLUSTER_ID, EXPORTS, rename_chat, set_cluster_id
from .procs import OperatorProcess
from .tracker import Tracker

#: The relay controller's queue and reconcile series carry its name as a label value.
CONTROLLER = '"dynamopoolrelay"'

#: The series the queue probe reads: only these are rendered for it (`?name[]=`), not
#: the per-relay ones (~0.1 s of the operator's loop a scrape at 5,000 relays).
_PROBED = ("controller_runtime_reconcile_total", "workqueue_depth")
#: The operator's garbage-collection pauses (`runtime/gcpauses.py`), read around an event.
_GC = "dynamo_pool_operator_gc_pause_seconds"
_GC_SERIES = (f"{_GC}_bucket", f"{_GC}_count", f"{_GC}_sum")
#: A full collection longer than this is a user's change's whole budget.
_GC_LONG = "0.1"

#: The cluster ID the ClusterProperty is changed to (the relays keep spec.clusterId).
OTHER_CLUSTER_ID = "bench-west"


class Changes:
    """Open-loop user changes on random pools; each one's latency, in the background."""

    def __init__(
        self,
        client: Client,
        tracker: Tracker,
        pools: list[tuple[str, str]],
        seed: int,
        timeout: float = 600.0,
    ) -> None:
        self.timeout = timeout  # a change may wait for a whole FIFO drain
        self.client = client
        self.tracker = tracker
        self.pools = pools
        self.rng = random.Random(seed)
        self.samples: list[dict[str, Any]] = []
        self._serial = seed * 100_000
        self._pending: set[tuple[str, str]] = set()

    async def run(
        self, changes: int, gap: float, in_progress: Callable[[], bool], *, deletes: bool
    ) -> list[dict[str, Any]]:
        tasks = []
        for k in range(changes):
            # Not a pool with a change still in flight: a second rename before the first
            # was reflected would take the first's export away before it ever existed.
            ns, pool = self.rng.choice(self.pools)
            while (ns, pool) in self._pending:
                ns, pool = self.rng.choice(self.pools)
            self._pending.add((ns, pool))
            kind = "delete-export" if deletes and k % 2 else "rename-frontend"
            tasks.append(asyncio.create_task(self._one(ns, pool, kind, in_progress)))
            await asyncio.sleep(gap)
        await asyncio.gather(*tasks)
        return self.samples

    async def _one(self, ns: str, pool: str, kind: str, in_progress: Callable[[], bool]) -> None:
        try:
            await self._change(ns, pool, kind, in_progress)
        finally:
            self._pending.discard((ns, pool))

    async def _change(self, ns: str, pool: str, kind: str, in_progress: Callable[[], bool]) -> None:
        self._serial += 1
        converged = self.tracker.pool_converged((ns, pool))
        during = in_progress()
        made_at = time.time()
        if kind == "rename-frontend":
            serial = self._serial
            writes = await rename_chat(self.client, ns, pool, f"Chat{serial}")
            t0, answered_at = time.perf_counter(), time.time()
            want = f"{pool}-chat{serial}"
            seen = self.tracker.wait(functools.partial(_replaced, self.tracker, ns, want, None))
        else:
            want = f"{pool}-frontend"
            old = self.tracker.uid(EXPORTS, ns, want)
            sent = time.perf_counter()
            await self.client.delete(EXPORTS, want, ns)
            t0, answered_at = time.perf_counter(), time.time()
            writes = [round((t0 - sent) * 1000, 2)]
            seen = self.tracker.wait(functools.partial(_replaced, self.tracker, ns, want, old))
        t1 = await asyncio.wait_for(seen, self.timeout)
        self.samples.append(
            {
                "kind": kind,
                "ms": round(max(t1 - t0, 0.0) * 1000, 2),
                "during": during,
                "made_at": made_at,
                "answered_at": answered_at,
                "pool": f"{ns}/{pool}",
                "pool_converged_before": converged,
                "user_writes_ms": writes,
            }
        )


def summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Percentiles over the changes made during the mass event (and over all)."""
    during = [s["ms"] for s in samples if s["during"]]
    every = [s["ms"] for s in samples]

    def stats(ms: list[float]) -> dict[str, Any]:
        if not ms:
            return {"n": 0}
        return {
            "n": len(ms),
            "p50_ms": percentile(ms, 50),
            "p95_ms": percentile(ms, 95),
            "p99_ms": percentile(ms, 99),
            "max_ms": max(ms),
            "mean_ms": round(statistics.fmean(ms), 2),
        }

    out = {"during": stats(during), "all": stats(every)}
    # The change's own writes, each timed alone: what one write took at the server while
    # the operator worked, to read the changes' latency against.
    writes = [ms for s in samples if s["during"] for ms in s.get("user_writes_ms", ())]
    if writes:
        out["user_writes_during"] = stats(writes)
    # A chain of plain writes in a row started as the change was made (tenants.py): the
    # server's floor for a pass that writes as many in a row, at the same moment.
    chains = [s["chain_ms"] for s in samples if s["during"] and "chain_ms" in s]
    if chains:
        out["chain_during"] = stats(chains)
    return out


async def cold_start_changes(
    changes: Changes, n: int, count: int, gap: float
) -> list[dict[str, Any]]:
    """Wait for the operator's first converged object, then make the changes while the
    cold start goes on."""
    tracker = changes.tracker
    await tracker.wait(lambda: tracker.converged_objects() > 0)
    return await changes.run(count, gap, lambda: tracker.converged_pools() < n, deletes=False)


class QueueProbe:
    """Whether the operator is still working through a mass requeue, from its own
    /metrics: the event is over once its controller reconciled at least `n` keys since
    `mark()` and its work queue is empty (every key was handed out)."""

    def __init__(self, op: OperatorProcess, n: int, every: float = 1.0) -> None:
        self.op = op
        self.n = n
        #: Seconds between scrapes. A whole scrape is not free for the operator: /metrics
        #: renders a series per relay from its relay cache, in its event loop (~0.1 s at
        #: N = 5,000); every 0.1 s it took most of the loop the mass event and the
        #: user's changes are measured in. The probe asks for its two series only.
        self.every = every
        self._base = 0.0

    async def _sample(self) -> tuple[float, float]:
        m = await asyncio.to_thread(self.op.metrics, _PROBED)
        reconciles = sum(
            v
            for k, v in m.items()
            if k.startswith("controller_runtime_reconcile_total{") and CONTROLLER in k
        )
        depth = sum(v for k, v in m.items() if k.startswith("workqueue_depth{") and CONTROLLER in k)
        return reconciles, depth

    async def mark(self) -> None:
        self._base = (await self._sample())[0]

    async def collections_and_passes(self) -> dict[str, float]:
        """The operator's full collections so far: how many, their seconds in all, and
        how many took longer than `_GC_LONG` seconds; the seconds of every collection,
        young ones included; its passes (an operator without the series: all 0)."""
        m = await asyncio.to_thread(self.op.metrics, (*_GC_SERIES, _PROBED[0]))
        full = 'generation="2"'
        count = sum(v for k, v in m.items() if k.startswith(f"{_GC}_count{{") and full in k)
        within = sum(
            v
            for k, v in m.items()
            if k.startswith(f"{_GC}_bucket{{") and full in k and f'le="{_GC_LONG}"' in k
        )
        return {
            "full_collections": count,
            "full_collection_seconds": sum(
                v for k, v in m.items() if k.startswith(f"{_GC}_sum{{") and full in k
            ),
            f"full_collections_over_{_GC_LONG}s": count - within,
            "collection_seconds": sum(v for k, v in m.items() if k.startswith(f"{_GC}_sum{{")),
            "passes": sum(
                v
                for k, v in m.items()
                if k.startswith("controller_runtime_reconcile_total{") and CONTROLLER in k
            ),
        }

    async def wait_done(self, timeout: float) -> float:
        """Seconds until the mass event is over (polled every `every` seconds)."""
        t0 = time.perf_counter()
        while True:
            reconciles, depth = await self._sample()
            if reconciles - self._base >= self.n and depth == 0:
                return time.perf_counter() - t0
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError(
                    f"mass event not over after {timeout:.0f}s: "
                    f"{reconciles - self._base:.0f}/{self.n} reconciles, depth {depth:.0f}"
                )
            await asyncio.sleep(self.every)


async def cluster_property_change(
    client: Client,
    changes: Changes,
    probe: QueueProbe,
    recorder: Recorder,
    count: int,
    gap: float,
    timeout: float,
    ended: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Change the cluster ID under N converged pools (every relay is requeued: each
    reconcile records a ClusterIDMismatch Warning) and make the changes meanwhile;
    `recorder` notes what the operator wrote until the event's end (for its floor,
    bench/cpfloor.py); then set it back (untimed) and let the fleet settle again."""
    done = False
    await probe.mark()
    gc_before = await probe.collections_and_passes()
    await recorder.start()
    await set_cluster_id(client, OTHER_CLUSTER_ID)
    runner = asyncio.create_task(changes.run(count, gap, lambda: not done, deletes=True))
    try:
        drained = await probe.wait_done(timeout)
    finally:
        done = True
        recorder.over()
    samples = await runner
    gc_after = await probe.collections_and_passes()
    ended()  # e.g. stop a profile of the event (it blocks the loop) before the set-back
    written = await recorder.end()
    if recorder.ended_at is not None:
        # During: made before the event's last write was answered (the server's clock;
        # the probe's end is up to a scrape interval late).
        for sample in samples:
            sample["during"] = sample["made_at"] < recorder.ended_at
    await probe.mark()
    await set_cluster_id(client, CLUSTER_ID)
    set_back = await probe.wait_done(timeout)
    at_server = written.get("event_seconds_at_the_server")
    return {
        "mass_event_seconds": round(at_server if at_server is not None else drained, 3),
        "queue_drained_seconds": round(drained, 3),
        "set_back_seconds": round(set_back, 3),
        **written,
        "changes_gap_seconds": gap,
        # Since the operator started (its cold start, and the rounds at quiet moments of
        # `runtime/gcpauses.py`), then until the changes ended: its loop stopped.
        "operator_gc_before": {k: round(v, 4) for k, v in gc_before.items()},
        "operator_gc_during": {k: round(gc_after[k] - gc_before[k], 4) for k in gc_before},
        "summary": summary(samples),
        "samples": samples,
    }
