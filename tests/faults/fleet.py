"""A fleet of pools in one namespace, what converged means for it, and the audit-log
check that the operator wrote nothing it does not own.

Each pool is a DGD with two frontends (`Frontend`, `Chat`) and a worker, their Services
(as Dynamo's operator makes them), plus its DynamoPoolRelay, so converged means: the
relay's Deployment and Service, three ServiceExports (`<pool>-pool-relay`,
`<pool>-frontend`, `<pool>-chat`) controlled by the relay, and a current status. Two
exports belong to a user: `<first>-chat`, which the first pool would export (it must be
neither adopted nor changed), and `lonely`.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Any

from dynamo_pool_operator.api import crd
from dynamo_pool_operator.api.mcs import serviceexports
from dynamo_pool_operator.localcluster import dynamo
from dynamo_pool_operator.localcluster.audit import AuditEvent
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.pool.controller import RELAYS as RELAYS
from dynamo_pool_operator.pool.controller import dgd_resource
from dynamo_pool_operator.pool.relay.kinds import RELAY_KINDS
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES, Resource

DGDS = dgd_resource("v1beta1")
EXPORTS = serviceexports("v1beta1")
WORKER = {"name": "decode", "type": "decode", "replicas": 1}
#: Pools per fault test: 30 in CI; DPO_FAULT_FLEET=300 for a longer run by hand or
#: nightly (the convergence and test timeouts grow with it).
FLEET_SIZE = int(os.environ.get("DPO_FAULT_FLEET", "30"))


def components(chat: str = "Chat") -> list[dict[str, Any]]:
    return [
        {"name": "Frontend", "type": "frontend", "replicas": 1},
        {"name": chat, "type": "frontend", "replicas": 1},
        WORKER,
    ]


@dataclass
class Fleet:
    """`size` pools `p00..` in `namespace`, with the user's exports beside them."""

    client: Client
    namespace: str
    size: int
    #: pool -> the frontend names of its DGD (changed by tests through `rename`).
    frontends: dict[str, list[str]] = field(default_factory=dict)
    #: Pools whose DGD a test deleted: everything of theirs must be withdrawn.
    withdrawn: set[str] = field(default_factory=set)
    #: name -> (uid, resourceVersion) of the user's exports at creation.
    foreign: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Every export name the operator may legitimately have written at any time.
    ever_ours: set[str] = field(default_factory=set)

    @property
    def pools(self) -> list[str]:
        return [f"p{i:02d}" for i in range(self.size)]

    async def create(self) -> None:
        for pool in self.pools:
            self.frontends[pool] = ["Frontend", "Chat"]
        # The user's exports first, so the operator meets them from its first reconcile.
        for name in (f"{self.pools[0]}-chat", "lonely"):
            se = await self.client.create(
                EXPORTS,
                {
                    "apiVersion": EXPORTS.api_version,
                    "kind": EXPORTS.kind,
                    "metadata": {"name": name, "namespace": self.namespace},
                },
            )
            self.foreign[name] = (se["metadata"]["uid"], se["metadata"]["resourceVersion"])
        await asyncio.gather(*(self._create_pool(p) for p in self.pools))
        self.ever_ours |= self.expected_exports()

    async def _create_pool(self, pool: str) -> None:
        meta = {"name": pool, "namespace": self.namespace}
        dgd = await self.client.create(
            DGDS,
            {
                "apiVersion": DGDS.api_version,
                "kind": DGDS.kind,
                "metadata": meta,
                "spec": {"components": components()},
            },
        )
        for frontend in self.frontends[pool]:
            await self._make_service(dgd, frontend)
        await self.client.create(
            RELAYS, {"apiVersion": RELAYS.api_version, "kind": RELAYS.kind, "metadata": meta}
        )

    # ------------------------------------------------------------ user changes
    async def rename_chat(self, pool: str, new: str) -> None:
        """The DGD's `Chat` frontend becomes `new`: its export must move."""
        dgd = await self.client.merge_patch(
            DGDS, pool, {"spec": {"components": components(new)}}, self.namespace
        )
        await self._make_service(dgd, new)
        self.frontends[pool] = ["Frontend", new]
        self.ever_ours |= self.expected_exports()

    async def _make_service(self, dgd: dict[str, Any], frontend: str) -> None:
        """The frontend's Service, as Dynamo's operator makes it (controlled by the DGD):
        a frontend is exported once it exists."""
        await self.client.create(SERVICES, dynamo.frontend(dgd, frontend)[1])

    async def delete_dgd(self, pool: str) -> None:
        await self.client.delete(DGDS, pool, self.namespace)
        self.withdrawn.add(pool)

    async def delete_export(self, name: str) -> None:
        await self.client.delete(EXPORTS, name, self.namespace)

    # ------------------------------------------------------------ expectations
    def expected_exports(self) -> set[str]:
        """The exports the operator must control once converged."""
        out: set[str] = set()
        for pool in self.pools:
            if pool in self.withdrawn:
                continue
            out.add(f"{pool}-pool-relay")
            out |= {f"{pool}-{f.lower()}" for f in self.frontends[pool]}
        return out - set(self.foreign)

    async def problems(self) -> list[str]:
        """What differs from converged (empty when converged)."""
        ns = self.namespace
        relays = {r["metadata"]["name"]: r for r in await self._items(RELAYS)}
        exports = {e["metadata"]["name"]: e for e in await self._items(EXPORTS)}
        deployments = {d["metadata"]["name"]: d for d in await self._items(DEPLOYMENTS)}
        services = {s["metadata"]["name"]: s for s in await self._items(SERVICES)}
        out: list[str] = []
        ours = {n for n, e in exports.items() if _controller(e) in relays}
        want = self.expected_exports()
        if ours != want:
            missing, extra = sorted(want - ours)[:5], sorted(ours - want)[:5]
            out.append(f"exports: missing {missing}, extra {extra}")
        for name, owner in ((n, _controller(exports[n])) for n in ours & want):
            pool = name if name.endswith("-pool-relay") else None
            if pool is not None and owner != name.removesuffix("-pool-relay"):
                out.append(f"export {name} controlled by {owner}")
        for name, (uid, rv) in self.foreign.items():
            obj = exports.get(name)
            now = (obj["metadata"]["uid"], obj["metadata"]["resourceVersion"]) if obj else None
            if now != (uid, rv):
                out.append(f"user's export {name} changed: {now} != {(uid, rv)}")
        for pool in self.pools:
            relay_name = f"{pool}-pool-relay"
            present = pool not in self.withdrawn
            for kind, objs in (("deployment", deployments), ("service", services)):
                obj = objs.get(relay_name)
                if present and (obj is None or _controller(obj) != pool):
                    out.append(f"{kind} {ns}/{relay_name} not ours yet")
                if not present and obj is not None:
                    out.append(f"{kind} {ns}/{relay_name} not withdrawn")
            relay = relays.get(pool)
            status = (relay or {}).get("status") or {}
            if relay is None or status.get("observedGeneration") != relay["metadata"]["generation"]:
                out.append(f"relay {pool} status not current")
        return out

    async def converged(self) -> bool:
        return not await self.problems()

    async def _items(self, res: Resource) -> list[dict[str, Any]]:
        return list((await self.client.list(res, self.namespace)).items)

    async def count_ours(self) -> int:
        """Exports some relay controls: progress of a cold start."""
        relays = set(self.pools)
        return sum(1 for e in await self._items(EXPORTS) if _controller(e) in relays)

    # ------------------------------------------------------------ the audit check
    def foreign_writes(self, writes: list[AuditEvent], lease: str) -> list[str]:
        """Every write in `writes` that touched something the operator does not own.

        Allowed: its Lease; Events; the relays' status; the relay's own objects
        `<pool>-pool-relay` (every kind of `RELAY_KINDS`); exports named after a pool's
        relay or frontends (never a user's); the reviews a replica makes of its own
        RBAC at start (creates that store nothing). Anything else — another resource,
        another namespace, a user's export, the relay's spec — is a violation, whatever
        its response code (except a create refused before its body was read, which the
        audit log cannot name).
        """
        relay_objects = {f"{p}-pool-relay" for p in self.pools}
        bad = []
        for w in writes:
            where = (w.resource, w.subresource)
            if w.verb == "create" and w.namespace == "" and w.resource in SELF_REVIEWS:
                continue
            ok = w.namespace == self.namespace and (
                (where == ("leases", "") and w.name == lease)
                or where == ("events", "")
                or (where == ("dynamopoolrelays", "status") and w.name in self.pools)
                or (where in _RELAY_OBJECTS and w.name in relay_objects)
                or (where == ("serviceexports", "") and w.name in self.ever_ours)
                # A create refused before its body (the name) is read: nothing was
                # written and there is nothing to attribute. By the authorizer (403), or,
                # for a kind the operator creates, by a server whose storage is still
                # starting (429, 503).
                or (
                    w.verb == "create"
                    and w.name == ""
                    and (w.code == 403 or (w.code in (429, 503) and w.resource in _CREATES))
                )
            )
            if not ok:
                what = f"{w.resource}/{w.subresource} {w.namespace}/{w.name}"
                bad.append(f"{w.user} {w.verb} {what} -> {w.code}")
        return bad


#: Who am I, and may I (`run`'s start, rbac.py): asked by a create, stored nowhere.
SELF_REVIEWS = frozenset({"selfsubjectaccessreviews", "selfsubjectreviews"})

#: The relay's own objects, by the kinds table (every kind it names is `<pool>-pool-relay`).
_RELAY_OBJECTS = frozenset((k.resource.plural, "") for k in RELAY_KINDS)
#: The kinds the operator creates in a pool's namespace.
_CREATES = frozenset({"events", "serviceexports", *(k.resource.plural for k in RELAY_KINDS)})


def _controller(obj: dict[str, Any]) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == crd.KIND:
            return str(ref["name"])
    return None


async def namespace_gone(cp: ControlPlane, name: str, timeout: float = 90) -> None:
    """Delete the namespace and wait until it is gone, so no later test's cluster-wide
    replicas meet this fleet."""
    await asyncio.to_thread(cp.delete_namespace, name)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        code, _ = await asyncio.to_thread(cp.request, "GET", f"/api/v1/namespaces/{name}")
        if code == 404:
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"namespace {name} not deleted in {timeout}s")
