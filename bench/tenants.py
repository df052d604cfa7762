"""Tenants: one team's mass change against another team's single changes.

Tenant A has N pools in one namespace (`tenant-a`); tenant B works in another
(`tenant-b`). In each round A changes all her pools at once: her N DGDs are deleted
(every relay withdraws: its Deployment, Service and exports deleted, its status
written), and once every pool is withdrawn they are created again (every relay
publishes again). Meanwhile B creates `changes` new pools (a DGD, then its relay), one
every `gap` seconds from A's first delete, open loop (as in fairness.py). Both are
changes at NORMAL priority, so which of them goes first is the work queue's order within
a priority: B's pool is timed from its relay's create response to the pool published
(Published, its Deployment, Service and exports) in the bench's watch. Beside each of
B's changes the bench makes a chain of as many plain writes in a row as B's pass makes
(`chain`): what the server, as busy as it is then, gives any client; B's floor.

Before the rounds, B makes as many changes with A idle (`b_alone`): what B's change
costs on this box at this moment, beside which the rounds' figures are read. The rounds
alternate the operator's `controller.fairQueuing` (on: namespaces in turn; off: first
come, first served, the order before it), in the order on, off, off, on, ... so that a
drift of the machine over the run weighs on both alike. Each round starts a fresh
operator and waits until it has reconciled every relay (the restart's own backlog is
LOW, and over).

A's time is from her first delete to her last pool published again; B's changes count
as during A's change if made before it ended. The queue's depth and flows are scraped
once a second (`workqueue_depth`, `workqueue_flows_by_priority`): how long A's backlog
was, and that B's namespace took its turn beside it.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import CONFIGMAPS

from . import procs
from .fairness import CONTROLLER, QueueProbe, summary
from .objects import (
    RELAYS,
    bounded,
    create_dgd,
    create_namespaces,
    delete_dgd,
    relay_body,
)
from .tracker import Tracker

TENANT_A = "tenant-a"
TENANT_B = "tenant-b"
#: A's deletes and creates in flight at once ("at once": as fast as the server takes them).
MASS_CONCURRENCY = 32
#: Seconds between B's changes while A is idle.
ALONE_GAP = 0.25
#: Writes in a row of B's pass (the relay's objects, its exports, its status): `chain`.
CHAIN = 3
_SCRAPED = ("workqueue_depth", "workqueue_flows_by_priority")


def tenant_a_pools(n: int) -> list[tuple[str, str]]:
    return [(TENANT_A, f"a{i:05d}") for i in range(n)]


async def _until(predicate: Callable[[], bool], timeout: float, every: float = 0.05) -> float:
    """perf_counter() when `predicate` first held (polled every `every` s)."""
    t0 = time.perf_counter()
    while not predicate():
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError(f"not done after {timeout:.0f}s")
        await asyncio.sleep(every)
    return time.perf_counter()


class QueueSampler:
    """The relay controller's queue depth and flows by priority, once a second."""

    def __init__(self, op: procs.OperatorProcess) -> None:
        self.op = op
        self.samples: list[dict[str, float]] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self, t0: float) -> None:
        while True:
            m = await asyncio.to_thread(self.op.metrics, _SCRAPED)
            row = {"t": round(time.perf_counter() - t0, 2)}
            for k, v in m.items():
                if CONTROLLER not in k:
                    continue
                if k.startswith("workqueue_depth{"):
                    row["depth"] = v
                elif k.startswith("workqueue_flows_by_priority{"):
                    priority = k.split('priority="', 1)[1].split('"', 1)[0]
                    row[f"flows_{priority}"] = v
            self.samples.append(row)
            await asyncio.sleep(1.0)

    def start(self, t0: float) -> None:
        self._task = asyncio.create_task(self._run(t0))

    async def stop(self) -> dict[str, Any]:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        return {
            "max_depth": max((s.get("depth", 0.0) for s in self.samples), default=0.0),
            "max_flows_normal": max((s.get("flows_0", 0.0) for s in self.samples), default=0.0),
            "samples": self.samples,
        }


