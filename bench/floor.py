"""The write floor: the operator's cold-start writes issued by a bare concurrent client.

Bodies are copied from what the operator wrote for one converged pool (same size,
same kinds), re-targeted at a fresh set of namespaces whose relays exist but have
nothing else, so every write does real work: N x 3 ServiceExport creates, N creates of
each kind a relay owns (Deployment, Service, PodDisruptionBudget: the kinds table) and
N status applies.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from dynamo_pool_operator.pool.relay.kinds import RELAY_KINDS
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import (
    EVENTS,
    NAMESPACES,
    Resource,
)

from .objects import EXPORTS, RELAYS, bounded, create_pools, pool_names

_KEEP_META = ("labels", "annotations")


def _template(obj: dict[str, Any], res: Resource) -> dict[str, Any]:
    meta = obj["metadata"]
    spec: dict[str, Any] = copy.deepcopy(obj.get("spec") or {})
    if res.kind == "Service":
        for k in ("clusterIP", "clusterIPs"):
            spec.pop(k, None)
    return {
        "apiVersion": res.api_version,
        "kind": res.kind,
        "metadata": {k: copy.deepcopy(meta[k]) for k in _KEEP_META if k in meta},
        "spec": spec,
    }


async def templates(client: Client, ns: str, pool: str) -> dict[str, Any]:
    """What the operator wrote for one pool, stripped of server-set fields."""

    def mine(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The relay's (the DGD, of the same name, owns its frontends' Services)."""
        return [
            o
            for o in items
            if any(
                r.get("name") == pool and r.get("kind") == RELAYS.kind
                for r in o["metadata"].get("ownerReferences") or []
            )
        ]

    exports = mine((await client.list(EXPORTS, ns)).items)
    # Every kind a relay owns (the kinds table), as the operator wrote it for this pool.
    owned = []
    for kind in RELAY_KINDS:
        objs = mine((await client.list(kind.resource, ns)).items)
        if objs:
            name = objs[0]["metadata"]["name"]
            owned.append((kind.resource, (name, _template(objs[0], kind.resource))))
    relay = await client.get(RELAYS, pool, ns)
    events = [
        e
        for e in (await client.list(EVENTS, ns)).items
        if (e.get("regarding") or {}).get("name") == pool
    ]
    return {
        "events": [
            {
                k: v
                for k, v in e.items()
                if k
                not in (
                    "metadata",
                    "deprecatedFirstTimestamp",
                    "deprecatedLastTimestamp",
                    "deprecatedCount",
                    "deprecatedSource",
                )
            }
            for e in events
        ],
        "pool": pool,
        "exports": [(e["metadata"]["name"], _template(e, EXPORTS)) for e in exports],
        "owned": owned,
        "status": relay.get("status") or {},
    }


def _retarget(
    name: str, body: dict[str, Any], tpl_pool: str, ns: str, pool: str, uid: str
) -> dict[str, Any]:
    out = copy.deepcopy(body)
    out["metadata"]["name"] = name.replace(tpl_pool, pool, 1)
    out["metadata"]["namespace"] = ns
    out["metadata"]["ownerReferences"] = [
        {
            "apiVersion": RELAYS.api_version,
            "kind": RELAYS.kind,
            "name": pool,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return out


def writes_for(
    client: Client, tpl: dict[str, Any], ns: str, pool: str, uid: str, *, events: bool = False
) -> list[Callable[[], Awaitable[Any]]]:
    """The writes of one pool, as the operator makes them at cold start (and with
    `events`, the Events the operator records for that pool as well)."""
    p = tpl["pool"]
    jobs: list[Callable[[], Awaitable[Any]]] = []
    for i, ev in enumerate(tpl["events"] if events else []):
        eb = copy.deepcopy(ev)
        eb["metadata"] = {"name": f"{pool}.bench{i}", "namespace": ns}
        eb["regarding"].update(namespace=ns, name=pool, uid=uid)
        eb["regarding"].pop("resourceVersion", None)
        eb.pop("related", None)
        jobs.append(functools.partial(client.create, EVENTS, eb, ns))
    creates: list[tuple[Resource, tuple[str, dict[str, Any]]]] = [
        *tpl["owned"],
        *((EXPORTS, e) for e in tpl["exports"]),
    ]
    for res, (name, body) in creates:
        b = _retarget(name, body, p, ns, pool, uid)
        jobs.append(functools.partial(client.create, res, b, ns, field_manager="dpo-bench"))
    status = copy.deepcopy(tpl["status"])
    body = {
        "apiVersion": RELAYS.api_version,
        "kind": RELAYS.kind,
        "metadata": {"name": pool, "namespace": ns, "uid": uid},
        "status": status,
    }
    jobs.append(
        lambda: client.apply(
            RELAYS, body, field_manager="dpo-bench", force=True, subresource="status"
        )
    )
    return jobs


async def floor_at(
    client: Client, tpl: dict[str, Any], n: int, concurrency: int, *, events: bool = False
) -> dict[str, Any]:
    """Set up n bare relays in fresh namespaces (untimed), then time their 6n writes
    (plus the operator's Events per pool with `events`)."""
    pools = pool_names(n, f"bench-floor{concurrency}{'e' if events else ''}")
    uids = await create_pools(client, pools, dgd=False)
    jobs = [
        j
        for (ns, pool) in pools
        for j in writes_for(client, tpl, ns, pool, uids[(ns, pool)], events=events)
    ]
    await asyncio.sleep(1.0)  # let the relay creates settle out of the API server
    t0 = time.perf_counter()
    retried: list[int] = []
    await bounded([functools.partial(_patient, j, retried) for j in jobs], concurrency)
    seconds = time.perf_counter() - t0
    return {
        "concurrency": concurrency,
        "with_events": events,
        "writes": len(jobs),
        "seconds": round(seconds, 3),
        "writes_per_second": round(len(jobs) / seconds, 1),
        "retried_after_timeout": len(retried),
    }


async def _patient(job: Callable[[], Awaitable[Any]], retried: list[int]) -> None:
    """One write; retried (up to twice) when the server gave no answer in time, as the
    operator's own writes would be: at N = 10,000 on a loaded machine one Service create
    waited more than 30 s (2026-12-01) and the whole run was lost. A retried create
    that finds its object made by the first attempt is done."""
    for attempt in range(3):
        try:
            await job()
            return
        except errors.ServerTimeout:
            if attempt == 2:
                raise
            retried.append(1)
        except errors.AlreadyExists:
            if attempt == 0:
                raise
            return


async def remove_all(client: Client, prefix: str = "bench-floor") -> None:
    """Delete every object the floor made (the bench runs without the garbage collector
    and the namespace controller, so by collection, resource by resource)."""
    names = [
        ns["metadata"]["name"]
        for ns in (await client.list(NAMESPACES)).items
        if ns["metadata"]["name"].startswith(prefix)
    ]
    # Every kind the floor writes: the exports, then each kind a relay owns (the kinds
    # table), then the relays. A kind left out stays cached by the operator started next.
    kinds = (EVENTS, EXPORTS, *(kind.resource for kind in RELAY_KINDS), RELAYS)
    for res in kinds:
        await bounded([functools.partial(_delete_collection, client, res, ns) for ns in names], 8)


async def _delete_collection(client: Client, res: Resource, ns: str) -> None:
    try:
        await client.request("DELETE", res.path(ns))
    except errors.ApiError as e:
        if e.status != 405:  # a resource without deletecollection: one by one
            raise
        items = (await client.list(res, ns)).items
        await bounded(
            [functools.partial(client.delete, res, o["metadata"]["name"], ns) for o in items],
            16,
        )
