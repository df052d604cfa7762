"""`--trace-queue`: the operator's work queue, traced (a diagnostic, never in the image).

The bench puts this directory on the operator's PYTHONPATH, so Python imports this
module at start (`site`); with `DPO_QUEUE_TRACE` set, it wraps `WorkQueue`'s add, get
and done to append one line per call to `$DPO_QUEUE_TRACE.<pid>`: the wall time, the
call, the key, the priority (and for a get, whether the getter was the worker kept for
changes), then the keys queued, the depth by priority and the keys in flight after it.
Full collections of the garbage collector are lines too (`gc2 <seconds>`).
`python -m bench.queue_waits` reads it beside a result file.
"""

from __future__ import annotations

import gc
import os
import time
from typing import Any

_PATH = os.environ.get("DPO_QUEUE_TRACE")


def _install(path: str) -> None:
    from dynamo_pool_operator.runtime.control import queue

    out = open(f"{path}.{os.getpid()}", "w", buffering=1 << 16)  # noqa: SIM115 (process-long)
    cls: Any = queue.WorkQueue
    add, get, done = cls.add, cls.get_with_priority, cls.done

    def state(q: Any) -> str:
        depth = ",".join(f"{p}:{n}" for p, n in sorted(q.depth_by_priority().items()))
        return f"{len(q)} {depth or '-'} {q.processing}"

    def traced_add(self: Any, key: Any, priority: int = queue.NORMAL) -> None:
        add(self, key, priority)
        out.write(f"{time.time():.6f} add {key[0]}/{key[1]} {priority} - {state(self)}\n")

    async def traced_get(self: Any, at_least: Any = None, *, idle_flow: bool = False) -> Any:
        key, priority = await get(self, at_least, idle_flow=idle_flow)
        kept = "kept" if at_least is not None else "any"
        out.write(f"{time.time():.6f} get {key[0]}/{key[1]} {priority} {kept} {state(self)}\n")
        return key, priority

    def traced_done(self: Any, key: Any) -> None:
        done(self, key)
        out.write(f"{time.time():.6f} done {key[0]}/{key[1]} - - {state(self)}\n")

    cls.add, cls.get_with_priority, cls.done = traced_add, traced_get, traced_done
    started = [0.0]

    def collection(phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            started[0] = time.time()
        else:
            out.write(f"{started[0]:.6f} gc2 {time.time() - started[0]:.4f}\n")

    gc.callbacks.append(collection)
    import atexit

    atexit.register(out.flush)


if _PATH:
    try:
        _install(_PATH)
    except Exception as e:  # a diagnostic must never stop the operator
        print(f"queue trace not installed: {e!r}", flush=True)
