"""What wakes the relay controller about exports, and the feature-off cleanup.

Watches (only with an MCS implementation configured, SPEC §4.8-§4.9):
- ServiceExports of the watched namespace(s), at the resolved version. A creation
  or deletion, or an update of the metadata we own while the export has a
  controller, requeues the relay that controls it and every relay whose pool
  exports a Service of that name in the same namespace (an index from frontend
  Service name to DGD keeps that a lookup, not a scan).
- The ClusterProperty `cluster.clusterset.k8s.io` (mcs with the About API
  served): any change requeues every relay. Its cache is not waited for: an
  unreadable property is reported per relay as ExportFailed and retried.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..api import crd, labels, names
from ..api.dgd import pool_from_object
from ..features import ABOUT_GROUP, CLUSTERPROPERTIES, MCS_GROUP, SERVICEEXPORTS, Gates
from ..poolrelay.decide import controller_of
from ..poolrelay.reconcile import RelayCaches
from ..runtime import errors
from ..runtime.client import Client
from ..runtime.controller import Controller, Request
from ..runtime.informer import EventType
from ..runtime.resources import Resource
from ..runtime.shared_informers import SharedInformers
from ..runtime.store import CONTROLLER_UID_INDEX, Obj, index_by_controller_uid
from .plan import CLUSTER_ID_PROPERTY
from .step import ExportCaches

log = logging.getLogger(__name__)

FRONTEND_SERVICE_INDEX = "frontend-service"


def serviceexports(version: str) -> Resource:
    return Resource(MCS_GROUP, version, SERVICEEXPORTS, "ServiceExport")


def clusterproperties(version: str) -> Resource:
    return Resource(ABOUT_GROUP, version, CLUSTERPROPERTIES, "ClusterProperty", namespaced=False)


def frontend_services(dgd: Obj) -> list[str]:
    """Index: `<namespace>/<frontend Service name>` for each frontend of a DGD."""
    pool = pool_from_object(dgd)
    return [f"{pool.namespace}/{svc}" for svc in pool.frontend_service_names()]


def _is_relay_controller(ref: Any) -> bool:
    api = str(ref.get("apiVersion", "")) if ref else ""
    return bool(ref) and ref.get("kind") == crd.KIND and api.split("/")[0] == crd.GROUP


def export_mapper(caches: RelayCaches) -> Any:
    def relays_for(export: Obj) -> Iterable[Request]:
        meta = export.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        keys: set[Request] = set()
        ref = controller_of(export)
        if ref is not None and _is_relay_controller(ref):
            keys.add((ns, str(ref.get("name", ""))))
        if name.endswith(names.RELAY_SUFFIX) and len(name) > len(names.RELAY_SUFFIX):
            keys.add((ns, name[: -len(names.RELAY_SUFFIX)]))
        for dgd in caches.dgds.store.by_index(FRONTEND_SERVICE_INDEX, f"{ns}/{name}"):
            keys.add((ns, str(dgd["metadata"]["name"])))
        return keys

    return relays_for


def export_changed(etype: EventType, old: Obj | None, new: Obj | None) -> bool:
    """Creates and deletes; updates of our metadata while the export has a controller.
    Status updates by the MCS implementation are not ours to react to."""
    if etype is not EventType.MODIFIED:
        return True
    if controller_of(old or {}) is None and controller_of(new or {}) is None:
        return False
    a, b = (old or {}).get("metadata") or {}, (new or {}).get("metadata") or {}
    return any(a.get(k) != b.get(k) for k in ("labels", "ownerReferences", "deletionTimestamp"))


def all_relays(caches: RelayCaches) -> Any:
    def every(_: Obj) -> Iterable[Request]:
        return list(caches.relays.store.keys())

    return every


def wire_exports(
    controller: Controller,
    caches: RelayCaches,
    informers: SharedInformers,
    *,
    namespace: str | None,
    gates: Gates,
    implementation: str,
) -> ExportCaches:
    assert gates.serviceexport_version is not None
    exports = informers.get(serviceexports(gates.serviceexport_version), namespace)
    if not exports.store.has_index(CONTROLLER_UID_INDEX):
        exports.store.add_index(CONTROLLER_UID_INDEX, index_by_controller_uid)
    if not caches.dgds.store.has_index(FRONTEND_SERVICE_INDEX):
        caches.dgds.store.add_index(FRONTEND_SERVICE_INDEX, frontend_services)
    controller.watches(exports, export_mapper(caches), export_changed)
    out = ExportCaches(exports)
    if implementation == "mcs" and gates.about_version:
        props = informers.get(
            clusterproperties(gates.about_version),
            keep=lambda o: (o.get("metadata") or {}).get("name") == CLUSTER_ID_PROPERTY,
        )
        controller.watches(props, all_relays(caches), wait_for_sync=False)
        out.cluster_properties = props
    return out


@dataclass
class Cleanup:
    """One pass of the feature-off cleanup: how many exports it withdrew, and the
    failures (each naming the export, or the list) that a later pass retries."""

    withdrawn: int = 0
    failures: list[str] = field(default_factory=list)


async def withdraw_leftover_exports(client: Client, version: str, namespace: str | None) -> Cleanup:
    """Feature off: delete the exports this operator made (our label, a
    DynamoPoolRelay as controller), each with uid + resourceVersion preconditions.
    Never raises for an API error: a refused list or delete is a failure of this pass,
    reported to the caller, which retries the pass."""
    res = serviceexports(version)
    out = Cleanup()
    try:
        listed = await client.list(res, namespace, label_selector=labels.DGD_NAME)
    except errors.ApiError as e:
        out.failures.append(f"list ServiceExports: {e}")
        return out
    for export in listed.items:
        try:
            out.withdrawn += await _withdraw_if_ours(client, res, export)
        except errors.ApiError as e:
            meta = export.get("metadata") or {}
            out.failures.append(
                f"delete ServiceExport {meta.get('namespace')}/{meta.get('name')}: {e}"
            )
    return out


async def _withdraw_if_ours(client: Client, res: Resource, export: Obj, attempts: int = 3) -> int:
    """Delete `export` if it is still ours at the version read; on Conflict re-read it
    (the MCS implementation may just have written its status) and decide again."""
    for _ in range(attempts):
        meta = export["metadata"]
        if meta.get("deletionTimestamp") or not _is_relay_controller(controller_of(export)):
            return 0
        if (meta.get("labels") or {}).get(labels.DGD_NAME) is None:
            return 0
        try:
            await client.delete(
                res,
                meta["name"],
                meta["namespace"],
                uid=meta["uid"],
                resource_version=meta["resourceVersion"],
            )
        except errors.NotFound:
            return 0
        except errors.Conflict:
            try:
                export = await client.get(res, meta["name"], meta["namespace"])
            except errors.NotFound:
                return 0
            continue
        log.info(
            "feature off: withdrew ServiceExport",
            extra={"namespace": meta["namespace"], "object": meta["name"]},
        )
        return 1
    return 0
