"""A STAND-IN Multi-Cluster Services implementation, written here: for `karmada` only.

The real implementation in the e2e tier is Submariner Lighthouse
(test_multicluster.py, localcluster/lighthouse.py). Karmada cannot be built here, so
test_multicluster_simulated.py keeps this stand-in for the `karmada` setting: it
proves what the operator writes next to *an* implementation, not what one does.
It does, through the real API servers, what KEP-1645 implementations do (and Karmada's
consuming side):

- it writes `status.conditions` on every ServiceExport (`Valid`, and `Ready` with
  reason `Exported` once the Service exists), as Lighthouse and Cilium do, on
  objects the operator controls;
- it merges exports of the same namespace/name across the clusters of the set into
  one ServiceImport in every cluster, listing the exporting clusters by cluster ID
  in `status.clusters[]`;
- given the Karmada control plane (`karmada=`), it does there what Karmada's two
  EndpointSlice controllers do for the consuming side, which is what the Global Router
  reads: each exporting member's EndpointSlices of an exported Service are collected
  into a Work in the member's execution namespace `karmada-es-<member>` (the collect
  controller), and each Work's slice is derived into an EndpointSlice in the Service's
  namespace, labelled `kubernetes.io/service-name: derived-<service>` and managed by
  `endpointslice-controller.karmada.io`, its Work named in the annotations
  `work.karmada.io/namespace` and `work.karmada.io/name` (the endpointslice
  controller). A withdrawn export's Works and derived slices are deleted.

It polls instead of watching (it is test code, and a poll cannot miss an event) and
writes only what changed, like a controller at rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.mcs import serviceexports

# The Works at the version `discover --karmada` reads them.
from dynamo_pool_operator.discover.view import ENDPOINT_SLICES, WORKS
from dynamo_pool_operator.localcluster.crds import free_form_crd
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import SERVICES, Resource

log = logging.getLogger(__name__)

GROUP = "multicluster.x-k8s.io"
SERVICE_EXPORTS = serviceexports("v1beta1")
SERVICE_IMPORTS = Resource(GROUP, "v1beta1", "serviceimports", "ServiceImport")
#: The simulator's writes, told apart in the audit log.
USER_AGENT = "mcs-simulator/1"
#: Karmada's labels on a collected Work: which Service's slices it carries.
WORK_SERVICE_NAMESPACE = "endpointslice.karmada.io/namespace"
WORK_SERVICE_NAME = "endpointslice.karmada.io/name"
WORK_PERMANENT_ID = "work.karmada.io/permanent-id"
#: Where the derived slices' names start (`imported-<member>-<slice>`, as Karmada's).
DERIVED_SLICE_PREFIX = "imported"


def work_crd() -> dict[str, Any]:
    """A minimal Work CRD (`work.karmada.io/v1alpha1`, namespaced), for a control plane
    that serves none: its spec is kept as written, which is all the stand-in needs."""
    return free_form_crd(WORKS.group, WORKS.version, WORKS.kind, WORKS.plural)


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

    def __init__(
        self,
        members: list[Member],
        namespace: str,
        *,
        interval: float = 0.2,
        karmada: Client | None = None,
    ) -> None:
        self.members = members
        self.namespace = namespace
        self.interval = interval
        #: The Karmada control plane, where the consuming side's slices go.
        self.karmada = karmada
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
        if self.karmada is not None:
            await self._collect(self.karmada, exported)

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

    async def _collect(
        self, plane: Client, exported: dict[str, dict[str, list[dict[str, Any]]]]
    ) -> None:
        """Karmada's consuming side: a Work per collected member slice, a derived slice
        per Work, both on the control plane; what is no longer exported, deleted."""
        by_id = {m.cluster_id: m for m in self.members}
        works: dict[tuple[str, str], dict[str, Any]] = {}  # (namespace, name) -> Work
        slices: dict[str, dict[str, Any]] = {}  # name -> derived slice
        for service, by_cluster in sorted(exported.items()):
            for cluster in sorted(by_cluster):
                collected = await by_id[cluster].client.list(
                    ENDPOINT_SLICES,
                    self.namespace,
                    label_selector=f"{names.SLICE_SERVICE_NAME}={service}",
                )
                for original in collected.items:
                    work, derived = _collected(original, cluster, service)
                    meta = work["metadata"]
                    works[(meta["namespace"], meta["name"])] = work
                    slices[derived["metadata"]["name"]] = derived
        have_works = {
            (w["metadata"]["namespace"], w["metadata"]["name"]): w
            for w in (
                await plane.list(
                    WORKS, None, label_selector=f"{WORK_SERVICE_NAMESPACE}={self.namespace}"
                )
            ).items
        }
        have_slices = {
            s["metadata"]["name"]: s
            for s in (
                await plane.list(
                    ENDPOINT_SLICES,
                    self.namespace,
                    label_selector=f"{names.SLICE_MANAGED_BY}={names.KARMADA_SLICE_MANAGER}",
                )
            ).items
        }
        for (space, name), work in works.items():
            current = have_works.get((space, name))
            if current is None:
                await plane.create(WORKS, work)
            elif current.get("spec") != work["spec"]:
                await plane.merge_patch(WORKS, name, {"spec": work["spec"]}, space)
        for name, derived in slices.items():
            current = have_slices.get(name)
            if current is None:
                await plane.create(ENDPOINT_SLICES, derived)
            elif _carried(current) != _carried(derived):
                await plane.merge_patch(ENDPOINT_SLICES, name, _carried(derived), self.namespace)
        for space, name in have_works.keys() - works.keys():
            with contextlib.suppress(errors.NotFound):
                await plane.delete(WORKS, name, space)
        for name in have_slices.keys() - slices.keys():
            with contextlib.suppress(errors.NotFound):
                await plane.delete(ENDPOINT_SLICES, name, self.namespace)


def _carried(slice_: dict[str, Any]) -> dict[str, Any]:
    """What a derived slice takes over from the member's: its endpoints and ports."""
    return {"endpoints": slice_.get("endpoints") or [], "ports": slice_.get("ports") or []}


