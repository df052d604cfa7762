"""`bench/run`: one run of the operator benchmark (see docs/performance.md).

Phases, all against one local control plane: create N pools; start the operator
(a separate process) and time convergence; stop it and, at once, measure the write
floor (a bare client, same writes, a few concurrency levels) on the same server;
remove the floor's objects; restart the operator on the converged fleet and count
its writes over the steady-state window (restart included); reaction latency over
spread changes; RSS; then, in process, CPU per no-op reconcile and cache size.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import signal
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dynamo_pool_operator.localcluster.assets import resolve
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.crds import default_crds
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from tests.harness import OPERATOR_AGENT

from . import cores, cpfloor, fairness, floor, inproc, objects, procs, soak, tenants
from .latency import reaction_latency
from .restart import restart
from .tracker import Tracker

ROOT = Path(__file__).resolve().parent.parent
#: The test control plane's Service range is a /24 (254 ClusterIPs); each pool has a
#: Service, and the floor creates N more per level: a /12 as in kubeadm's default.
#: (A repeated flag: the last one wins.) Nothing else is changed: default inflight limits.
APISERVER_ARGS = ["--service-cluster-ip-range=10.96.0.0/12"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/run", description=__doc__)
    p.add_argument("--pools", type=int, default=1000, help="N pools (default 1000)")
    p.add_argument("--quick", action="store_true", help="N=100, 50 changes, 15 s steady")
    p.add_argument("--out", type=Path, help="results JSON (default bench/results/<ts>.json)")
    p.add_argument(
        "--name",
        help="file the result as bench/results/<start>-NAME-n<N>.json, <start> the run's "
        "minute in UTC (instead of --out)",
    )
    p.add_argument("--changes", type=int, help="reaction-latency changes (default 200)")
    p.add_argument("--steady", type=float, help="steady-state window seconds (default 60)")
    p.add_argument("--workers", type=int, default=4, help="operator workers (default 4)")
    p.add_argument(
        "--floor-concurrency",
        default="8,32,64",
        help="write-floor levels (default 8,32,64); with --fairness, a level ending in w "
        "(4w) runs again with every relay watched",
    )
    p.add_argument("--profile", type=Path, help="py-spy raw profile of the cold start")
    p.add_argument(
        "--profile-event",
        type=Path,
        help="with --fairness: py-spy raw profile of the operator during the ClusterProperty "
        "change",
    )
    p.add_argument(
        "--profile-noop", type=Path, help="cProfile stats of no-op reconciles that decide afresh"
    )
    p.add_argument(
        "--fresh-rounds",
        type=int,
        default=3,
        help="with --compare-python: rounds of the fresh pass measured in turns, each tree "
        "in a child process (default 3; 0: none)",
    )
    p.add_argument("--timeout", type=float, default=600, help="convergence timeout (s)")
    p.add_argument(
        "--convergence-only",
        action="store_true",
        help="cold start, RSS and the steady window only (the RSS-vs-N points at large N)",
    )
    p.add_argument(
        "--and-restart",
        action="store_true",
        help="with --convergence-only: then restart the operator on the converged fleet "
        "(its memory without the cold start's transient)",
    )
    p.add_argument(
        "--floor-events-only",
        action="store_true",
        help="only the floor with Events (9N), at the first --floor-concurrency level",
    )
    p.add_argument(
        "--background-writes",
        type=int,
        help="controller.backgroundWrites of this checkout's operator (default: its own)",
    )
    p.add_argument(
        "--stop-after-floor",
        action="store_true",
        help="end after the floor, its objects left (the N = 10,000 point: removing them "
        "takes longer than the cold start)",
    )
    p.add_argument(
        "--unrelated-deployments",
        type=int,
        default=0,
        help="create N Deployments of no pool (other workloads) before the operator starts",
    )
    p.add_argument(
        "--then-unrelated-deployments",
        type=int,
        default=0,
        help="with --convergence-only --and-restart: then create N Deployments of no pool and "
        "restart once more (the RSS beside them, same fleet, same run)",
    )
    p.add_argument(
        "--compare-python",
        help="also restart the fleet with this interpreter (another checkout's operator)",
    )
    p.add_argument(
        "--fairness",
        action="store_true",
        help="user changes during a cold start and during a ClusterProperty change only",
    )
    p.add_argument(
        "--separate-cores",
        action="store_true",
        help="with --fairness: the control plane on the first half of the cores, the "
        "operator and the bench on the rest, for the ClusterProperty change and its floor "
        "(bench/cores.py)",
    )
    p.add_argument(
        "--fairness-changes", type=int, default=100, help="changes per mass event (default 100)"
    )
    p.add_argument(
        "--fairness-gap", type=float, default=0.25, help="seconds between changes (default 0.25)"
    )
    p.add_argument(
        "--tenants",
        action="store_true",
        help="tenant A's N pools in one namespace deleted and re-created at once while "
        "tenant B creates pools, with fair queuing on and off (bench/tenants.py)",
    )
    p.add_argument(
        "--tenant-changes", type=int, default=20, help="B's new pools a round (default 20)"
    )
    p.add_argument(
        "--tenant-gap",
        type=float,
        help="seconds between B's changes (default: twice the cold start over the changes)",
    )
    p.add_argument(
        "--tenant-rounds",
        type=int,
        default=2,
        help="rounds with fair queuing on, and as many off (default 2: on, off, off, on)",
    )
    p.add_argument(
        "--trace-queue",
        type=Path,
        help="trace the operators' work queue to FILE.<pid> (bench/queuetrace; read it with "
        "python -m bench.queue_waits RESULT FILE)",
    )
    p.add_argument(
        "--soak",
        action="store_true",
        help="after the cold start, rounds of relay status churn and the operator's held "
        "RSS after each (N defaults to 300)",
    )
    p.add_argument("--soak-rounds", type=int, default=20, help="churn rounds (default 20)")
    p.add_argument(
        "--soak-conditions",
        type=int,
        default=10,
        help="conditions each round writes per relay (default 10)",
    )
    p.add_argument(
        "--soak-settle", type=float, default=3.0, help="seconds after a round's writes (default 3)"
    )
    p.add_argument(
        "--operator-python",
        help="with --soak: run the operator with this interpreter (another environment's, "
        "e.g. another Python version or checkout)",
    )
    a = p.parse_args(argv)
    if a.separate_cores and not a.fairness:
        p.error("--separate-cores binds the ClusterProperty change and its floor: --fairness only")
    if a.separate_cores:
        try:
            cores.split(cores.allowed(0))
        except ValueError as e:
            p.error(f"--separate-cores: {e}")
    if a.soak and a.pools == 1000:
        a.pools = 300
    if a.quick:
        a.pools = 100 if a.pools == 1000 else a.pools
        a.changes = a.changes or 50
        a.steady = a.steady if a.steady is not None else 15.0
    a.changes = a.changes or 200
    a.steady = a.steady if a.steady is not None else 60.0
    # The run's start names its file and its `started` field alike (README of results).
    a.started = datetime.now(UTC)
    results = ROOT / "bench" / "results"
    if a.name is not None:
        if a.out is not None:
            p.error("--name files the result itself: give --name or --out, not both")
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", a.name):
            p.error(f"--name {a.name!r}: lower-case letters, digits and dashes only")
        a.out = results / f"{a.started:%Y%m%dT%H%MZ}-{a.name}-n{a.pools}.json"
    stamp = a.started.strftime("%Y%m%dT%H%M%SZ")
    kind = "soak-" if a.soak else "tenants-" if a.tenants else ""
    a.out = a.out or results / f"{stamp}-{kind}n{a.pools}.json"
    return a


def machine() -> dict[str, Any]:
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
    versions = dict(
        line.split("=", 1)
        for line in (ROOT / "tools/controlplane/versions.env").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(int(mem) / 2**20, 1),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "kubernetes": versions.get("KUBERNETES_VERSION"),
        "etcd": versions.get("ETCD_VERSION"),
    }


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


async def converge(
    cp: ControlPlane, tracker: Tracker, op: procs.OperatorProcess, args: argparse.Namespace
) -> dict[str, Any]:
    n = len(tracker.pools)
    reqs0 = procs.request_counts(cp)
    audit0 = cp.audit.offset()
    t0, wall0 = time.perf_counter(), time.time()
    op.start()
    if args.profile:
        log(f"profiling: {op.start_profile(args.profile.resolve())}")
    timeline: list[tuple[float, int, int]] = []
    peak_rss = 0
    while True:
        await asyncio.sleep(0.25)
        t = time.perf_counter() - t0
        done = tracker.converged_pools()
        timeline.append((round(t, 3), done, tracker.converged_objects()))
        if op.alive():
            peak_rss = max(peak_rss, op.status()["VmRSS"])
        if done == n:
            break
        if not op.alive() or t > args.timeout:
            raise RuntimeError(f"not converged: {done}/{n} pools after {t:.0f}s")
    seconds = time.perf_counter() - t0
    op.stop_profile()
    cpu = op.status()["cpu_ticks"] / os.sysconf("SC_CLK_TCK")
    reqs = procs.diff(procs.request_counts(cp), reqs0)
    writes = await operator_writes(cp, audit0)
    by_kind = Counter(
        f"{w.verb} {w.resource}{'/' + w.subresource if w.subresource else ''}" for w in writes
    )
    no_events = [w for w in writes if w.resource != "events"]
    stamps = sorted(
        datetime.fromisoformat(w.raw["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()
        for w in no_events
    )
    reads = sum(v for k, v in reqs.items() if k.split()[0] in ("GET", "LIST", "WATCH-open"))
    log(f"converged {n} pools in {seconds:.1f}s, {len(writes)} writes")
    return {
        "seconds": round(seconds, 3),
        "operator_cpu_seconds": round(cpu, 2),
        "first_write_after_start_seconds": round(stamps[0] - wall0, 3) if stamps else None,
        "last_write_after_start_seconds": round(stamps[-1] - wall0, 3) if stamps else None,
        "peak_rss_bytes": peak_rss,
        "timeline": timeline,
        "writes": len(writes),
        "writes_excluding_events": len(no_events),
        "writes_by_kind": dict(sorted(by_kind.items())),
        "writes_per_pool": round(len(writes) / n, 3),
        "writes_per_pool_excluding_events": round(len(no_events) / n, 3),
        "apiserver_requests_delta": reqs,
        "reads_per_pool_approx": round(reads / n, 3),
        "design_minimum_writes_per_pool": 6,
        "design_minimum_reads_per_pool": 0,
    }


#: Questions asked by a POST (an operator asks its own RBAC at start): no state written.
REVIEWS = frozenset(
    {"selfsubjectaccessreviews", "selfsubjectreviews", "subjectaccessreviews", "tokenreviews"}
)


async def operator_writes(cp: ControlPlane, since: int) -> list[Any]:
    """The operator's writes since `since`, its reviews of its own RBAC left out."""
    writes = await asyncio.to_thread(cp.audit.writes, since, user_agent_prefix=OPERATOR_AGENT)
    return [w for w in writes if w.resource not in REVIEWS]


