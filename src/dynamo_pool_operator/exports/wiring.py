"""What wakes the relay controller about exports.

Watches (only with an MCS implementation configured):
- ServiceExports of the watched namespace(s), at the resolved version. A creation
  or deletion, or an update of the metadata we own while the export has a
  controller, requeues the relay that controls it and every relay whose pool
  exports a Service of that name in the same namespace (an index from frontend
  Service name to DGD keeps that a lookup, not a scan).
- The ClusterProperty `cluster.clusterset.k8s.io` (mcs with the About API
  served): any change requeues every relay, at low queue priority so that a
  user's change made meanwhile is not served after all of them. Its cache is not
  waited for: an unreadable property is reported per relay as ExportFailed and
  retried.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..api import crd, names
from ..api.dgd import pool_from_object
from ..api.mcs import CLUSTER_ID_PROPERTY, Implementation, clusterproperties, serviceexports
from ..discovery import ServedApis
from ..runtime.controller import Controller, Request
from ..runtime.informer import EventType, Informer
from ..runtime.ownership import controller_is, controller_of
from ..runtime.queue import LOW
from ..runtime.shared_informers import SharedInformers
from ..runtime.store import CONTROLLER_UID_INDEX, Obj, index_by_controller_uid
from .contributor import ExportCaches

FRONTEND_SERVICE_INDEX = "frontend-service"


def frontend_services(dgd: Obj) -> list[str]:
    """Index: `<namespace>/<frontend Service name>` for each frontend of a DGD."""
    pool = pool_from_object(dgd)
    return [f"{pool.namespace}/{svc}" for svc in pool.frontend_service_names()]


def is_relay_controller(ref: Any) -> bool:
    """The reference names a DynamoPoolRelay (any version of our group)."""
    return controller_is(ref, crd.GROUP, crd.KIND)


def export_mapper(dgds: Informer) -> Any:
    def relays_for(export: Obj) -> Iterable[Request]:
        meta = export.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        keys: set[Request] = set()
        ref = controller_of(export)
        if ref is not None and is_relay_controller(ref):
            keys.add((ns, str(ref.get("name", ""))))
        pool = names.pool_of(name)
        if pool is not None:
            keys.add((ns, pool))
        for dgd in dgds.store.by_index(FRONTEND_SERVICE_INDEX, f"{ns}/{name}"):
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


def all_relays(relays: Informer) -> Any:
    def every(_: Obj) -> Iterable[Request]:
        return list(relays.store.keys())

    return every


def export_caches(
    informers: SharedInformers,
    *,
    dgds: Informer,
    namespace: str | None,
    served: ServedApis,
    implementation: Implementation,
) -> ExportCaches:
    """The caches the export contributor reads: the exports (indexed by controller),
    the DGDs' frontend Service index, and (mcs with the About API) the cluster's ID."""
    assert served.serviceexport_version is not None
    exports = informers.get(serviceexports(served.serviceexport_version), namespace)
    if not exports.store.has_index(CONTROLLER_UID_INDEX):
        exports.store.add_index(CONTROLLER_UID_INDEX, index_by_controller_uid)
    if not dgds.store.has_index(FRONTEND_SERVICE_INDEX):
        dgds.store.add_index(FRONTEND_SERVICE_INDEX, frontend_services)
    out = ExportCaches(exports)
    if implementation.checks_cluster_id and served.about_version:
        out.cluster_properties = informers.get(
            clusterproperties(served.about_version),
            keep=lambda o: (o.get("metadata") or {}).get("name") == CLUSTER_ID_PROPERTY,
        )
    return out


def watch_exports(
    controller: Controller, caches: ExportCaches, *, relays: Informer, dgds: Informer
) -> None:
    """Declare the export watches on `controller`."""
    controller.watches(caches.exports, export_mapper(dgds), export_changed)
    if caches.cluster_properties is not None:
        controller.watches(
            caches.cluster_properties, all_relays(relays), wait_for_sync=False, priority=LOW
        )
