"""Equal parts of cached objects held once: the cache's one memory trick, in one room.

A fleet's objects come from few templates, yet the decoder hands out every key, label,
owner reference and spec anew, each map with a hash table of its own. `Share` (a step of
`transform.py`) makes equal parts one object, by bounded tables (`Alike`), weak tables,
interning a kind's bounded vocabulary and maps that share one key table per shape
(decisions 0008 and 0016); cached objects are read-only, so this is safe. Never
`sys.intern` for anything unbounded: an interned string may be immortal.
"""

from __future__ import annotations

import functools
import logging
import sys
import weakref
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson

from dynamo_pool_operator.runtime.cache.store import Obj, object_key
from dynamo_pool_operator.runtime.objects.diff import VIEW, View

log = logging.getLogger(__name__)

T = TypeVar("T")


class Alike(Generic[T]):
    """Hands out one object for each distinct value, for up to `limit` values. At the
    limit a settled table (`renew` False) hands new values back as they are; one for
    values that move on with time (`renew` True) starts over."""

    __slots__ = ("limit", "renew", "table")

    def __init__(self, limit: int, *, renew: bool = False) -> None:
        self.limit = limit
        self.renew = renew
        self.table: dict[T, T] = {}

    def __call__(self, value: T) -> T:
        table = self.table
        try:
            held = table.get(value)
        except TypeError:  # not hashable: nothing to share it with
            return value
        if held is not None:
            return held
        if len(table) >= self.limit:
            if not self.renew:
                return value
            table.clear()
        table[value] = value
        return value

    def __len__(self) -> int:
        return len(self.table)

    def clear(self) -> None:
        self.table.clear()


class _SharedList(list[Any]):
    """A list several cached objects hold (weakly tabled, so it goes with the last)."""

    __slots__ = ("__weakref__",)


class _SharedDict(dict[str, Any]):
    """A map several cached objects hold (weakly tabled, so it goes with the last)."""

    __slots__ = ("__weakref__",)


#: Owner references by the hash of their JSON: a relay's five objects share one list
#: (~760 bytes). An int key, not the JSON: an `orjson.dumps` result keeps its 4 kB buffer.
_SHARED_OWNERS: weakref.WeakValueDictionary[int, _SharedList] = weakref.WeakValueDictionary()
#: The other parts of the metadata equal across many objects (labels, the managed-field
#: summary), and a kind's own shared parts, by the hash of their JSON.
_SHARED_METADATA_FIELDS = ("labels", "managedFields")
_SHARED_METADATA: weakref.WeakValueDictionary[int, _SharedList | _SharedDict] = (
    weakref.WeakValueDictionary()
)

#: A place in an object: keys from its root, "*" for every item of a list or value of
#: a map (`("status", "conditions", "*", "type")`).
VocabularyPath = tuple[str, ...]

#: Where the bounded vocabulary of any Kubernetes object lives: values that repeat across
#: a fleet and take few distinct values. Only these are interned: on some CPython builds
#: an interned string is immortal, so a name or timestamp interned would live forever.
VOCABULARY: frozenset[VocabularyPath] = frozenset(
    {
        ("apiVersion",),
        ("kind",),
        ("metadata", "finalizers", "*"),
        *(
            ("metadata", "labels", f"app.kubernetes.io/{label}")
            for label in ("name", "component", "part-of", "managed-by")
        ),
        ("metadata", "ownerReferences", "*", "apiVersion"),
        ("metadata", "ownerReferences", "*", "kind"),
        *(
            ("metadata", "managedFields", "*", key)
            for key in ("manager", "operation", "apiVersion", "fieldsType", "subresource")
        ),
        *(("status", "conditions", "*", key) for key in ("type", "status", "reason")),
    }
)
#: A vocabulary value longer than this is free text, left alone.
_SHORT_VALUE = 64
#: Marks a trie node where a path ends (no field of an object is called "").
_END = ""

_Trie = dict[str, "_Trie"]


@functools.cache
def _vocabulary_trie(extra: frozenset[VocabularyPath]) -> _Trie:
    """`VOCABULARY` and `extra` as a trie of keys: one walk visits only those places."""
    root: _Trie = {}
    for path in VOCABULARY | extra:
        node = root
        for key in path:
            node = node.setdefault(key, {})
        node[_END] = {}
    return root


