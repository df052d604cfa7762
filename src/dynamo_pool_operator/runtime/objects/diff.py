"""Would a server-side apply change anything? Decided from the cache, without a request.

A no-op apply is still a write (audited, and one per object per resync), so apply only
when the live object lacks or differs in a field we set, or our intent changed in a way
it cannot show (a field we stopped setting: a hash of the intent, in an annotation the
apply writes). Others' fields are ignored; quantities compare by value (`1000m` is `1`).
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
from collections.abc import Mapping, Sequence
from decimal import (
    MAX_EMAX,
    MIN_EMIN,
    ROUND_UP,
    Context,
    Decimal,
    DecimalException,
    Inexact,
    InvalidOperation,
    Overflow,
    Rounded,
)
from typing import Any

import orjson

from dynamo_pool_operator.runtime.objects.record import record

# Kubernetes resource quantities (`resource.Quantity`): their value. Pure.
#
# The API server keeps a quantity in canonical form (`1000m` as `1`, `1024Mi` as `1Gi`,
# `2` as `"2"`), so quantities are compared by value (`equal_quantities`), as
# `resource.ParseQuantity` reads them: a signed decimal, then binary SI, decimal SI or a
# decimal exponent (read as an int64, kept as an int32), rounded up to a whole nano, a
# binary-SI value capped at the largest int64. Exact arithmetic only: a value too long
# to compute exactly is no quantity here (and is compared as written).

_GRAMMAR = re.compile(
    r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?[0-9]+))?"
)
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_INT64 = 2**63
_MAX_BINARY = Decimal(_INT64 - 1)
_NANO = Decimal("1e-9")
#: Exact or nothing: any rounding raises (the nano rounding is asked for explicitly).
_EXACT = Context(
    prec=1000, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[InvalidOperation, Overflow, Inexact, Rounded]
)
_ROUNDING = Context(prec=1000, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[InvalidOperation, Overflow])


def _int32(exponent: int) -> int:
    """Go's `int32(x)` of an int64: the low 32 bits, signed."""
    return (exponent + 2**31) % 2**32 - 2**31


def parse_quantity(raw: object) -> Decimal | None:
    """The value of the quantity `raw` (`"100m"` is 0.1, `"1Gi"` is 2**30, an int is
    itself), or None when `raw` is not one."""
    if type(raw) is int:
        return Decimal(raw)
    if type(raw) is not str:
        return None  # bool, float, None, ...: not a quantity in an int-or-string field
    match = _GRAMMAR.fullmatch(raw)
    if match is None:
        return None
    number, suffix, exponent = match.groups()
    try:
        value = Decimal(number)
        if suffix in _BINARY:
            value = _EXACT.multiply(value, Decimal(1024) ** _BINARY[suffix])
            if abs(value) > _MAX_BINARY:
                value = _MAX_BINARY.copy_sign(value)
        else:
            if exponent is not None:
                power = int(exponent)
                if not -_INT64 <= power < _INT64:
                    return None  # Go's ParseInt refuses it
                power = _int32(power)
            else:
                power = _DECIMAL[suffix or ""]
            value = value.scaleb(power, _EXACT)
        exp = value.as_tuple().exponent
        if isinstance(exp, int) and exp < -9:
            value = value.quantize(_NANO, rounding=ROUND_UP, context=_ROUNDING)
    except DecimalException:
        return None
    return value


def equal_quantities(a: object, b: object) -> bool:
    """Do `a` and `b` hold the same quantity? Values that are not quantities are compared
    as they are (and of the same type: `True` is no `1`)."""
    if type(a) is type(b) and a == b:
        return True
    x, y = parse_quantity(a), parse_quantity(b)
    return x is not None and y is not None and x == y


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

    `quantities`: dotted paths of maps of quantities, compared by value; `path`: where
    `live` and `desired` are (list elements left out). It ran most of a no-op pass's CPU
    (docs/performance.md), hence the fast path: one C-level `==` settles an equal
    subtree, exact types before ABCs, paths built only on the way to a quantity path.
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
            if not equal_quantities(live[k], v):
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


