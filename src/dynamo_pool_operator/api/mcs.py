"""The Multi-Cluster Services API and the About API, as this operator names them: every
external name of the export feature, the implementations it exports for, who writes an
import's EndpointSlices, and `ClusterID`, the read model of the cluster's ID property.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.runtime.objects import Meta, Resource, is_map, record

MCS_GROUP = "multicluster.x-k8s.io"
SERVICEEXPORTS = "serviceexports"
SERVICEEXPORT_KIND = "ServiceExport"
#: Preference order: the newest first.
SERVICEEXPORT_VERSIONS = ("v1beta1", "v1alpha1")


class ExportCondition(StrEnum):
    """The conditions KEP-1645 lets an MCS implementation write on a ServiceExport."""

    VALID = "Valid"
    READY = "Ready"
    CONFLICT = "Conflict"


#: `Ready=False` reasons implementations write that mean "not yet", not "no"
#: (Lighthouse's `AwaitingExport`, ...).
WAITING_REASONS = frozenset({"AwaitingExport", "AwaitingSync", "Pending", "Exporting"})

SERVICEIMPORTS = "serviceimports"
SERVICEIMPORT_KIND = "ServiceImport"
#: The same releases serve both kinds at the same versions.
SERVICEIMPORT_VERSIONS = SERVICEEXPORT_VERSIONS
#: `ServiceImport.status.endpointSliceObjects` (mcs-api v0.5.1+): `Absent` means no
#: EndpointSlices for the import, so a router that reads slices cannot see it.
SLICES_ABSENT = "Absent"


class Importer(StrEnum):
    """An implementation that writes the imported EndpointSlices a router reads, by the
    name `discover --implementation` takes; `manager` is the `managed-by` it sets on them,
    the only proof a slice is its (see `KUBERNETES_SLICE_MANAGERS`)."""

    #: Submariner Lighthouse (submariner-io/lighthouse, seen here on the real agent).
    LIGHTHOUSE = "lighthouse"
    #: Cilium ClusterMesh MCS-API (cilium/cilium, its endpointslice mesh controller).
    CILIUM = "cilium"
    #: Karmada's collector, on its control plane (karmada-io/karmada, from v1.15.0).
    KARMADA = "karmada"

    @property
    def manager(self) -> str:
        return _SLICE_MANAGERS[self]


#: The API group an implementation's own CRDs are served in: where a cluster shows it runs.
IMPORTER_GROUPS = {
    Importer.LIGHTHOUSE: "lighthouse.submariner.io",
    Importer.CILIUM: "cilium.io",
    Importer.KARMADA: "work.karmada.io",
}
#: Cilium syncs the EndpointSlices of a ClusterIP import only with this annotation
#: "true", put on it through the export's `spec.exportedAnnotations`.
CILIUM_SYNC_SLICES = "service.cilium.io/global-sync-endpoint-slices"


_SLICE_MANAGERS = {
    Importer.LIGHTHOUSE: "lighthouse-agent.submariner.io",
    Importer.CILIUM: "endpointslice-mesh-controller.cilium.io",
    Importer.KARMADA: names.KARMADA_SLICE_MANAGER,
}

#: Kubernetes' own EndpointSlice controllers, which copy a Service's labels onto its
#: slices (but the reserved ones): anyone who may create a Service can have a slice carry
#: the MCS import labels, but never one that claims another manager.
KUBERNETES_SLICE_MANAGERS = frozenset(
    {"endpointslice-controller.k8s.io", "endpointslicemirroring-controller.k8s.io"}
)

ABOUT_GROUP = "about.k8s.io"
CLUSTERPROPERTIES = "clusterproperties"
CLUSTERPROPERTY_KIND = "ClusterProperty"
ABOUT_VERSIONS = ("v1beta1", "v1alpha1")
#: The property holding this cluster's ID in its ClusterSet (KEP-2149).
CLUSTER_ID_PROPERTY = "cluster.clusterset.k8s.io"


class Confirmation(StrEnum):
    """`multiCluster.confirmation`: what the implementation must write on an export before
    the pool counts as exported (a refusal or conflict is read at every level)."""

    #: By the implementation: `valid` with `mcs`, `none` with `karmada`.
    DEFAULT = ""
    #: `Ready=True`: the export reached the ClusterSet (Lighthouse, Cilium write it).
    READY = "ready"
    #: `Valid=True` (or `Ready=True`), nothing refusing it: all that write conditions
    #: write `Valid`; Antrea writes nothing else.
    VALID = "valid"
    #: Karmada, AWS Cloud Map and Clusternet write no condition.
    NONE = "none"

    @classmethod
    def _missing_(cls, value: object) -> Confirmation | None:
        return cls.READY if value in CONFIRMATION_ALIASES else None


#: Earlier names of a level, still accepted in the configuration.
CONFIRMATION_ALIASES = {"required": Confirmation.READY}


class Implementation(StrEnum):
    """`multiCluster.mcsImplementation`: who reads our ServiceExports."""

    NONE = ""  # export nothing
    MCS = "mcs"  # a standard MCS implementation (Lighthouse, Cilium, ...)
    KARMADA = "karmada"

    def confirmation(self, configured: Confirmation) -> Confirmation:
        """The configured rule, else this implementation's default: `none` for Karmada,
        `valid` for the standard ones (all write `Valid`, only some `Ready`)."""
        if configured is not Confirmation.DEFAULT:
            return configured
        return Confirmation.NONE if self is Implementation.KARMADA else Confirmation.VALID

    @property
    def checks_cluster_id(self) -> bool:
        """The cluster ID is an About API notion: only standard MCS has it."""
        return self is Implementation.MCS


def serviceexports(version: str) -> Resource:
    return Resource(MCS_GROUP, version, SERVICEEXPORTS, SERVICEEXPORT_KIND)


def serviceimports(version: str) -> Resource:
    return Resource(MCS_GROUP, version, SERVICEIMPORTS, SERVICEIMPORT_KIND)


def clusterproperties(version: str) -> Resource:
    return Resource(ABOUT_GROUP, version, CLUSTERPROPERTIES, CLUSTERPROPERTY_KIND, namespaced=False)


@record
class ClusterID:
    """The cluster's ID property as read: `checked` when the check runs, with the object
    (None when absent), or `unreadable` (its cache has not synced: unknown, not empty)."""

    checked: bool = False
    obj: Mapping[str, Any] | None = None
    api_version: str = ""
    unreadable: str = ""

    @property
    def value(self) -> str:
        spec = (self.obj or {}).get("spec")
        value = spec.get("value") if is_map(spec) else None
        return value if isinstance(value, str) else ""

    def effective(self, spec_cluster_id: str, last_known: object = None) -> str | None:
        """The relay's effective cluster ID: its spec.clusterId, else the cluster's own, else
        empty; while the property cannot be read, `last_known` (its status's), or None."""
        if spec_cluster_id:
            return spec_cluster_id
        if not self.checked:
            return ""
        if self.unreadable:
            return last_known if isinstance(last_known, str) else None
        return self.value

    def reference(self) -> dict[str, Any]:
        """The property as an Event's related object, at the resourceVersion read."""
        meta = Meta(self.obj)
        ref = {
            "apiVersion": self.api_version,
            "kind": CLUSTERPROPERTY_KIND,
            "name": CLUSTER_ID_PROPERTY,
        }
        for key, value in (("uid", meta.uid), ("resourceVersion", meta.resource_version)):
            if value:
                ref[key] = value
        return ref
