"""In-process measurements on a settled cluster: CPU per no-op reconcile, and the
caches' size (deep `sys.getsizeof`) and RSS growth per cached object."""

from __future__ import annotations

import asyncio
import cProfile
import json
import pstats
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dynamo_pool_operator.config import parse_configuration
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from tests.harness import OPERATOR_AGENT, OperatorUnderTest

from .procs import operator_config

ROOT = Path(__file__).resolve().parent.parent


def deep_size(root: object) -> int:
    """Bytes of `root` and everything it references through dicts, lists, tuples, sets
    and object attributes (each object counted once; interned/shared ones too)."""
    seen: set[int] = set()
    stack: list[object] = [root]
    total = 0
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple | set | frozenset):
            stack.extend(o)
        elif hasattr(o, "__dict__") and not isinstance(o, type):
            stack.append(vars(o))
        elif hasattr(o, "__slots__"):
            stack.extend(getattr(o, s) for s in o.__slots__ if hasattr(o, s))
    return total


async def measure(
    cp: ControlPlane, workers: int, profile: Path | None = None, python: str | None = None
) -> dict[str, Any]:
    """Start the operator in process on the converged cluster, then reconcile every
    relay once more by hand, timing CPU with `time.process_time()`. With `python`,
    the same in a child process of that interpreter (another checkout's operator: its
    venv imports its own `dynamo_pool_operator`, and it runs its own `bench.inproc`)."""
    if python is not None:
        return await _measure_in(python, cp, workers)
    since = cp.audit.offset()
    out = await _measure(cp.kubeconfig, workers, profile)
    if profile is not None:
        _count_calls(out, await asyncio.to_thread(profile.read_text))
    writes = await asyncio.to_thread(cp.audit.writes, since, user_agent_prefix=OPERATOR_AGENT)
    out["writes_by_restart_and_noop_reconciles"] = len(writes)
    return out


def _checkout_of(python: str) -> Path:
    """The checkout whose `bench.inproc` the child runs: `<checkout>/.venv/bin/python`'s
    own, since its harness imports its own modules (a rename would break this one's);
    this checkout for any other interpreter."""
    checkout = Path(python).parents[2]
    return checkout if (checkout / "bench" / "inproc.py").is_file() else ROOT


#: The child of `_measure_in`: the checkout's own `_measure`, its fresh passes profiled
#: once more (as 754257a's, every checkout's `_measure` takes a profile path).
_CHILD = (
    "import asyncio, json, sys; from pathlib import Path; from bench.inproc import _measure; "
    "r = asyncio.run(_measure(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[4]))); "
    "Path(sys.argv[3]).write_text(json.dumps(r))"
)
_CALLS = "function_calls_per_fresh_pass"


def function_calls(stats: str) -> int | None:
    """The function calls a cProfile text report counts (its first line): the same for
    the same work in any turn, where CPU seconds on this box vary by a third."""
    found = re.search(r"(\d+) function calls", stats)
    return int(found[1]) if found else None


def _count_calls(out: dict[str, Any], stats: str) -> None:
    """Add the function calls per fresh pass that the passes' profile counted."""
    calls = function_calls(stats)
    if calls is not None:
        out[_CALLS] = calls / max(out["relays_reconciled"], 1)


async def _measure_in(python: str, cp: ControlPlane, workers: int) -> dict[str, Any]:
    since = cp.audit.offset()
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "inproc.json"
        profile = Path(tmp) / "fresh.prof.txt"
        proc = await asyncio.create_subprocess_exec(
            python,
            "-c",
            _CHILD,
            str(cp.kubeconfig),
            str(workers),
            str(result),
            str(profile),
            cwd=_checkout_of(python),
        )
        if await proc.wait() != 0:
            raise RuntimeError(f"in-process measurement with {python} failed")
        out: dict[str, Any] = json.loads(result.read_text())
        _count_calls(out, profile.read_text())
    writes = await asyncio.to_thread(cp.audit.writes, since, user_agent_prefix=OPERATOR_AGENT)
    out["writes_by_restart_and_noop_reconciles"] = len(writes)
    out["python"] = python
    return out


