"""In-process measurements on a settled cluster: CPU per no-op reconcile, and the
caches' size (deep `sys.getsizeof`) and RSS growth per cached object."""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from pathlib import Path
from typing import Any

from dynamo_pool_operator.config import parse_configuration
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.harness import OPERATOR_AGENT, OperatorUnderTest

from .procs import operator_config


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


async def measure(cp: ControlPlane, workers: int, profile: Path | None = None) -> dict[str, Any]:
    """Start the operator in process on the converged cluster, then reconcile every
    relay once more by hand, timing CPU with `time.process_time()`."""
    cfg = parse_configuration(operator_config(workers))
    since = cp.audit.offset()
    async with OperatorUnderTest(cp, cfg, identity="bench-inproc") as out:
        await out.settle(timeout=300, quiet=1.0)
        op = out.running
        stores = {i.description: i.store for i in op.informers.informers()}
        objects = sum(len(s) for s in stores.values())
        store_bytes = sum(deep_size(s._objects) for s in stores.values())
        keys = [
            (r["metadata"]["namespace"], r["metadata"]["name"])
            for r in op.caches.relays.store.list()
        ]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for key in keys:
            await op.reconciler.reconcile(key)
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - wall0
        if profile is not None:  # a second, untimed pass under cProfile
            prof = cProfile.Profile()
            prof.enable()
            for key in keys:
                await op.reconciler.reconcile(key)
            prof.disable()
            with profile.open("w") as f:
                pstats.Stats(prof, stream=f).sort_stats("cumulative").print_stats(40)
        writes = await out.writes_since(since)
    return {
        "relays_reconciled": len(keys),
        "cpu_seconds_per_noop_reconcile": cpu / max(len(keys), 1),
        "wall_seconds_per_noop_reconcile": wall / max(len(keys), 1),
        "writes_by_restart_and_noop_reconciles": len(writes),
        "cached_objects": objects,
        "cached_objects_by_store": {k: len(v) for k, v in stores.items()},
        "store_deep_bytes": store_bytes,
        "store_deep_bytes_per_object": store_bytes / max(objects, 1),
        "operator_agent": OPERATOR_AGENT,
    }
