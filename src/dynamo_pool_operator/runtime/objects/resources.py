"""Resource descriptors: which URL a kind of object lives at.

A `Resource` is resolved once (from discovery or a constant) and then passed to
every client call, so no call site builds URLs or guesses a plural.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Resource:
    """A served group/version/resource, with the kind and scope the URL needs."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """`apiVersion` as written in objects (`v1` for the core group)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """`plural.group` as RBAC and error messages name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The URL path for a collection (no name) or one object."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base

    def at_version(self, version: str) -> Resource:
        """The same resource at another served version."""
        return Resource(self.group, version, self.plural, self.kind, self.namespaced)

    def reference(self, obj: dict[str, Any]) -> dict[str, Any]:
        """An object reference (as Events' `regarding`/`related` use) at the RV read."""
        meta = obj.get("metadata", {})
        ref: dict[str, Any] = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": meta.get("name", ""),
        }
        ref.update((k, meta[k]) for k in ("namespace", "uid", "resourceVersion") if meta.get(k))
        return ref


# Core and built-in resources the operator and its tests use.
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
SERVICES = Resource("", "v1", "services", "Service")
SECRETS = Resource("", "v1", "secrets", "Secret")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
EVENTS = Resource("events.k8s.io", "v1", "events", "Event")
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