# Drift detection from a digest: what a cache keeps of an object we own.
#
# A whole cached relay Deployment is ~13 kB of Python objects (mostly the pod template
# and server defaults) for a question about a few dozen fields. So the cache keeps a
# `View` (`Shape.view`, in the informer's transform), made by a `Shape` of a rendered
# sample, which splits a render into:
#
# - **closed** fields: in every render, at paths independent of the input. The view
#   keeps a digest of the live values at exactly those paths (others' additions left
#   out), which equals the render's digest exactly when `contains` would hold for them;
# - **open** fields: paths whose keys vary or that a render may leave out (owner
#   references, pod labels, tolerations, `resources`, `clusterIP`), kept verbatim and
#   compared with `contains` (another manager's key beside ours is no drift). An open
#   string equal to the sample's is held as the sample's, so what is shared is bounded.
#
# So `Shape.drifted(view, body)` is `not contains(live, body, quantities=...)` for every
# render whose closed fields are the sample's (tests/shapes.py checks every relay kind's).

#: Where a trimmed cached object keeps its view (not a Kubernetes field name).
VIEW = "owned"


@record
class View:
    """What a cache keeps of an object we own for `Shape.drifted`. A record, not a map:
    48 bytes where a map is 184, one per cached owned object. Not hashable."""

    #: `Shape.digest` of the object: its closed fields.
    digest: str
    #: Its open values by where they are (`Shape.open_values`), as a flat tuple of
    #: places and values (`at`, value, `at`, value, ...): 56-88 bytes for the one to
    #: three a relay object has, where a map is 184. Read-only, as the cached object
    #: that holds the view.
    open: tuple[Any, ...]


#: A node of the closed shape: a map of keys to nodes, a keyed list (`_Keyed`), or
#: None for a value compared whole (a scalar, a list of scalars).
Node = Any
_ABSENT = object()


class _Keyed(dict[str, Node]):
    """A keyed list's shape: `name=relay` -> the element's shape."""


def _tag(key: tuple[str, Any]) -> str:
    return f"{key[0]}={key[1]}"


def _shape(value: Any, path: str, open_paths: frozenset[str]) -> Node:
    if isinstance(value, Mapping):
        node: dict[str, Node] = {}
        for k, v in value.items():
            child = f"{path}.{k}" if path else k
            if child in open_paths or omitted(v):
                continue
            node[k] = _shape(v, child, open_paths)
        return node
    if isinstance(value, list) and value and all(key_of(v) is not None for v in value):
        keyed = _Keyed()
        for v in value:
            keyed[_tag(key_of(v))] = _shape(v, path, open_paths)  # type: ignore[arg-type]
        return keyed
    if isinstance(value, list) and any(isinstance(v, Mapping) for v in value):
        raise ValueError(
            f"{path}: a list of objects without keys is compared whole; declare it open"
        )
    return None


def _empty(value: Any) -> bool:
    """`diff.omitted`, by exact type first (this runs for every field of every event)."""
    t = type(value)
    if t is str or t is list or t is dict:
        return not value
    return value is None or omitted(value)


def _project(value: Any, node: Node) -> Any:
    """`value` at the shape's paths only, empty values left out (`_ABSENT` if nothing).
    Runs in the informer for every event of a relay object: exact types first."""
    if _empty(value):
        return _ABSENT
    if node is None:
        return value
    if type(node) is _Keyed:
        if type(value) is not list:
            return value  # another type than rendered: kept, so it differs
        items: dict[str, Any] = {}
        for item in value:
            key = key_of(item)
            if key is None:
                continue
            sub = node.get(_tag(key), _ABSENT)
            if sub is _ABSENT:
                continue  # another manager's element (an injected sidecar, say)
            projected = _project(item, sub)
            if projected is not _ABSENT:
                items[_tag(key)] = projected
        return items or _ABSENT
    if type(value) is not dict and not isinstance(value, Mapping):
        return value
    out = {}
    for k, sub in node.items():
        v = value.get(k, _ABSENT)
        if v is _ABSENT:
            continue
        if sub is None:  # a leaf, without the call
            if not _empty(v):
                out[k] = v
            continue
        projected = _project(v, sub)
        if projected is not _ABSENT:
            out[k] = projected
    return out or _ABSENT


def _as_sample(value: Any, sample: Any) -> Any:
    """`value` with each string equal to `sample`'s at the same place (through maps)
    made `sample`'s: one string for what every render holds there. Lists are left as
    they are (their elements are matched by key, not by place)."""
    if type(value) is str:
        return sample if type(sample) is str and value == sample else value
    if type(value) is dict and type(sample) is dict:
        return {k: _as_sample(v, sample.get(k)) for k, v in value.items()}
    return value


