"""What each object `discover` reads says, one at a time (pure: no I/O).

A slice: whether the router would list it (`is_import`), whether it may take it for an
import at all (`untrusted`: who wrote it), the Service and cluster it is of
(`source_of`), its endpoints, and (Karmada) the Work it came from. A ServiceImport:
whether its implementation says it writes no slices (`absent_imports`). `find` puts
these together into pools.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dynamo_pool_operator.api import mcs, names


class Mode(StrEnum):
    """Who imported the slices: a standard MCS implementation or Karmada."""

    MCS = "mcs"
    KARMADA = "karmada"
    #: Karmada's slices found by their `derived-<service>` name alone, as Karmada before
    #: v1.15.0 (v1.14.4, v1.13.7) writes them: without the manager the router selects on.
    KARMADA_DERIVED = "karmada-derived"


#: Karmada's first releases that label their collected slices with their manager.
KARMADA_LABELLED_SINCE = "v1.15.0, v1.14.4 and v1.13.7"


@dataclass(frozen=True, slots=True, order=True)
class Endpoint:
    address: str
    ready: bool

    def to_json(self) -> dict[str, Any]:
        return {"address": self.address, "ready": self.ready}


def as_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def endpoints_of(slice_: Mapping[str, Any]) -> list[Endpoint]:
    """Each address of the slice with its readiness. `ready` unset means ready (the
    EndpointSlice API: "nil should be interpreted as true")."""
    out: list[Endpoint] = []
    for ep in slice_.get("endpoints") or ():
        if not isinstance(ep, Mapping):
            continue
        ready = as_map(ep.get("conditions")).get("ready")
        for address in ep.get("addresses") or ():
            if isinstance(address, str) and address:
                out.append(Endpoint(address, ready is not False))
    return out


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_map(as_map(obj.get("metadata")).get("labels"))


def is_import(slice_: Mapping[str, Any], mode: Mode) -> bool:
    """Whether the router would read this slice at all (its list selector)."""
    labels = labels_of(slice_)
    if mode is Mode.KARMADA:
        return labels.get(names.SLICE_MANAGED_BY) == names.KARMADA_SLICE_MANAGER
    if mode is Mode.KARMADA_DERIVED:
        return (
            names.karmada_derived_service(as_str(labels.get(names.SLICE_SERVICE_NAME))) is not None
        )
    return names.MCS_SERVICE_NAME in labels


def untrusted(
    slice_: Mapping[str, Any], mode: Mode, implementation: mcs.Importer | None = None
) -> str:
    """Why the router must not take this slice for an import of whom it claims ("" when
    it may). Its labels prove nothing: Kubernetes' own controllers copy a Service's onto
    the slices they make. Its manager, which they always set to their own, does."""
    meta = as_map(slice_.get("metadata"))
    manager = as_str(labels_of(slice_).get(names.SLICE_MANAGED_BY))
    slice_name = f"EndpointSlice {as_str(meta.get('name'))}"
    if manager in mcs.KUBERNETES_SLICE_MANAGERS:
        return (
            f"{slice_name} is managed by {manager}: Kubernetes' own controllers copy a "
            "Service's (or an Endpoints') labels onto the slices they make, so anyone who "
            "may create a Service can make one carrying the import labels; an "
            "implementation's import never is"
        )
    if mode is Mode.KARMADA_DERIVED and manager:
        return (
            f"{slice_name} is managed by {manager}: Karmada before v1.15.0 sets no manager "
            f"on the slices it collects, and from then on {names.KARMADA_SLICE_MANAGER}"
        )
    if implementation is not None and manager != implementation.manager:
        return (
            f"{slice_name} is managed by {manager or 'no one (no managed-by label)'}, not "
            f"{implementation.manager}: not imported by {implementation.value} "
            f"(--implementation {implementation.value})"
        )
    return ""


def source_of(slice_: Mapping[str, Any], mode: Mode) -> tuple[str, str | None, str]:
    """(the imported Service's name, its source cluster or None, why there is none)."""
    meta = as_map(slice_.get("metadata"))
    labels, annotations = as_map(meta.get("labels")), as_map(meta.get("annotations"))
    slice_name = as_str(meta.get("name"))
    if mode is Mode.MCS:
        service = as_str(labels.get(names.MCS_SERVICE_NAME))
        cluster = as_str(labels.get(names.MCS_SOURCE_CLUSTER))
        if not cluster:
            return (
                service,
                None,
                f"EndpointSlice {slice_name} has no {names.MCS_SOURCE_CLUSTER} label: the "
                "router cannot tell which cluster it came from",
            )
        return service, cluster, ""
    label = as_str(labels.get(names.SLICE_SERVICE_NAME))
    derived = names.karmada_derived_service(label)
    if derived is None:
        return (
            label,
            None,
            f"EndpointSlice {slice_name} is Karmada's but labelled "
            f"{names.SLICE_SERVICE_NAME}={label!r}, not {names.KARMADA_DERIVED_PREFIX}<service>",
        )
    space = as_str(annotations.get(names.KARMADA_WORK_NAMESPACE))
    member = names.karmada_member(space)
    if member is None:
        return (
            derived,
            None,
            f"EndpointSlice {slice_name} has no {names.KARMADA_WORK_NAMESPACE} annotation "
            f"naming a {names.KARMADA_EXECUTION_SPACE_PREFIX}<member> namespace "
            f"({space or 'none'}): the router cannot tell which cluster it came from",
        )
    return derived, member, ""


def work_of(slice_: Mapping[str, Any]) -> str:
    annotations = as_map(as_map(slice_.get("metadata")).get("annotations"))
    space = as_str(annotations.get(names.KARMADA_WORK_NAMESPACE))
    name = as_str(annotations.get(names.KARMADA_WORK_NAME))
    return f"{space}/{name}" if space and name else ""


def live_works(works: Iterable[Mapping[str, Any]]) -> set[str]:
    out: set[str] = set()
    for work in works:
        meta = as_map(work.get("metadata"))
        if not meta.get("deletionTimestamp"):
            out.add(f"{as_str(meta.get('namespace'))}/{as_str(meta.get('name'))}")
    return out


def absent_imports(imports: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(namespace, Service) -> the exporting clusters named, of each ServiceImport whose
    implementation says it writes no EndpointSlices for it (mcs-api v0.5.1 and later)."""
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for imp in imports:
        status = as_map(imp.get("status"))
        if status.get("endpointSliceObjects") != mcs.SLICES_ABSENT:
            continue
        meta = as_map(imp.get("metadata"))
        clusters = (as_str(as_map(c).get("cluster")) for c in status.get("clusters") or ())
        key = (as_str(meta.get("namespace")), as_str(meta.get("name")))
        out[key] = tuple(sorted({c for c in clusters if c}))
    return out


NO_SLICES = (
    "the implementation writes no EndpointSlices for this import; the router cannot see it "
    f"(its ServiceImport says status.endpointSliceObjects: {mcs.SLICES_ABSENT})"
)
