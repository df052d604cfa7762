"""Would a server-side apply change anything? Decided from the cache, without a request.

The audit log counts a no-op apply as a write, and a controller that applies on
every reconcile costs one request per object per resync. So a reconciler applies
only when `needs_apply` says so:

* the live object lacks a field we set, or holds another value there (someone
  edited a field we own, and the apply will take it back); or
* our intent changed since the last apply, which the live object cannot show
  when we *stopped* setting a field: a hash of the rendered intent, stored in an
  annotation by the apply itself, catches that.

Fields others set are ignored: an apply does not remove them either.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

#: List elements are matched by the first of these keys they carry (as SSA's
#: list-map keys do for the lists we render: containers, env, ports, ownerReferences).
_MERGE_KEYS = ("uid", "name", "containerPort", "port")


def render_hash(obj: Mapping[str, Any]) -> str:
    """A short stable hash of a rendered object (keys sorted)."""
    return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


_SCALARS = frozenset({str, int, bool, float, type(None)})


def _omitted(value: Any) -> bool:
    """Empty strings, lists and maps are dropped by the server (Go's `omitempty`), so
    desiring one matches a missing field. False and 0 are not: they are often
    pointers the server keeps."""
    return value is None or (isinstance(value, str | list | dict) and len(value) == 0)


def _key(item: Any) -> tuple[str, Any] | None:
    if isinstance(item, Mapping):
        for k in _MERGE_KEYS:
            if k in item:
                return (k, item[k])
    return None


def contains(
    live: Any, desired: Any, *, skip: frozenset[str] = frozenset(), path: str = ""
) -> bool:
    """True when every field of `desired` is present in `live` with the same value.

    `skip` names dotted paths (e.g. "spec.template.spec.containers.resources") whose
    values the server normalizes (quantities), so they are left to the hash.
    """
    if path in skip:
        return True
    # Scalars first, by exact type: most leaves are str/int/bool, and the ABC checks
    # below cost most of a no-op reconcile (profiled in docs/performance.md).
    if type(desired) in _SCALARS:
        return bool(live == desired)
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return False
        return all(
            contains(live[k], v, skip=skip, path=f"{path}.{k}" if path else k)
            if k in live
            else _omitted(v)
            for k, v in desired.items()
        )
    if isinstance(desired, Sequence) and not isinstance(desired, str | bytes):
        if not isinstance(live, Sequence) or isinstance(live, str | bytes):
            return False
        keyed = [_key(d) for d in desired]
        if all(k is not None for k in keyed):
            by_key = {_key(item): item for item in live}
            return all(
                k in by_key and contains(by_key[k], d, skip=skip, path=path)
                for k, d in zip(keyed, desired, strict=True)
            )
        if len(live) != len(desired):
            return False
        return all(
            contains(li, d, skip=skip, path=path) for li, d in zip(live, desired, strict=True)
        )
    return bool(live == desired)


def needs_apply(
    live: Mapping[str, Any] | None,
    desired: Mapping[str, Any],
    *,
    skip: frozenset[str] = frozenset(),
) -> bool:
    """True when applying `desired` (made by `with_hash`) would change `live`."""
    if live is None:
        return True
    return not contains(live, desired, skip=skip)


def with_hash(obj: dict[str, Any], hash_annotation: str) -> dict[str, Any]:
    """`obj` with the hash of itself (without the annotation) in `hash_annotation`."""
    meta = obj.setdefault("metadata", {})
    annotations = meta.setdefault("annotations", {})
    annotations.pop(hash_annotation, None)
    annotations[hash_annotation] = render_hash(obj)
    return obj
