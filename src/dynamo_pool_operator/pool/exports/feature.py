"""The export feature: its caches, what each pass gathers from them, and the settings in
effect (`plan.ExportRules`); `plan.plan_exports` plans and `verdict.report_exports`
reports, purely.

Gather reads only caches, which come and go with their APIs (`apis.py` hands them over
by `use`): with no ServiceExport API nothing is planned and `Exported` says why. A
ClusterProperty cache not synced is a failed read (`ExportFailed`, retried), never "no
property": the relay keeps its last known cluster ID, and the relay pods are never
rolled for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from dynamo_pool_operator.api.dgd import DCD_KIND, Pool
from dynamo_pool_operator.api.dgd import GROUP as DGD_GROUP
from dynamo_pool_operator.api.mcs import (
    ABOUT_GROUP,
    CLUSTER_ID_PROPERTY,
    MCS_GROUP,
    SERVICEEXPORTS,
    ClusterID,
    Confirmation,
    Implementation,
)
from dynamo_pool_operator.api.relay import Relay
from dynamo_pool_operator.pool.exports.plan import UNCONFIRMED_AFTER, ExportRules
from dynamo_pool_operator.pool.model import ExportInputs
from dynamo_pool_operator.runtime import CONTROLLER_UID_INDEX, Informer, errors
from dynamo_pool_operator.runtime.objects import Meta, Resource, controller_is, controller_of

log = logging.getLogger(__name__)


class ClusterIDUnreadable(errors.Reported):
    """The ClusterProperty cache is not synced: the cluster ID cannot be checked."""


@dataclass
class ExportCaches:
    exports: Informer
    #: None when the cluster ID check is off (karmada, or the About API not served).
    cluster_properties: Informer | None = None


def relevant_exports(
    relay: Relay,
    pool: Pool | None,
    lookup: Callable[[str], Mapping[str, Any] | None],
    controlled: Iterable[Mapping[str, Any]],
) -> dict[str, Mapping[str, Any]]:
    """The `exports` argument of `plan`: the exports this relay controls and those named
    like a wanted one. Nothing else can matter."""
    out: dict[str, Mapping[str, Any]] = {}
    for export in controlled:
        meta = Meta(export)  # read once: its namespace, then its name
        if meta.namespace == relay.namespace:
            out[meta.name] = export
    candidates = [relay.object_name]
    if pool is not None:
        candidates += pool.frontend_services
    for name in candidates:
        found = lookup(name)
        if found is not None:
            out[name] = found
    return out


Lookup = Callable[[str], Mapping[str, Any] | None]


def frontend_services(
    relay: Relay, pool: Pool | None, services: Lookup, component_deployments: Lookup | None
) -> tuple[dict[str, Mapping[str, Any]], dict[str, Mapping[str, Any]]]:
    """The `services` and `component_deployments` arguments of `plan`: the Services named
    like a frontend of the pool, and the cached DCDs those name as controller."""
    found: dict[str, Mapping[str, Any]] = {}
    dcds: dict[str, Mapping[str, Any]] = {}
    relay_service = relay.object_name
    for name in pool.frontend_services if pool is not None else ():
        service = services(name) if name != relay_service else None
        if service is None:
            continue
        found[name] = service
        ref = controller_of(service)
        if (
            ref is not None
            and component_deployments is not None
            and controller_is(ref, DGD_GROUP, DCD_KIND)
        ):
            dcd = component_deployments(str(ref.get("name", "")))
            if dcd is not None:
                dcds[Meta(dcd).name] = dcd
    return found, dcds


@dataclass
class FrontendCaches:
    """Where the frontends' Services are read, and the DCDs that control them (None
    while the cluster serves no DynamoComponentDeployment API)."""

    services: Informer
    component_deployments: Informer | None = None


class PoolExports:
    """The exports of an enabled MCS implementation: made only when one is."""

    def __init__(
        self,
        caches: ExportCaches | None,
        *,
        resource: Resource | None,
        implementation: Implementation,
        about_version: str | None,
        unconfirmed_after: timedelta = UNCONFIRMED_AFTER,
        confirmation: Confirmation = Confirmation.VALID,
        frontends: FrontendCaches | None = None,
        exported_annotations: tuple[tuple[str, str], ...] = (),
        exported_labels: tuple[tuple[str, str], ...] = (),
    ) -> None:
        #: None: no Service is read, so every frontend is taken to have none yet.
        self.frontends = frontends
        self.unconfirmed_after = unconfirmed_after
        self.confirmation = confirmation
        self.exported_annotations = exported_annotations
        self.exported_labels = exported_labels
        #: The ServiceExport version served whose cache has not synced, while no other
        #: is usable (set by `ExportApis`).
        self.listing: str | None = None
        self.implementation = implementation
        self.caches: ExportCaches | None = None
        self.resource: Resource | None = None
        self.about_version = ""
        self.use(caches, resource=resource, about_version=about_version)

    def use(
        self, caches: ExportCaches | None, *, resource: Resource | None, about_version: str | None
    ) -> None:
        """From now on read `caches` and write exports as `resource`; None for both while
        the ServiceExport API is not served. A pass reads them once, in `gather`."""
        if (caches is None) != (resource is None):
            raise ValueError("caches and resource are both set or both None")
        self.caches = caches
        self.resource = resource
        self.about_version = f"{ABOUT_GROUP}/{about_version}" if about_version else ""

    def unavailable_message(self) -> str:
        """What `Exported` says while no ServiceExport cache is usable: the API is served
        but its list has not completed, or it is not served."""
        if self.listing:
            return (
                f"multiCluster.mcsImplementation is {self.implementation.value!r} and the "
                f"cluster serves the {SERVICEEXPORTS}.{MCS_GROUP} API at {self.listing}, but "
                "its list has not completed yet, so nothing is exported: the list goes on "
                "(retried with backoff if it fails) and the exports are made once it "
                "completes; the operator log says why it is slow or refused"
            )
        return (
            f"multiCluster.mcsImplementation is {self.implementation.value!r} but the cluster "
            f"serves no {SERVICEEXPORTS}.{MCS_GROUP} API (v1alpha1 or v1beta1), so nothing is "
            "exported: install the Multi-Cluster Services API CRDs again (the exports are "
            'created within multiCluster.apiDiscoveryInterval), or set mcsImplementation to ""'
        )

    def _cluster_id(self, caches: ExportCaches) -> ClusterID:
        informer = caches.cluster_properties
        if informer is None:
            return ClusterID()
        if not informer.has_synced:
            raise ClusterIDUnreadable(
                f"cannot read ClusterProperty {CLUSTER_ID_PROPERTY}: its cache has not synced "
                "(see the operator log: is the ClusterProperty reader role bound?)"
            )
        return ClusterID(True, informer.store.get("", CLUSTER_ID_PROPERTY), self.about_version)

    def gather(self, relay: Relay, pool: Pool | None) -> ExportInputs:
        caches = self.caches
        if caches is None:
            return ExportInputs(exports_unavailable=self.unavailable_message())
        store = caches.exports.store
        exports = relevant_exports(
            relay,
            pool,
            lambda name: store.get(relay.namespace, name),
            store.by_index(CONTROLLER_UID_INDEX, relay.uid) if relay.uid else [],
        )
        services, dcds = self._frontend_services(relay, pool)
        try:
            cluster_id = self._cluster_id(caches)
        except ClusterIDUnreadable as e:
            return ExportInputs(
                exports,
                ClusterID(True, None, self.about_version, str(e)),
                (e,),
                services=services,
                component_deployments=dcds,
            )
        return ExportInputs(exports, cluster_id, services=services, component_deployments=dcds)

    def _frontend_services(
        self, relay: Relay, pool: Pool | None
    ) -> tuple[dict[str, Mapping[str, Any]], dict[str, Mapping[str, Any]]]:
        frontends = self.frontends
        if frontends is None:
            return {}, {}
        services = frontends.services.store
        dcd_cache = frontends.component_deployments
        dcds = dcd_cache.store if dcd_cache is not None else None
        return frontend_services(
            relay,
            pool,
            lambda name: services.get(relay.namespace, name),
            (lambda name: dcds.get(relay.namespace, name)) if dcds is not None else None,
        )

    @property
    def rules(self) -> ExportRules:
        """What the plan and the report of a pass follow, as the feature stands now."""
        return ExportRules(
            self.implementation,
            self.resource,
            self.about_version,
            self.unconfirmed_after,
            self.confirmation,
            self.exported_annotations,
            self.exported_labels,
        )