async def chain(client: Client, name: str) -> list[float]:
    """`CHAIN` small ConfigMaps created one after another in B's namespace (a kind the
    operator does not watch): what as many writes in a row take at the server now, each
    in ms. B's pass makes a chain as long (the relay's objects, its exports, its status),
    so its sum is a floor under B's latency at that moment."""
    out: list[float] = []
    for i in range(CHAIN):
        body = {"metadata": {"name": f"{name}-chain-{i}", "namespace": TENANT_B}}
        sent = time.perf_counter()
        await client.create(CONFIGMAPS, body)
        out.append(round((time.perf_counter() - sent) * 1000, 2))
    return out


async def b_changes(
    client: Client, tracker: Tracker, names: list[str], gap: float, timeout: float
) -> list[dict[str, Any]]:
    """B's new pools, one every `gap` s, open loop; each one's publish latency, and the
    chain of plain writes (`chain`) started beside it."""
    samples: list[dict[str, Any]] = []

    async def one(name: str) -> None:
        made_at = time.perf_counter()
        await create_dgd(client, TENANT_B, name)
        sent_at, sent = time.time(), time.perf_counter()
        await client.create(RELAYS, relay_body(TENANT_B, name))
        t0 = time.perf_counter()
        written = round((t0 - sent) * 1000, 2)  # what one write takes at the server now
        floor = asyncio.create_task(chain(client, name))
        key = (TENANT_B, name)
        t1 = await asyncio.wait_for(
            tracker.wait(functools.partial(tracker.pool_converged, key)), timeout
        )
        ms = round(max(t1 - t0, 0.0) * 1000, 2)
        chain_writes = await floor
        samples.append(
            {
                "pool": name,
                "ms": ms,
                "made_at": made_at,
                "relay_sent_at": sent_at,
                "user_writes_ms": [written],
                "chain_ms": round(sum(chain_writes), 2),
                "chain_writes_ms": chain_writes,
            }
        )

    tasks = []
    for name in names:
        tasks.append(asyncio.create_task(one(name)))
        await asyncio.sleep(gap)
    await asyncio.gather(*tasks)
    return samples


async def a_change(
    client: Client, tracker: Tracker, pools: list[tuple[str, str]], timeout: float
) -> dict[str, float]:
    """Delete all of A's DGDs at once, wait until every pool is withdrawn, create them all
    again, wait until every pool is published; the times, from the first delete."""
    t0 = time.perf_counter()
    await bounded(
        [functools.partial(delete_dgd, client, ns, name) for ns, name in pools], MASS_CONCURRENCY
    )
    deleted = time.perf_counter()
    withdrawn = await _until(lambda: all(tracker.pool_withdrawn(k) for k in pools), timeout)
    await bounded(
        [functools.partial(create_dgd, client, ns, name) for ns, name in pools],
        MASS_CONCURRENCY,
    )
    created = time.perf_counter()
    published = await _until(lambda: all(tracker.pool_converged(k) for k in pools), timeout)
    return {
        "started": t0,
        "ended": published,
        "seconds": round(published - t0, 3),
        "deletes_sent_seconds": round(deleted - t0, 3),
        "withdrawn_seconds": round(withdrawn - t0, 3),
        "creates_sent_seconds": round(created - withdrawn, 3),
        "published_again_seconds": round(published - withdrawn, 3),
    }


async def one_round(
    client: Client,
    tracker: Tracker,
    op: procs.OperatorProcess,
    pools: list[tuple[str, str]],
    names: list[str],
    gap: float,
    timeout: float,
) -> dict[str, Any]:
    """A's change with B's changes meanwhile; also what the operator did for it (its
    passes and CPU seconds, the same work in either order) and the box's load."""
    load = [round(x, 2) for x in os.getloadavg()]
    passes0, cpu0 = await _passes(op), op.status()["cpu_ticks"]
    sampler = QueueSampler(op)
    t0 = time.perf_counter()
    sampler.start(t0)
    b = asyncio.create_task(b_changes(client, tracker, names, gap, timeout))
    try:
        a = await a_change(client, tracker, pools, timeout)
        samples = await b
    finally:
        b.cancel()
        queue = await sampler.stop()
    started, ended = a.pop("started"), a.pop("ended")
    for s in samples:
        s["during"] = s["made_at"] < ended
        s["made_after_seconds"] = round(s.pop("made_at") - started, 3)
    operator = {
        "passes": await _passes(op) - passes0,
        "cpu_seconds": round((op.status()["cpu_ticks"] - cpu0) / os.sysconf("SC_CLK_TCK"), 2),
    }
    return {
        "load_average_at_start": load,
        "a": a,
        "operator": operator,
        "b": summary(samples),
        "b_samples": samples,
        "queue": queue,
    }