def _intern_in(node: dict[str, Any] | list[Any], trie: _Trie) -> None:
    if type(node) is dict:
        for key, sub in trie.items():
            if key == "*":
                for k, value in node.items():
                    _intern_one(node, k, value, sub)
            elif key != _END and key in node:
                _intern_one(node, key, node[key], sub)
    else:
        items = trie.get("*")
        if items is not None:
            for i, value in enumerate(node):
                _intern_one(node, i, value, items)


def _intern_one(parent: Any, at: str | int, value: Any, trie: _Trie) -> None:
    kind = type(value)
    if kind is str:
        if _END in trie and len(value) <= _SHORT_VALUE:
            parent[at] = sys.intern(value)  # the same key or index: no size change
    elif kind is dict or kind is list:
        _intern_in(value, trie)


#: Keys of cached objects: the decoder's small key cache is crowded out by managed
#: fields, so most objects came with their own copies.
_KEYS: Alike[str] = Alike(16_384)
#: Namespace names: one per namespace, not one per cached object (seven a pool).
_NAMESPACES: Alike[str] = Alike(16_384)
#: Creation times: a cold start stamps one second on many objects (~70 bytes each).
_TIMES: Alike[str] = Alike(4096, renew=True)
#: Where a trimmed object's view keeps its copy of the owner references, shared too.
_VIEW_OWNERS = "metadata.ownerReferences"


#: One class for each sequence of keys a cached map has: the maps made through it are
#: CPython's key-sharing dicts, whose keys one table holds for all (a map of 7 keys: ~150
#: bytes, not 280). Still `dict`s, read as fast. Past the limit, or for a map of many or
#: odd keys, a plain map.
_SHAPES: dict[tuple[str, ...], type] = {}
_SHAPES_LIMIT = 512
_SHAPE_KEYS_MAX = 16


def _keyed(keys: list[str], values: list[Any]) -> dict[str, Any]:
    """A map of `keys` to `values` that shares its key table with every map of its shape."""
    shape = tuple(keys)
    cls = _SHAPES.get(shape)
    if cls is None:
        if len(_SHAPES) >= _SHAPES_LIMIT or len(shape) > _SHAPE_KEYS_MAX:
            return dict(zip(keys, values, strict=True))
        cls = _SHAPES[shape] = type("CachedMap", (), {})
    out: dict[str, Any] = cls().__dict__  # item assignment: no key meets a descriptor
    out.update(zip(keys, values, strict=True))
    return out


def _compact_dict(node: dict[str, Any], seen: dict[str, str]) -> dict[str, Any]:
    """`node` anew with canonical keys and one string for equal values within one object
    (a relay's conditions share their time). A new map costs less than fixing keys in
    place, and a stripped field leaves no empty slot."""
    held = _KEYS.table
    keys: list[str] = []
    values: list[Any] = []
    for key, value in node.items():
        kind = type(value)
        if kind is str:
            value = seen.setdefault(value, value)
        elif kind is dict:
            value = _compact_dict(value, seen)
        elif kind is list:  # not a `_SharedList`: other objects' already
            _compact_list(value, seen)
        canon = held.get(key)
        keys.append(_KEYS(key) if canon is None else canon)
        values.append(value)
    return _keyed(keys, values)


def _compact_list(node: list[Any], seen: dict[str, str]) -> None:
    for i, value in enumerate(node):
        kind = type(value)
        if kind is str:
            node[i] = seen.setdefault(value, value)
        elif kind is dict:
            node[i] = _compact_dict(value, seen)
        elif kind is list:
            _compact_list(value, seen)


def _compact_open(view_open: tuple[Any, ...], seen: dict[str, str]) -> list[Any]:
    """A view's places and values (`View.open`): each place a canonical key, each value
    compacted as a field of the object."""
    values = list(view_open[1::2])
    _compact_list(values, seen)
    held: list[Any] = []
    for at, value in zip(view_open[::2], values, strict=True):
        held += (_KEYS(at), value)
    return held