def _collected(
    original: dict[str, Any], member: str, service: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A member's EndpointSlice as Karmada carries it to its control plane: the Work in
    `karmada-es-<member>` holding it, and the slice derived from that Work."""
    meta = original["metadata"]
    namespace = meta["namespace"]
    space = f"{names.KARMADA_EXECUTION_SPACE_PREFIX}{member}"
    work_name = f"endpointslice-{meta['name']}-{namespace}"
    permanent_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{space}/{work_name}"))
    manifest = {
        "apiVersion": ENDPOINT_SLICES.api_version,
        "kind": ENDPOINT_SLICES.kind,
        "metadata": {
            "name": meta["name"],
            "namespace": namespace,
            "labels": meta.get("labels") or {},
        },
        "addressType": original.get("addressType", "IPv4"),
        **_carried(original),
    }
    work = {
        "apiVersion": WORKS.api_version,
        "kind": WORKS.kind,
        "metadata": {
            "name": work_name,
            "namespace": space,
            "labels": {
                WORK_SERVICE_NAMESPACE: namespace,
                WORK_SERVICE_NAME: service,
                WORK_PERMANENT_ID: permanent_id,
            },
        },
        "spec": {"workload": {"manifests": [manifest]}},
    }
    derived = {
        "apiVersion": ENDPOINT_SLICES.api_version,
        "kind": ENDPOINT_SLICES.kind,
        "metadata": {
            "name": f"{DERIVED_SLICE_PREFIX}-{member}-{meta['name']}",
            "namespace": namespace,
            "labels": {
                names.SLICE_SERVICE_NAME: f"{names.KARMADA_DERIVED_PREFIX}{service}",
                names.SLICE_MANAGED_BY: names.KARMADA_SLICE_MANAGER,
                WORK_PERMANENT_ID: permanent_id,
            },
            "annotations": {
                names.KARMADA_WORK_NAMESPACE: space,
                names.KARMADA_WORK_NAME: work_name,
            },
        },
        "addressType": manifest["addressType"],
        **_carried(original),
    }
    return work, derived
