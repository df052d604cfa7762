"""A STAND-IN Multi-Cluster Services implementation, written here: for `karmada` only.

The real implementation in the e2e tier is Submariner Lighthouse
(test_multicluster.py, localcluster/lighthouse.py). Karmada cannot be built here, so
test_multicluster_simulated.py keeps this stand-in for the `karmada` setting: it
proves what the operator writes next to *an* implementation, not what one does.
It does, through the real API servers, the two things KEP-1645 implementations do:

- it writes `status.conditions` on every ServiceExport (`Valid`, and `Ready` with
  reason `Exported` once the Service exists), as Lighthouse and Cilium do, on
  objects the operator controls;
- it merges exports of the same namespace/name across the clusters of the set into
  one ServiceImport in every cluster, listing the exporting clusters by cluster ID
  in `status.clusters[]`: the view a Global Router reads to find pools.

It polls instead of watching (it is test code, and a poll cannot miss an event) and
writes only what changed, like a controller at rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from dynamo_pool_operator.api.mcs import serviceexports
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import SERVICES, Resource

log = logging.getLogger(__name__)

GROUP = "multicluster.x-k8s.io"
SERVICE_EXPORTS = serviceexports("v1beta1")
SERVICE_IMPORTS = Resource(GROUP, "v1beta1", "serviceimports", "ServiceImport")
#: The simulator's writes, told apart in the audit log.
USER_AGENT = "mcs-simulator/1"


@dataclasses.dataclass(frozen=True)
class Member:
    """One cluster of the set: its cluster ID and a client for it."""

    cluster_id: str
    client: Client


def _conditions(valid: bool) -> list[tuple[str, str, str]]:
    if not valid:
        return [("Valid", "False", "NoService"), ("Ready", "False", "Pending")]
    return [("Valid", "True", "Valid"), ("Ready", "True", "Exported")]


def _ports(service: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {k: p[k] for k in ("name", "port", "protocol", "appProtocol") if k in p}
        for p in (service.get("spec") or {}).get("ports") or []
    ]


class ClusterSetSimulator:
    """Merges the exports of one namespace across `members` into ServiceImports."""

    def __init__(self, members: list[Member], namespace: str, *, interval: float = 0.2) -> None:
        self.members = members
        self.namespace = namespace
        self.interval = interval
        self.passes = 0

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[ClusterSetSimulator]:
        task = asyncio.create_task(self._loop())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            try:
                await self.sync_once()
            except errors.ApiError as e:  # a lost race with the operator: next pass
                log.info("mcs simulator: %s", e)
            self.passes += 1
            await asyncio.sleep(self.interval)

    async def sync_once(self) -> None:
        exported: dict[str, dict[str, list[dict[str, Any]]]] = {}  # name -> cluster -> ports
        for member in self.members:
            for export in (await member.client.list(SERVICE_EXPORTS, self.namespace)).items:
                meta = export["metadata"]
                if meta.get("deletionTimestamp"):
                    continue
                service = await self._service(member, meta["name"])
                await self._report(member, export, valid=service is not None)
                if service is not None:
                    exported.setdefault(meta["name"], {})[member.cluster_id] = _ports(service)
        for member in self.members:
            await self._import(member, exported)

    async def _service(self, member: Member, name: str) -> dict[str, Any] | None:
        try:
            return await member.client.get(SERVICES, name, self.namespace)
        except errors.NotFound:
            return None

    async def _report(self, member: Member, export: dict[str, Any], *, valid: bool) -> None:
        """Write the export's conditions when they are not already what we would say."""
        want = _conditions(valid)
        have = [
            (c.get("type"), c.get("status"), c.get("reason"))
            for c in (export.get("status") or {}).get("conditions") or []
        ]
        if have == want:
            return
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        generation = export["metadata"].get("generation", 1)
        conditions = [
            {
                "type": t,
                "status": s,
                "reason": r,
                "message": f"{r} (mcs simulator)",
                "lastTransitionTime": now,
                "observedGeneration": generation,
            }
            for t, s, r in want
        ]
        await member.client.merge_patch(
            SERVICE_EXPORTS,
            export["metadata"]["name"],
            {"status": {"conditions": conditions}},
            self.namespace,
            subresource="status",
        )

    async def _import(
        self, member: Member, exported: dict[str, dict[str, list[dict[str, Any]]]]
    ) -> None:
        imports = {
            i["metadata"]["name"]: i
            for i in (await member.client.list(SERVICE_IMPORTS, self.namespace)).items
        }
        for name, by_cluster in exported.items():
            clusters = [{"cluster": c} for c in sorted(by_cluster)]
            ports = by_cluster[min(by_cluster)]
            current = imports.get(name)
            if current is None:
                body = {
                    "apiVersion": SERVICE_IMPORTS.api_version,
                    "kind": SERVICE_IMPORTS.kind,
                    "metadata": {"name": name, "namespace": self.namespace},
                    "spec": {"type": "ClusterSetIP", "ports": ports},
                }
                current = await member.client.create(SERVICE_IMPORTS, body)
            if (current.get("status") or {}).get("clusters") != clusters:
                await member.client.merge_patch(
                    SERVICE_IMPORTS,
                    name,
                    {"status": {"clusters": clusters}},
                    self.namespace,
                    subresource="status",
                )
        for name in imports.keys() - exported.keys():
            with contextlib.suppress(errors.NotFound):
                await member.client.delete(SERVICE_IMPORTS, name, self.namespace)
