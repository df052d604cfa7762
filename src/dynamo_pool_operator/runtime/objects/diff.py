"""Would a server-side apply change anything? Decided from the cache, without a request.

The audit log counts a no-op apply as a write, and a controller that applies on
every reconcile costs one request per object per resync. So a reconciler applies
only when `needs_apply` says so:

* the live object lacks a field we set, or holds another value there (someone
  edited a field we own, and the apply will take it back); or
* our intent changed since the last apply, which the live object cannot show
  when we *stopped* setting a field: a hash of the rendered intent, stored in an
  annotation by the apply itself, catches that.

Fields others set are ignored: an apply does not remove them either. Quantities
(`resources.limits`, `requests`) are compared by value: the server keeps `1000m` as
`1`, and that is no drift, while `64` for our `500m` is.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from dynamo_pool_operator.runtime.objects import quantity

#: List elements are matched by the first of these keys they carry (as SSA's
#: list-map keys do for the lists we render: containers, env, ports, ownerReferences).
_MERGE_KEYS = ("uid", "name", "containerPort", "port")


def render_hash(obj: Mapping[str, Any]) -> str:
    """A short stable hash of a rendered object (keys sorted)."""
    return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


_SCALARS = frozenset({str, int, bool, float, type(None)})


def omitted(value: Any) -> bool:
    """Empty strings, lists and maps are dropped by the server (Go's `omitempty`), so
    desiring one matches a missing field. False and 0 are not: they are often
    pointers the server keeps."""
    return value is None or (isinstance(value, str | list | dict) and len(value) == 0)


def key_of(item: Any) -> tuple[str, Any] | None:
    """The merge key of a list element (the first of `_MERGE_KEYS` it carries)."""
    if type(item) is dict or isinstance(item, Mapping):
        for k in _MERGE_KEYS:
            if k in item:
                return (k, item[k])
    return None


def contains(
    live: Any, desired: Any, *, quantities: frozenset[str] = frozenset(), path: str = ""
) -> bool:
    """True when every field of `desired` is present in `live` with the same value.

    `quantities` names dotted paths (e.g. "spec.template.spec.containers.resources.limits")
    of maps whose values are Kubernetes quantities, compared by value
    (`runtime/objects/quantity.py`): the server keeps each in its canonical form. `path` is
    where `live` and `desired` are (dotted from the root, list elements left out).

    This runs for every owned object on every reconcile, so it is written for speed
    (it was most of a no-op reconcile's CPU; docs/performance.md): an equal subtree is
    settled by one C-level `==` (most of a converged object is), `dict` and `list`
    are told by exact type before the ABC checks, and dotted paths are built only on
    the way to a quantity path, not for every field.
    """
    if not quantities:
        return _contains(live, desired)
    return _contains_at(live, desired, quantities, _prefixes(quantities), path)


@functools.lru_cache(maxsize=64)
def _prefixes(paths: frozenset[str]) -> frozenset[str]:
    """Every dotted path that leads to one of `paths` ("a", "a.b" for "a.b.c")."""
    out: set[str] = set()
    for p in paths:
        parts = p.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return frozenset(out)


def _contains(live: Any, desired: Any) -> bool:
    if live == desired:
        return True
    t = type(desired)
    if t in _SCALARS:
        return False
    if t is dict or isinstance(desired, Mapping):
        if type(live) is not dict and not isinstance(live, Mapping):
            return False
        for k, v in desired.items():
            if k in live:
                if not _contains(live[k], v):
                    return False
            elif not omitted(v):
                return False
        return True
    if t is list or (isinstance(desired, Sequence) and not isinstance(desired, str | bytes)):
        if type(live) is not list and (
            not isinstance(live, Sequence) or isinstance(live, str | bytes)
        ):
            return False
        keyed = [key_of(d) for d in desired]
        if all(k is not None for k in keyed):
            by_key = {key_of(item): item for item in live}
            return all(
                k in by_key and _contains(by_key[k], d) for k, d in zip(keyed, desired, strict=True)
            )
        if len(live) != len(desired):
            return False
        return all(_contains(li, d) for li, d in zip(live, desired, strict=True))
    return False  # another type, and not equal


def _same_quantities(live: Any, desired: Any) -> bool:
    """`_contains` of a map of quantities: each desired one in `live`, equal in value."""
    if not isinstance(desired, Mapping):
        return _contains(live, desired)
    if not isinstance(live, Mapping):
        return False
    for k, v in desired.items():
        if k in live:
            if not quantity.equal(live[k], v):
                return False
        elif not omitted(v):
            return False
    return True


def _contains_at(
    live: Any, desired: Any, quantities: frozenset[str], prefixes: frozenset[str], path: str
) -> bool:
    """`_contains` on the way to a quantity path: the only place paths are built."""
    if path in quantities:
        return _same_quantities(live, desired)
    if path not in prefixes and path:
        return _contains(live, desired)
    if live == desired:
        return True
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return False
        for k, v in desired.items():
            if k in live:
                child = f"{path}.{k}" if path else k
                if not _contains_at(live[k], v, quantities, prefixes, child):
                    return False
            elif not omitted(v):
                return False
        return True
    if isinstance(desired, Sequence) and not isinstance(desired, str | bytes):
        if not isinstance(live, Sequence) or isinstance(live, str | bytes):
            return False
        keyed = [key_of(d) for d in desired]
        if all(k is not None for k in keyed):
            by_key = {key_of(item): item for item in live}
            return all(
                k in by_key and _contains_at(by_key[k], d, quantities, prefixes, path)
                for k, d in zip(keyed, desired, strict=True)
            )
        if len(live) != len(desired):
            return False
        return all(
            _contains_at(li, d, quantities, prefixes, path)
            for li, d in zip(live, desired, strict=True)
        )
    return False


def needs_apply(
    live: Mapping[str, Any] | None,
    desired: Mapping[str, Any],
    *,
    quantities: frozenset[str] = frozenset(),
) -> bool:
    """True when applying `desired` (made by `with_hash`) would change `live`."""
    if live is None:
        return True
    return not contains(live, desired, quantities=quantities)


def with_hash(obj: dict[str, Any], hash_annotation: str) -> dict[str, Any]:
    """`obj` with the hash of itself (without the annotation) in `hash_annotation`."""
    meta = obj.setdefault("metadata", {})
    annotations = meta.setdefault("annotations", {})
    annotations.pop(hash_annotation, None)
    annotations[hash_annotation] = render_hash(obj)
    return obj
