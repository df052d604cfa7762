"""A read-model of the DynamoGraphDeployment: only what the operator decides on.

v1beta1's `spec.components[]` and v1alpha1's `spec.services{}` become one `Pool`, so the
plan never looks at raw objects. The parsers never raise: a DGD is someone else's object
and may hold anything its CRD admits; what cannot be a component is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from enum import StrEnum
from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.runtime.objects import is_map, record

GROUP = "nvidia.com"
PLURAL = "dynamographdeployments"
KIND = "DynamoGraphDeployment"
SUPPORTED_VERSIONS = ("v1beta1", "v1alpha1")  # preference order

#: What Dynamo's operator makes of each component off the Grove path; it controls the
#: component's Service there (on the Grove path the DGD controls it itself).
DCD_KIND = "DynamoComponentDeployment"
DCD_PLURAL = "dynamocomponentdeployments"
#: Read as stubs (identity and controller only), so any served version reads alike.
DCD_VERSIONS = ("v1beta1", "v1alpha1")  # preference order

DISCOVERY_BACKEND_ANNOTATION = "nvidia.com/dynamo-discovery-backend"


class DiscoveryBackend(StrEnum):
    """How Dynamo's components find each other (the DGD annotation's values)."""

    KUBERNETES = "kubernetes"  # Kubernetes pod discovery: the one a pool needs
    ETCD = "etcd"


KUBERNETES_DISCOVERY = DiscoveryBackend.KUBERNETES

FRONTEND = "frontend"
WORKER_TYPES = frozenset({"worker", "prefill", "decode"})


@record
class Component:
    """One component of a DGD as the operator sees it."""

    name: str
    type: str | None
    global_dynamo_namespace: bool = False

    @property
    def is_worker(self) -> bool:
        return self.type in WORKER_TYPES

    @property
    def is_frontend(self) -> bool:
        return self.type == FRONTEND


@record
class Pool:
    """A DGD reduced to the facts that decide publication and exports."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    api_version: str
    terminating: bool
    annotations: Mapping[str, str] = field(default_factory=dict)
    components: tuple[Component, ...] = ()
    #: Service names of the frontends, in component order, without duplicates (two
    #: components may normalize alike). Derived once, when decoded.
    frontend_services: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        seen: dict[str, None] = {}
        for c in self.components:
            if c.is_frontend:
                seen.setdefault(names.component_service_name(self.name, c.name), None)
        object.__setattr__(self, "frontend_services", tuple(seen))

    def discovery_backend(self, default: str) -> str:
        """The annotation wins whatever its value; otherwise the operator default."""
        return self.annotations.get(DISCOVERY_BACKEND_ANNOTATION, default)

    @property
    def workers(self) -> tuple[Component, ...]:
        return tuple(c for c in self.components if c.is_worker)

    @property
    def frontends(self) -> tuple[Component, ...]:
        return tuple(c for c in self.components if c.is_frontend)

    @property
    def uses_global_namespace(self) -> bool:
        return any(c.global_dynamo_namespace for c in self.components)

    @property
    def dynamo_namespace(self) -> str:
        return names.dynamo_namespace(self.namespace, self.name)

    def reference(self) -> dict[str, Any]:
        """An object reference at the resourceVersion read (for Events' `related`)."""
        return {
            "apiVersion": self.api_version,
            "kind": KIND,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "resourceVersion": self.resource_version,
        }


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _components_v1beta1(spec: Mapping[str, Any]) -> tuple[Component, ...]:
    out = []
    raw = spec.get("components")
    for entry in raw if isinstance(raw, list) else ():
        if not is_map(entry):
            continue
        name = _str(entry.get("name"))
        if not name:
            continue
        out.append(
            Component(
                name=name,
                type=_str(entry.get("type")),
                global_dynamo_namespace=entry.get("globalDynamoNamespace") is True,
            )
        )
    return tuple(out)


def _components_v1alpha1(spec: Mapping[str, Any]) -> tuple[Component, ...]:
    """v1alpha1: the map key is the component name; `subComponentType` (prefill,
    decode) refines a `componentType` of worker, as the alpha API used it."""
    out = []
    raw = spec.get("services")
    for name, entry in raw.items() if is_map(raw) else ():
        if not isinstance(name, str) or not name or not is_map(entry):
            continue
        ctype = _str(entry.get("componentType"))
        sub = _str(entry.get("subComponentType"))
        if sub in WORKER_TYPES:
            ctype = sub
        out.append(
            Component(
                name=name,
                type=ctype,
                global_dynamo_namespace=entry.get("globalDynamoNamespace") is True,
            )
        )
    return tuple(out)


def pool_from_object(obj: Mapping[str, Any]) -> Pool:
    """Read a DGD object of either served version into a `Pool`."""
    meta = obj.get("metadata")
    meta = meta if is_map(meta) else {}
    spec = obj.get("spec")
    spec = spec if is_map(spec) else {}
    api_version = _str(obj.get("apiVersion")) or f"{GROUP}/v1beta1"
    if api_version.endswith("/v1alpha1"):
        components = _components_v1alpha1(spec)
    else:
        components = _components_v1beta1(spec)
    annotations = meta.get("annotations")
    # Read untyped: an object made by hand may hold a key or value of any type, and each
    # is checked below.
    annotated: Any = annotations.items() if is_map(annotations) else ()
    return Pool(
        namespace=_str(meta.get("namespace")) or "",
        name=_str(meta.get("name")) or "",
        uid=_str(meta.get("uid")) or "",
        resource_version=_str(meta.get("resourceVersion")) or "",
        api_version=api_version,
        terminating=bool(meta.get("deletionTimestamp")),
        annotations={k: v for k, v in annotated if isinstance(k, str) and isinstance(v, str)},
        components=components,
    )


def pools_naming_service(
    service: str, dgd_named: Callable[[str], Mapping[str, Any] | None]
) -> list[str]:
    """The DGDs, by name, whose pool has a frontend Service called `service`: D in
    `<D>-<component>` has no dot, so it is one of the name's prefixes before a dash,
    each read by name (no index of DGDs by Service needed)."""
    out: list[str] = []
    for cut in (i for i, ch in enumerate(service) if ch == "-"):
        dgd = dgd_named(service[:cut])
        if dgd is not None and service in pool_from_object(dgd).frontend_services:
            out.append(service[:cut])
    return out