async def steady(cp: ControlPlane, seconds: float, *, restarted: bool = False) -> dict[str, Any]:
    start = await asyncio.to_thread(cp.audit.sync)
    await asyncio.sleep(seconds)
    writes = await operator_writes(cp, start)
    log(f"steady state: {len(writes)} operator writes in {seconds:.0f}s")
    return {
        "seconds": seconds,
        "includes_operator_restart": restarted,
        "operator_writes": len(writes),
        "writes": [(w.verb, w.resource, w.namespace, w.name) for w in writes[:50]],
    }


async def measure_floor(
    client: Client, pools: list[tuple[str, str]], args: argparse.Namespace
) -> dict[str, Any]:
    """The write floor at each concurrency level, then with Events at the best one; the
    floor's objects are removed again, so the operator restarted afterwards meets only
    the fleet (and caches only its objects)."""
    n = len(pools)
    tpl = await floor.templates(client, *pools[0])
    levels = []
    parsed = cpfloor.parse_levels(args.floor_concurrency)
    if any(watched for _, watched in parsed):
        raise SystemExit("--floor-concurrency: a watched level (w) is for --fairness only")
    concurrency = [c for c, _ in parsed]
    if args.floor_events_only:
        concurrency = concurrency[:1]
    for c in concurrency:
        if args.floor_events_only:
            levels.append({"concurrency": c, "seconds": None, "skipped": True})
            continue
        levels.append(await floor.floor_at(client, tpl, n, c))
        log(f"floor: {levels[-1]}")
    best = min(levels, key=lambda x: float(x["seconds"] or 0))
    with_events = await floor.floor_at(client, tpl, n, int(best["concurrency"] or 0), events=True)
    log(f"floor with events: {with_events}")
    if not args.stop_after_floor:
        t = time.perf_counter()
        await floor.remove_all(client)
        log(f"floor objects removed in {time.perf_counter() - t:.1f}s")
    return {
        "levels": levels,
        "best_seconds": best["seconds"],
        "best_concurrency": best["concurrency"],
        "with_events_at_best": with_events,
        "seconds_after_convergence": "immediately (operator stopped, same server)",
    }