def _open(value: Any, parts: tuple[str, ...], node: Node, at: str, out: dict[str, Any]) -> None:
    """`out[at]` = the value at an open path (`parts` of it still to walk) in `value`,
    for each place it is: through maps, and through keyed lists element by element
    (only the elements of the shape, where it has the list), `at` naming them."""
    if not parts:
        out[sys.intern(at)] = value  # one copy per place, not one per cached object
        return
    if type(value) is list:
        for item in value:
            key = key_of(item)
            if key is None:
                continue
            tag = _tag(key)
            if type(node) is _Keyed:
                if tag not in node:
                    continue  # another manager's element (an injected sidecar, say)
                _open(item, parts, node[tag], f"{at}[{tag}]", out)
            else:
                _open(item, parts, None, f"{at}[{tag}]", out)
        return
    if not (type(value) is dict or isinstance(value, Mapping)) or parts[0] not in value:
        return
    sub = node.get(parts[0]) if type(node) is dict else None
    _open(value[parts[0]], parts[1:], sub, f"{at}.{parts[0]}" if at else parts[0], out)


class Shape:
    """The closed and open fields of one kind of rendered object."""

    def __init__(
        self,
        sample: Mapping[str, Any],
        *,
        open_paths: frozenset[str],
        quantities: frozenset[str] = frozenset(),
    ) -> None:
        self.open_paths = open_paths
        self.quantities = quantities
        self.closed: Node = _shape(sample, "", open_paths)
        self._split = {p: tuple(p.split(".")) for p in open_paths}
        #: The sample's open values, whose strings a view shares (`view`).
        self._sample_open = self.open_values(sample)
        # The digest of each rendered body, by its render hash: a body is rendered again
        # on every pass, its digest need not be (~200 bytes an entry, bounded).
        self._bodies: dict[str, str] = {}

    def digest(self, obj: Mapping[str, Any]) -> str:
        projected = _project(obj, self.closed)
        data = orjson.dumps(
            None if projected is _ABSENT else projected, option=orjson.OPT_SORT_KEYS
        )
        return hashlib.blake2b(data, digest_size=8).hexdigest()

    def _open_values(self, obj: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
        """Each open value of `obj` by where it is, with its open path."""
        out: dict[str, tuple[str, Any]] = {}
        for path, parts in self._split.items():
            # Through maps only (the common case), the value is at the path itself: no
            # recursion, and the path's own string names it. A list on the way (a keyed
            # list's elements) is walked by `_open`.
            value: Any = obj
            for part in parts:
                if type(value) is not dict:
                    break
                value = value.get(part, _ABSENT)
                if value is _ABSENT:
                    break
            else:
                out[path] = (path, value)
                continue
            if value is _ABSENT:
                continue
            found: dict[str, Any] = {}
            _open(obj, parts, self.closed, "", found)
            out.update((at, (path, v)) for at, v in found.items())
        return out

    def open_values(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return {at: v for at, (_, v) in self._open_values(obj).items()}

    def view(self, live: Mapping[str, Any]) -> View:
        """What a cache keeps of a live object for `drifted`; an open string equal to the
        sample's at the same place is the sample's (one string for what every render
        puts there, and nothing but the sample's strings shared)."""
        sample = self._sample_open
        held: list[Any] = []
        for at, v in self.open_values(live).items():
            held += (at, _as_sample(v, sample.get(at)))
        return View(self.digest(live), tuple(held))

    def drifted(self, view: View, body: Mapping[str, Any], render_hash: str | None) -> bool:
        """`not contains(live, body, quantities=quantities)`, from the live object's view."""
        digest = self._bodies.get(render_hash) if render_hash else None
        if digest is None:
            digest = self.digest(body)
            if render_hash:
                if len(self._bodies) >= 16384:
                    self._bodies.clear()  # bounded: a fleet's worth, then start over
                self._bodies[render_hash] = digest
        if view.digest != digest:
            return True
        held = view.open
        live_open = dict(zip(held[::2], held[1::2], strict=True))
        for at, (path, value) in self._open_values(body).items():
            if at in live_open:
                if not contains(live_open[at], value, quantities=self.quantities, path=path):
                    return True
            elif not omitted(value):
                return True
        return False