def _owners_key(refs: list[Any] | dict[str, Any]) -> int | None:
    """Keys sorted: equal parts the server wrote in another key order (a CRD's owner
    references are sorted, a Deployment's are not) are one part."""
    try:
        return hash(orjson.dumps(refs, option=orjson.OPT_SORT_KEYS))
    except TypeError:
        return None


def _shared(
    value: list[Any] | dict[str, Any],
    table: weakref.WeakValueDictionary[int, Any],
) -> list[Any] | dict[str, Any]:
    """The one list or map every cached object with a part equal to `value` holds."""
    key = _owners_key(value)
    if key is None:
        return value
    shared = table.get(key)
    if shared is None:
        shared = _SharedList(value) if type(value) is list else _SharedDict(value)
        table[key] = shared
    elif type(shared) is not (_SharedList if type(value) is list else _SharedDict) or (
        shared != value
    ):
        return value  # a hash collision: keep its own
    return shared


def _share_at(obj: Obj, path: VocabularyPath) -> None:
    node: Any = obj
    for key in path[:-1]:
        node = node.get(key) if type(node) is dict else None
    if type(node) is dict:
        part = node.get(path[-1])
        if type(part) is list or type(part) is dict:
            node[path[-1]] = _shared(part, _SHARED_METADATA)


def share_common_parts(
    obj: Obj,
    vocabulary: frozenset[VocabularyPath] = frozenset(),
    shared: frozenset[VocabularyPath] = frozenset(),
) -> Obj:
    """Make equal parts of cached objects one object: keys, namespace names, creation
    times, equal strings within the object, owner references, labels, the field
    managers' summary, the kind's own `shared` parts and the bounded vocabulary. Nothing
    changes value; a shared map keeps the key order of its first holder."""
    if type(obj) is not dict:
        return obj
    seen: dict[str, str] = {}
    view = obj.get(VIEW)
    held: list[Any] | None = None
    if isinstance(view, View):
        # A record the walk does not enter: its open values first, so the strings they
        # share with the shape's sample stay those.
        held = _compact_open(view.open, seen)
    # A new map, as every part: callers keep what a transform returns.
    obj = _compact_dict(obj, seen)
    # After the walk: it would swap an interned value for an equal one met before it.
    _intern_in(obj, _vocabulary_trie(vocabulary))
    for path in shared:
        _share_at(obj, path)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        _share_metadata(meta, held)
    if isinstance(view, View) and held is not None:
        obj[VIEW] = View(view.digest, tuple(held))
    return obj


def _share_metadata(meta: dict[str, Any], view_open: list[Any] | None) -> None:
    """The metadata's parts a fleet repeats held once; the view's copy of the owner
    references (in `view_open`, its places and values) is the metadata's."""
    namespace = meta.get("namespace")
    if type(namespace) is str:
        meta["namespace"] = _NAMESPACES(namespace)
    created = meta.get("creationTimestamp")
    if type(created) is str:
        meta["creationTimestamp"] = _TIMES(created)
    for field in _SHARED_METADATA_FIELDS:
        part = meta.get(field)
        if type(part) is list or type(part) is dict:
            meta[field] = _shared(part, _SHARED_METADATA)
    refs = meta.get("ownerReferences")
    if type(refs) is list and refs:
        owners = meta["ownerReferences"] = _shared(refs, _SHARED_OWNERS)
        if view_open is not None:
            for i in range(0, len(view_open) - 1, 2):
                if view_open[i] == _VIEW_OWNERS and view_open[i + 1] == owners:
                    view_open[i + 1] = owners


@dataclass(frozen=True, slots=True)
class Share:
    """The sharing step of a cache's transform, with this kind's own `vocabulary` and
    `shared` parts. A value, so readers of one shared informer agree. An object nested
    past the recursion limit is kept unshared."""

    vocabulary: frozenset[VocabularyPath] = frozenset()
    shared: frozenset[VocabularyPath] = frozenset()

    def __call__(self, obj: Obj) -> Obj:
        try:
            return share_common_parts(obj, self.vocabulary, self.shared)
        except RecursionError:
            log.warning(
                "%s/%s is nested too deep to share its parts; cached as it is", *object_key(obj)
            )
            return obj