async def _event_and_floor(
    client: Client,
    cp: ControlPlane,
    op: procs.OperatorProcess,
    changes: fairness.Changes,
    probe: fairness.QueueProbe,
    recorder: cpfloor.Recorder,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The ClusterProperty change, then its floor with the operator stopped."""
    out: dict[str, Any] = {}
    if args.profile_event:
        log(f"profiling the event: {op.start_profile(args.profile_event.resolve())}")
    event = out["during_cluster_property_change"] = await fairness.cluster_property_change(
        client,
        changes,
        probe,
        recorder,
        args.fairness_changes,
        args.fairness_gap,
        args.timeout,
        ended=op.stop_profile,
    )
    log(
        f"changes during the ClusterProperty change: {event['summary']} "
        f"(mass event {event['mass_event_seconds']}s, operator writes {event['operator_writes']}, "
        f"CPU seconds {event['cpu_seconds']})"
    )
    out["rss_after"] = op.status()
    # Its floor with the operator stopped (it would undo the floor's writes), on the
    # settled fleet, which the floor leaves as it found it.
    op.stop()
    event["floor"] = await cpfloor.measure(recorder, cpfloor.parse_levels(args.floor_concurrency))
    for level in event["floor"]["levels"]:
        log(f"ClusterProperty change floor: {level}")
    return out


async def fairness_phases(
    client: Client,
    cp: ControlPlane,
    tracker: Tracker,
    op: procs.OperatorProcess,
    pools: list[tuple[str, str]],
    args: argparse.Namespace,
    out: dict[str, Any],
) -> None:
    """User changes during the cold start, then during a ClusterProperty change; each
    phase's figures go into `out` as it ends (a run stopped after the cold start keeps
    its changes)."""
    n = len(pools)
    changes = fairness.Changes(client, tracker, pools, seed=11, timeout=args.timeout)
    during_cold = asyncio.create_task(
        fairness.cold_start_changes(changes, n, args.fairness_changes, args.fairness_gap)
    )
    out["cold_start"] = await converge(cp, tracker, op, args)
    samples = await during_cold
    out["during_cold_start"] = {
        "changes_gap_seconds": args.fairness_gap,
        "summary": fairness.summary(samples),
        "samples": samples,
    }
    log(f"changes during the cold start: {out['during_cold_start']['summary']}")
    probe = fairness.QueueProbe(op, 0)
    await probe.wait_done(args.timeout)  # the cold start's tail: the queue empties
    probe.n = n
    changes = fairness.Changes(client, tracker, pools, seed=13, timeout=args.timeout)
    recorder = cpfloor.Recorder(cp, client, pools, op.popen.pid if op.popen else None)
    separated = None
    if args.separate_cores:
        clients = [os.getpid(), *([op.popen.pid] if op.popen else [])]
        separated = cores.Separated(cp.named_pids.values(), clients)
    with separated or contextlib.nullcontext():
        out.update(await _event_and_floor(client, cp, op, changes, probe, recorder, args))
    event = out["during_cluster_property_change"]
    if separated is not None:
        event["cores"] = separated.describe()
    floor = event["floor"]
    event["ratio"] = round(event["mass_event_seconds"] / floor["best_seconds"], 2)
    within = floor["best_within_budget_seconds"]
    seconds = event["mass_event_seconds"]
    event["ratio_within_budget"] = round(seconds / within, 2) if within else None
    watched = floor["watched_best_within_budget_seconds"]
    event["ratio_within_budget_watched"] = round(seconds / watched, 2) if watched else None
    log(
        f"ClusterProperty change: mass event {event['mass_event_seconds']}s, floor "
        f"{floor['best_seconds']}s at {floor['best_concurrency']}: ratio {event['ratio']}; "
        f"within a write p99 of {floor['user_change_budget_ms']:.0f} ms: {within}s at "
        f"{floor['best_within_budget_concurrency']}, ratio {event['ratio_within_budget']}; "
        f"relays watched: {watched}s at {floor['watched_best_within_budget_concurrency']}, "
        f"ratio {event['ratio_within_budget_watched']}"
    )
    # Restarted on the converged fleet: the window includes its start and a reconcile of
    # every relay, and shows the floor left nothing to repair.
    window = asyncio.create_task(steady(cp, args.steady, restarted=True))
    await asyncio.sleep(0.5)  # the window's audit mark comes first
    out["restart"], op = await restart(
        cp, n, args.workers, args.out.with_suffix(".operator.log"), timeout=args.timeout
    )
    log(f"restart: {out['restart']}")
    out["steady_state"] = await window
    if args.compare_python:
        op.stop()
        out["restart_compared"], op = await restart(
            cp,
            n,
            args.workers,
            args.out.with_suffix(".operator.log"),
            timeout=args.timeout,
            python=args.compare_python,
        )
        log(f"restart ({args.compare_python}): {out['restart_compared']}")
    op.stop()


async def soak_phases(
    client: Client,
    cp: ControlPlane,
    tracker: Tracker,
    op: procs.OperatorProcess,
    pools: list[tuple[str, str]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The cold start, then the status churn on the converged fleet (bench/soak.py)."""
    out: dict[str, Any] = {"cold_start": await converge(cp, tracker, op, args)}
    out["rss_after_convergence"] = op.status()
    out["soak"] = await soak.churn(
        client,
        cp,
        op,
        pools,
        rounds=args.soak_rounds,
        conditions=args.soak_conditions,
        settle=args.soak_settle,
        log=log,
    )
    s = out["soak"]
    log(
        f"soak: held RSS {s['held_rss_at_warmup_end'] / 2**20:.1f} -> "
        f"{s['held_rss_at_end'] / 2**20:.1f} MiB over {s['measured_rounds']} rounds, trend "
        f"{s['trend_bytes_per_round'] / 2**10:.0f} KiB a round against "
        f"{s['churned_string_bytes'] / s['measured_rounds'] / 2**10:.0f} KiB of strings "
        f"written a round: {'flat' if s['flat'] else 'GROWING'}"
    )
    op.stop()
    return out


