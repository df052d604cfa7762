"""Publish or withdraw a pool's relay: a pure function of cached state (SPEC §3).

Precedence, first match wins. It runs from "is there anything to publish at all"
to "may we write our objects", so the reason shown is the one to fix first:

0. `RelayTerminating` — the relay itself is being deleted (held by a finalizer):
   nothing of its pool may stay published while it goes.
1. `InvalidConfiguration` — the relay's own name or spec is unusable; nothing
   else matters until the relay itself is fixed.
2. `DGDNotFound`, then `DGDTerminating` — there is no pool (or it is going away).
3. `KubernetesDiscoveryDisabled`, `NoWorkers`, `GlobalDynamoNamespace` — the
   DGD exists but cannot be a pool, in the order a user would fix its spec.
4. `OwnershipConflict` — the pool is fine, but a Deployment or Service with the
   relay's name belongs to someone else; we never adopt, so we stand back.

Only when none applies is the relay published.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..api import names
from ..api.dgd import DISCOVERY_BACKEND_ANNOTATION, KUBERNETES_DISCOVERY, Pool
from ..api.relay import Relay


class Reason(StrEnum):
    """The `Ready` condition's reason: why a relay is (not) published."""

    PUBLISHED = "Published"
    RELAY_TERMINATING = "RelayTerminating"
    INVALID_CONFIGURATION = "InvalidConfiguration"
    DGD_NOT_FOUND = "DGDNotFound"
    DGD_TERMINATING = "DGDTerminating"
    KUBERNETES_DISCOVERY_DISABLED = "KubernetesDiscoveryDisabled"
    NO_WORKERS = "NoWorkers"
    GLOBAL_DYNAMO_NAMESPACE = "GlobalDynamoNamespace"
    OWNERSHIP_CONFLICT = "OwnershipConflict"


@dataclass(frozen=True, slots=True)
class Decision:
    """Publish (reason `Published`) or withdraw with exactly one reason."""

    reason: Reason
    message: str

    @property
    def publish(self) -> bool:
        return self.reason is Reason.PUBLISHED


def controlled_by(obj: Mapping[str, Any], uid: str) -> bool:
    """True when `obj`'s controller reference points at the object with `uid`."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    return any(
        isinstance(r, Mapping) and r.get("controller") is True and r.get("uid") == uid
        for r in (refs if isinstance(refs, list) else ())
    )


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The controller owner reference of `obj`, if any."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    for r in refs if isinstance(refs, list) else ():
        if isinstance(r, Mapping) and r.get("controller") is True:
            return r
    return None


def _describe_controller(obj: Mapping[str, Any]) -> str:
    ref = controller_of(obj)
    if ref is None:
        return "no controller"
    return f"controller {ref.get('kind', '?')}/{ref.get('name', '?')}"


def decide(
    relay: Relay,
    pool: Pool | None,
    relay_objects: Mapping[str, Mapping[str, Any] | None],
    *,
    default_discovery_backend: str,
) -> Decision:
    """Decide for `relay` given its pool (None when the DGD is absent) and the cached
    objects named `<name>-pool-relay` keyed by kind ("Deployment", "Service")."""
    if relay.terminating:
        return Decision(
            Reason.RELAY_TERMINATING,
            "the DynamoPoolRelay is being deleted; its pool is withdrawn (a finalizer "
            "holds it: the deletion completes when that finalizer is removed)",
        )
    relay_name = names.relay_name(relay.name)
    name_problems = names.dns1035_label_errors(relay_name)
    if name_problems:
        return Decision(
            Reason.INVALID_CONFIGURATION,
            f"the relay Service name {relay_name!r} is not a valid Service name: "
            f"{'; '.join(name_problems)}. Name the DynamoPoolRelay (and its DGD) with at most "
            f"{names.DNS1035_MAX - len(names.RELAY_SUFFIX)} lower-case letters, digits or '-'",
        )
    if relay.problems:
        return Decision(Reason.INVALID_CONFIGURATION, "; ".join(relay.problems))
    if pool is None:
        return Decision(
            Reason.DGD_NOT_FOUND,
            f"no DynamoGraphDeployment {relay.name!r} in namespace {relay.namespace!r}",
        )
    if pool.terminating:
        return Decision(
            Reason.DGD_TERMINATING, f"DynamoGraphDeployment {pool.name!r} is being deleted"
        )
    backend = pool.discovery_backend(default_discovery_backend)
    if backend != KUBERNETES_DISCOVERY:
        return Decision(
            Reason.KUBERNETES_DISCOVERY_DISABLED,
            f"the DGD's discovery backend is {backend!r}; a pool needs Kubernetes pod "
            f"discovery: set the DGD annotation {DISCOVERY_BACKEND_ANNOTATION}="
            f"{KUBERNETES_DISCOVERY!r} (or remove it if the operator's discovery.backend is "
            f"{KUBERNETES_DISCOVERY!r})",
        )
    if not pool.workers:
        return Decision(
            Reason.NO_WORKERS,
            "the DGD has no worker component (type worker, prefill or decode)",
        )
    if pool.uses_global_namespace:
        shared = [c.name for c in pool.components if c.global_dynamo_namespace]
        return Decision(
            Reason.GLOBAL_DYNAMO_NAMESPACE,
            f"components {shared} use the shared global Dynamo namespace "
            f"{names.GLOBAL_DYNAMO_NAMESPACE!r}; a pool needs its own Dynamo namespace",
        )
    conflicts = [
        f"{kind} {relay_name!r} has {_describe_controller(obj)}"
        for kind, obj in sorted(relay_objects.items())
        if obj is not None and not controlled_by(obj, relay.uid)
    ]
    if conflicts:
        return Decision(
            Reason.OWNERSHIP_CONFLICT,
            "; ".join(conflicts)
            + ": the operator never adopts objects; delete the other object, or use "
            "another name for the DynamoPoolRelay and its DGD",
        )
    return Decision(Reason.PUBLISHED, f"relay Service {relay_name!r} is published")