async def alternate(cp: ControlPlane, workers: int, compared: str, rounds: int) -> dict[str, Any]:
    """The fresh pass of this checkout and of `compared`, each in a child process,
    `rounds` times in alternating order (this, compared; compared, this; ...): the box's
    speed drifts within a run by as much as the two differ, and a drift hits both alike
    only when they take turns. Where the compared tree decodes with this tree's code (as
    5b95fa6 does), the decode phase's ratio says how alike the turns ran."""
    this = sys.executable
    runs: dict[str, list[dict[str, Any]]] = {"this": [], "compared": []}
    for i in range(rounds):
        order = [("this", this), ("compared", compared)]
        for name, python in order if i % 2 == 0 else order[::-1]:
            runs[name].append(await _measure_in(python, cp, workers))
    out: dict[str, Any] = {"rounds": rounds, "compared_python": compared}
    for name, measured in runs.items():
        fresh = [m["cpu_seconds_per_fresh_noop_reconcile"] * 1e6 for m in measured]
        phases = [m["fresh_pass_phases_cpu_us"] for m in measured]
        decode = [p["decode"] for p in phases if isinstance(p, dict)]
        calls = [m[_CALLS] for m in measured if _CALLS in m]
        out[name] = {
            _CALLS: [round(x, 1) for x in calls],
            "fresh_us": [round(x, 1) for x in fresh],
            "decode_us": [round(x, 1) for x in decode],
            "fresh_us_median": round(statistics.median(fresh), 1),
            "fresh_us_min": round(min(fresh), 1),
            "decode_us_median": round(statistics.median(decode), 1) if decode else None,
            "phases_cpu_us": phases,
        }
    a, b = out["this"], out["compared"]
    out["ratio_fresh_median"] = round(a["fresh_us_median"] / b["fresh_us_median"], 3)
    out["ratio_fresh_min"] = round(a["fresh_us_min"] / b["fresh_us_min"], 3)
    if a[_CALLS] and b[_CALLS]:
        out["ratio_function_calls"] = round(
            statistics.median(a[_CALLS]) / statistics.median(b[_CALLS]), 3
        )
    if a["decode_us_median"] and b["decode_us_median"]:
        out["ratio_decode_median"] = round(a["decode_us_median"] / b["decode_us_median"], 3)
    return out


class _Kubeconfig:
    """What `OperatorUnderTest` needs of a control plane when given a kubeconfig."""

    def __init__(self, path: Path) -> None:
        self.kubeconfig = path


async def _measure(kubeconfig: Path, workers: int, profile: Path | None) -> dict[str, Any]:
    cfg = parse_configuration(operator_config(workers))
    cp: Any = _Kubeconfig(kubeconfig)
    async with OperatorUnderTest(cp, cfg, identity="bench-inproc") as out:
        await out.settle(timeout=900, quiet=1.0)
        op = out.running
        stores = {i.description: i.store for i in op.informers.informers()}
        objects = sum(len(s) for s in stores.values())
        sizes = {k: deep_size(s._objects) for k, s in stores.items()}
        store_bytes = sum(sizes.values())
        keys = [
            (r["metadata"]["namespace"], r["metadata"]["name"])
            for r in op.caches.relays.store.list()
        ]
        # The first pass after the start reconciled every relay with fresh inputs;
        # these are passes on the same inputs (a resync, an event that changed nothing).
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for key in keys:
            await op.reconciler.reconcile(key)
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - wall0
        # And passes that decide everything afresh (as after a start or a mass requeue).
        forget = getattr(op.reconciler, "inputs_changed", None)
        cpu0 = time.process_time()
        for key in keys:
            if forget is not None:
                forget()
            await op.reconciler.reconcile(key)
        fresh = time.process_time() - cpu0
        try:  # another checkout's operator may lack a phase's entry point
            from .phases import phase_split

            phases: dict[str, float] | str = await phase_split(op.reconciler, keys)
        except (ImportError, AttributeError, TypeError) as e:
            phases = f"not measured: {e}"
        if profile is not None:  # the fresh passes once more, untimed, under cProfile
            prof = cProfile.Profile()
            prof.enable()
            for key in keys:
                if forget is not None:
                    forget()
                await op.reconciler.reconcile(key)
            prof.disable()
            with profile.open("w") as f:
                pstats.Stats(prof, stream=f).sort_stats("cumulative").print_stats(40)
                pstats.Stats(prof, stream=f).sort_stats("tottime").print_stats(40)
        written = getattr(op.reconciler, "_written", {})
    n = max(len(keys), 1)
    return {
        "relays_reconciled": len(keys),
        "cpu_seconds_per_noop_reconcile": cpu / n,
        "wall_seconds_per_noop_reconcile": wall / n,
        "cpu_seconds_per_fresh_noop_reconcile": fresh / n,
        "fresh_pass_phases_cpu_us": phases,
        "cached_objects": objects,
        "cached_objects_by_store": {k: len(v) for k, v in stores.items()},
        "store_deep_bytes": store_bytes,
        "store_deep_bytes_per_object": store_bytes / max(objects, 1),
        "store_deep_bytes_per_object_by_store": {
            k: round(sizes[k] / max(len(v), 1)) for k, v in stores.items()
        },
        "status_writes_remembered": len(written),
        "operator_agent": OPERATOR_AGENT,
    }