async def run(args: argparse.Namespace, result: dict[str, Any]) -> dict[str, Any]:
    """The phases; each one's figures go into `result` as it ends, so a run that is
    stopped or fails still leaves what it measured (see `main`)."""
    # SIGTERM (a run stopped for time, say at large N) cancels the run as Ctrl-C does,
    # so the operator and the control plane are stopped and the finished phases are
    # written (a loop handler: a bench started in the background ignores SIGINT).
    main_task = asyncio.current_task()
    assert main_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    n = args.pools
    if args.trace_queue is not None:  # read by the operators this run starts (their env)
        paths = [str(ROOT / "bench" / "queuetrace"), os.environ.get("PYTHONPATH", "")]
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
        os.environ["DPO_QUEUE_TRACE"] = str(args.trace_queue.resolve())
        result["trace_queue"] = str(args.trace_queue)
    if args.background_writes is not None:
        procs.THIS_CHECKOUT_CONTROLLER["backgroundWrites"] = args.background_writes
    result |= {
        "command": "bench/run " + " ".join(sys.argv[1:]),
        "started": args.started.isoformat(timespec="seconds"),
        "pools": n,
        "quick": args.quick,
        "convergence_only": args.convergence_only,
        "fairness": args.fairness,
        "tenants": args.tenants,
        "soak": args.soak,
        "operator_python": args.operator_python or "this checkout",
        "operator_workers": args.workers,
        "machine": machine(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    assets = resolve()
    cp = ControlPlane(
        assets=assets,
        garbage_collector=False,
        crds=default_crds(assets.mcs_crd_dir),
        extra_apiserver_args=APISERVER_ARGS,
    )
    await asyncio.to_thread(cp.start)
    op = procs.OperatorProcess(
        cp,
        args.workers,
        args.out.with_suffix(".operator.log"),
        args.operator_python if args.soak else None,
    )
    try:
        async with Client(load_kubeconfig(cp.kubeconfig), user_agent="dpo-bench/1") as client:
            await objects.set_cluster_id(client)
            pools = (
                tenants.tenant_a_pools(n) if args.tenants else objects.pool_names(n, "bench-pool")
            )
            t = time.perf_counter()
            await objects.create_pools(client, pools)
            result["setup_seconds"] = round(time.perf_counter() - t, 1)
            log(f"created {n} pools in {result['setup_seconds']}s")
            if args.unrelated_deployments:
                t = time.perf_counter()
                await objects.create_unrelated_deployments(client, args.unrelated_deployments)
                result["unrelated_deployments"] = args.unrelated_deployments
                result["unrelated_setup_seconds"] = round(time.perf_counter() - t, 1)
                log(
                    f"created {args.unrelated_deployments} unrelated Deployments in "
                    f"{result['unrelated_setup_seconds']}s"
                )
            tracker = Tracker(client, set(pools))
            await tracker.start()
            try:
                if args.fairness:
                    await fairness_phases(client, cp, tracker, op, pools, args, result)
                    return result
                if args.soak:
                    result.update(await soak_phases(client, cp, tracker, op, pools, args))
                    return result
                if args.tenants:
                    result.update(
                        await tenants.phases(
                            client,
                            cp,
                            tracker,
                            op,
                            pools,
                            workers=args.workers,
                            log=args.out.with_suffix(".operator.log"),
                            converge=lambda running: converge(cp, tracker, running, args),
                            changes=args.tenant_changes,
                            gap=args.tenant_gap,
                            rounds=args.tenant_rounds,
                            timeout=args.timeout,
                        )
                    )
                    return result
                result["cold_start"] = await converge(cp, tracker, op, args)
                result["rss_after_convergence"] = op.status()
                if args.convergence_only:
                    result["steady_state"] = await steady(cp, args.steady)
                    if args.and_restart:
                        op.stop()
                        result["restart"], op = await restart(
                            cp,
                            n,
                            args.workers,
                            args.out.with_suffix(".operator.log"),
                            timeout=args.timeout,
                        )
                        log(f"restart: {result['restart']}")
                        if args.compare_python:
                            # The other checkout's operator on the same cluster, at once.
                            op.stop()
                            result["restart_compared"], op = await restart(
                                cp,
                                n,
                                args.workers,
                                args.out.with_suffix(".compared.operator.log"),
                                timeout=args.timeout,
                                python=args.compare_python,
                            )
                            log(f"restart ({args.compare_python}): {result['restart_compared']}")
                        if args.then_unrelated_deployments:
                            # The same fleet once other workloads are there: what the
                            # operator caches of them (nothing, by its selectors).
                            op.stop()
                            t = time.perf_counter()
                            await objects.create_unrelated_deployments(
                                client, args.then_unrelated_deployments
                            )
                            result["then_unrelated_deployments"] = args.then_unrelated_deployments
                            result["then_unrelated_setup_seconds"] = round(
                                time.perf_counter() - t, 1
                            )
                            result["restart_with_unrelated"], op = await restart(
                                cp,
                                n,
                                args.workers,
                                args.out.with_suffix(".operator.log"),
                                timeout=args.timeout,
                            )
                            log(f"restart with unrelated: {result['restart_with_unrelated']}")
                    return result
                # The floor right after the cold start, on the same server in the same
                # state, so the ratio compares like with like (the operator is stopped:
                # it would reconcile the floor's bare relays).
                op.stop()
                result["floor"] = await measure_floor(client, pools, args)
                cold = result["cold_start"]["seconds"]
                best = result["floor"]["best_seconds"]
                with_events = result["floor"]["with_events_at_best"]["seconds"]
                if not args.floor_events_only:
                    result["ratio_operator_to_floor"] = round(cold / best, 2)
                result["ratio_operator_to_floor_with_events"] = round(cold / with_events, 2)
                if args.stop_after_floor:
                    return result
                # Restarted on the converged fleet: the steady window includes its
                # start, the caches' relist and a reconcile of every relay.
                window = asyncio.create_task(steady(cp, args.steady, restarted=True))
                await asyncio.sleep(0.5)  # the window's audit mark comes first
                result["restart"], op = await restart(
                    cp, n, args.workers, args.out.with_suffix(".operator.log"), timeout=args.timeout
                )
                log(f"restart: {result['restart']}")
                result["steady_state"] = await window
                result["reaction"] = await reaction_latency(client, tracker, pools, args.changes)
                log(f"reaction: {result['reaction']['summary']}")
                result["rss_after_reaction"] = op.status()
                if args.compare_python:
                    op.stop()
                    result["restart_compared"], op = await restart(
                        cp,
                        n,
                        args.workers,
                        args.out.with_suffix(".operator.log"),
                        timeout=args.timeout,
                        python=args.compare_python,
                    )
                    log(f"restart ({args.compare_python}): {result['restart_compared']}")
            finally:
                await tracker.stop()
            op.stop()
            result["in_process"] = await inproc.measure(cp, args.workers, args.profile_noop)
            if args.compare_python:
                result["in_process_compared"] = await inproc.measure(
                    cp, args.workers, python=args.compare_python
                )
                if args.fresh_rounds:
                    turns = result["fresh_pass_turns"] = await inproc.alternate(
                        cp, args.workers, args.compare_python, args.fresh_rounds
                    )
                    log(
                        f"fresh pass in turns: {turns['this']['fresh_us']} us against "
                        f"{turns['compared']['fresh_us']} us; median ratio "
                        f"{turns['ratio_fresh_median']} (decode: "
                        f"{turns.get('ratio_decode_median')})"
                    )
        for key in ("in_process", "in_process_compared"):
            if key in result:
                cpu = result[key]["cpu_seconds_per_noop_reconcile"]
                fresh = result[key]["cpu_seconds_per_fresh_noop_reconcile"]
                log(f"{key}: cpu per no-op reconcile {cpu * 1e6:.0f} us ({fresh * 1e6:.0f} fresh)")
    finally:
        op.stop()
        await asyncio.to_thread(cp.stop)
    return result


def write(args: argparse.Namespace, result: dict[str, Any]) -> None:
    result["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    # The machine may be shared: the load says how noisy the timings are.
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for oplog in (
        args.out.with_suffix(".operator.log"),
        args.out.with_suffix(".compared.operator.log"),
    ):
        if oplog.exists() and oplog.stat().st_size == 0:
            oplog.unlink()  # warnings and errors only: kept when there are some
    log(f"wrote {args.out}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {}
    try:
        asyncio.run(run(args, result))
    except BaseException as e:  # stopped (SIGTERM, Ctrl-C) or failed: keep what was measured
        if result:
            result["incomplete"] = f"{type(e).__name__}: {e}".rstrip(": ")
            write(args, result)
        raise
    write(args, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