async def _passes(op: procs.OperatorProcess) -> float:
    """The relay controller's reconciles so far."""
    m = await asyncio.to_thread(op.metrics, ("controller_runtime_reconcile_total",))
    return sum(v for k, v in m.items() if CONTROLLER in k)


async def phases(
    client: Client,
    cp: ControlPlane,
    tracker: Tracker,
    op: procs.OperatorProcess,
    pools: list[tuple[str, str]],
    *,
    workers: int,
    log: Path,
    converge: Callable[[procs.OperatorProcess], Awaitable[dict[str, Any]]],
    changes: int,
    gap: float | None,
    rounds: int,
    timeout: float,
) -> dict[str, Any]:
    """The cold start of A's pools; B's changes with A idle (how fast B is served by
    itself on this box, now); then `rounds` rounds with fair queuing on and as many off
    (on, off, off, on, ...), each on a freshly started operator."""
    await create_namespaces(client, [TENANT_B])
    out: dict[str, Any] = {"cold_start": await converge(op)}
    alone = await b_changes(
        client, tracker, [f"alone-{i:02d}" for i in range(changes)], ALONE_GAP, timeout
    )
    for sample in alone:
        sample["during"] = True
        del sample["made_at"]
    out["b_alone"] = {"gap_seconds": ALONE_GAP, "summary": summary(alone), "samples": alone}
    print(f"[tenants] B alone: {out['b_alone']['summary']['all']}", flush=True)
    if gap is None:  # B's changes spread over about A's change: twice her cold start
        gap = round(2 * out["cold_start"]["seconds"] / changes, 3)
    out["b_changes_gap_seconds"] = gap
    out["rounds"] = []
    order = [True, False, False, True] * rounds
    for k, fair in enumerate(order[: 2 * rounds]):
        # A fresh operator each round, so none is the one that did the cold start.
        op.stop()
        op = procs.OperatorProcess(cp, workers, log, controller={"fairQueuing": fair})
        op.start()
        relays = len(pools) + (k + 1) * changes  # A's and B's so far: each reconciled once
        await QueueProbe(op, relays, every=0.2).wait_done(timeout)
        names = [f"b{k}-{i:02d}" for i in range(changes)]
        result = await one_round(client, tracker, op, pools, names, gap, timeout)
        result["fair_queuing"] = fair
        out["rounds"].append(result)
        b = result["b"]["during"]
        floor = result["b"].get("chain_during", {})
        load = result["load_average_at_start"][0]
        print(
            f"[tenants] fair queuing {'on' if fair else 'off'} (load {load}): "
            f"A {result['a']['seconds']}s, {result['operator']['passes']:.0f} passes; "
            f"B during A (n={b.get('n')}): p50 {b.get('p50_ms')} ms, p99 {b.get('p99_ms')} ms; "
            f"chain of {CHAIN} writes p50 {floor.get('p50_ms')} ms, p99 {floor.get('p99_ms')} ms; "
            f"queue depth up to {result['queue']['max_depth']:.0f}",
            flush=True,
        )
    op.stop()
    out["summary"] = _compare(out["rounds"])
    return out


def _compare(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per setting: A's times, B's latencies during A's change over all its rounds."""
    out: dict[str, Any] = {}
    for fair, label in ((True, "on"), (False, "off")):
        mine = [r for r in rounds if r["fair_queuing"] is fair]
        samples = [s for r in mine for s in r["b_samples"]]
        out[label] = {
            "a_seconds": [r["a"]["seconds"] for r in mine],
            "b": summary(samples),
        }
    on, off = out["on"]["a_seconds"], out["off"]["a_seconds"]
    if on and off:
        out["a_seconds_on_to_off"] = round(sum(on) / sum(off), 3)
    return out
