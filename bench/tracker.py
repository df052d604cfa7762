"""A client-side view of what the operator has produced, fed by watches.

One watch per resource (relays, exports, Deployments, Services) across all
namespaces; each event updates a per-pool tally, stamps the time, and wakes any
waiter (the reaction-latency probe waits for one export to appear here).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import Resource

from .objects import EXPORTS, RELAYS, WATCHED

Key = tuple[str, str]


def _controller(obj: dict[str, Any]) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == RELAYS.kind:
            return str(ref["name"])
    return None


def _ready(relay: dict[str, Any]) -> bool:
    """Published: the bench's control plane has no nodes, so no relay pod runs and
    Ready (which needs RelayAvailable) never turns True; what the bench measures is the
    operator's own work, done once the pool is published and its objects exist."""
    status = relay.get("status") or {}
    if status.get("observedGeneration") != relay["metadata"].get("generation"):
        return False
    return any(
        c.get("type") == "Published" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


@dataclass
class Tracker:
    """Per pool: Ready, exports, Deployment, Service; `converged` when all are there."""

    client: Client
    pools: set[Key]
    exports_per_pool: int = 3
    #: (resource plural, namespace, name) -> uid of what exists now.
    objects: dict[tuple[str, str, str], str] = field(default_factory=dict)
    ready: set[Key] = field(default_factory=set)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _waiters: list[tuple[Callable[[], bool], asyncio.Future[float]]] = field(default_factory=list)
    _per_pool: dict[Key, dict[str, int]] = field(default_factory=dict)

    async def start(self) -> None:
        rvs = [await self._list(res) for res in WATCHED]
        for res, rv in zip(WATCHED, rvs, strict=True):
            self._tasks.append(asyncio.create_task(self._run(res, rv)))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t

    # ------------------------------------------------------------ state
    def converged_pools(self) -> int:
        return sum(1 for k in self.pools if self.pool_converged(k))

    def pool_converged(self, key: Key) -> bool:
        c = self._per_pool.get(key, {})
        return (
            key in self.ready
            and c.get(EXPORTS.plural, 0) >= self.exports_per_pool
            and c.get("deployments", 0) >= 1
            and c.get("services", 0) >= 1
        )

    def pool_withdrawn(self, key: Key) -> bool:
        """Not published, and none of its Deployment, Service and exports left."""
        c = self._per_pool.get(key, {})
        return key not in self.ready and not any(c.values())

    def converged_objects(self) -> int:
        tally = sum(
            min(c.get(EXPORTS.plural, 0), self.exports_per_pool)
            + min(c.get("deployments", 0), 1)
            + min(c.get("services", 0), 1)
            for k, c in self._per_pool.items()
            if k in self.pools
        )
        return tally + len(self.ready & self.pools)

    def uid(self, res: Resource, ns: str, name: str) -> str | None:
        return self.objects.get((res.plural, ns, name))

    def wait(self, predicate: Callable[[], bool]) -> asyncio.Future[float]:
        """A future resolved with perf_counter() of the first event after which
        `predicate` holds (immediately if it holds now)."""
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        if predicate():
            fut.set_result(time.perf_counter())
        else:
            self._waiters.append((predicate, fut))
        return fut

    # ------------------------------------------------------------ feeding
    def _apply(self, res: Resource, etype: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        okey = (res.plural, ns, name)
        if res is RELAYS:
            if etype != "DELETED" and _ready(obj):
                self.ready.add((ns, name))
            else:
                self.ready.discard((ns, name))
        else:
            owner = _controller(obj)
            if owner is None:
                return
            tally = self._per_pool.setdefault((ns, owner), {})
            present = okey in self.objects
            if etype == "DELETED":
                if present:
                    tally[res.plural] = tally.get(res.plural, 0) - 1
                self.objects.pop(okey, None)
            else:
                if not present:
                    tally[res.plural] = tally.get(res.plural, 0) + 1
                self.objects[okey] = str(meta["uid"])
        now = time.perf_counter()
        if self._waiters:
            keep = []
            for pred, fut in self._waiters:
                if fut.done():
                    continue
                if pred():
                    fut.set_result(now)
                else:
                    keep.append((pred, fut))
            self._waiters = keep

    async def _list(self, res: Resource) -> str:
        result = await self.client.list(res)
        for obj in result.items:
            self._apply(res, "ADDED", obj)
        return result.resource_version

    async def _run(self, res: Resource, rv: str) -> None:
        while True:
            try:
                async for ev in self.client.watch(res, resource_version=rv, timeout_seconds=290):
                    obj = ev["object"]
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self._apply(res, ev["type"], obj)
            except errors.ApiError:
                await asyncio.sleep(0.2)
                rv = await self._list(res)
