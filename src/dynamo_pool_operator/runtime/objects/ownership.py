"""Who controls an object: the one place that reads owner references.

Kubernetes marks at most one owner reference of an object `controller: true`; that
owner is the object's controller. Every "is this ours?" question of the operator —
deciding, planning, the feature-off cleanup, the cache index by controller, the
watch mappers — asks here, so there is one reading of a malformed reference (not a
list, not a mapping, `controller` not exactly `true`: not a controller).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The controller owner reference of `obj`, if any (None for a malformed object)."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def is_controlled_by(obj: Mapping[str, Any], uid: str) -> bool:
    """True when `obj`'s controller is the object with `uid` (a non-empty uid)."""
    ref = controller_of(obj)
    return bool(uid) and ref is not None and ref.get("uid") == uid


def controller_is(ref: Mapping[str, Any] | None, group: str, kind: str) -> bool:
    """True when the reference names a `kind` of API `group` (any version)."""
    if not ref or ref.get("kind") != kind:
        return False
    api = str(ref.get("apiVersion", ""))
    return (api.split("/")[0] if "/" in api else "") == group


def describe_controller(obj: Mapping[str, Any]) -> str:
    """`controller Kind/name`, or `no controller`: for messages about an object."""
    ref = controller_of(obj)
    if ref is None:
        return "no controller"
    return f"controller {ref.get('kind', '?')}/{ref.get('name', '?')}"
