"""The informer's cache: objects by (namespace, name), plus secondary indexes.

Objects are plain dicts as the API server sent them (after the informer's
transform). They are shared by every reader of the store, so callers must treat
them as read-only and deep-copy before changing anything, as with client-go's
cache. The store is not thread-safe; it is meant for one asyncio loop, where
every method runs to completion without yielding, so a reader never sees a
half-applied change.

Read-your-own-writes: after a write of ours answered, `wrote` keeps the answer, and
`latest` reads it instead of the cached object while the cache still holds the version
the write replaced; the first change the cache sees of that object ends it (versions
are opaque: a change cannot be told to come before or after ours, and each is the
server's word from then on). The answer is made as the cache keeps it when first read:
the write's own event mostly comes first, and is made so anyway. `get`, `list` and the
indexes are the cache alone.

Indexes map a string value (an owner UID, a label value, ...) to the objects
that produce it, so a controller can find "the Services owned by
this relay" without scanning the whole cache. They are kept in step with every
put, delete and replace.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dynamo_pool_operator.runtime.objects.meta import controller_of, object_version

log = logging.getLogger(__name__)

Obj = dict[str, Any]
#: (namespace, name); namespace is "" for cluster-scoped objects.
Key = tuple[str, str]
#: Maps an object to its index values: a pure function (removal reads them again).
IndexFunc = Callable[[Obj], list[str]]
#: (old, new): old is None for an object that appeared, new is None for one that vanished.
Change = tuple[Obj | None, Obj | None]

CONTROLLER_UID_INDEX = "controller-uid"


def object_key(obj: Obj) -> Key:
    """The store key of an object: (namespace or "", name)."""
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


# ---------------------------------------------------------------- index functions
def index_by_controller_uid(obj: Obj) -> list[str]:
    """Index by the UID of the controlling owner only: the garbage collector and
    adoption treat only the controller reference as ownership."""
    ref = controller_of(obj)
    return [str(ref["uid"])] if ref is not None and ref.get("uid") else []


# ---------------------------------------------------------------- indexes
#: A bucket of up to this many objects is a tuple of them; a larger one a `_Many`.
_SMALL = 8


class _Many(dict[Key, Obj]):
    """A large bucket: key -> object, in filing order (removal need not scan)."""

    __slots__ = ()


#: One object, a tuple of 2 to `_SMALL` objects, or a `_Many`.
_Bucket = Obj | tuple[Obj, ...] | _Many


class _Index:
    """One named index: value -> the objects filed under it, in filing order. A bucket
    holds the objects themselves (one, a tuple of a few, or a `_Many`), so an index
    costs a few bytes an object, not a key tuple and map entries (~550 bytes a pool at
    10,000 pools)."""

    __slots__ = ("buckets", "description", "fn", "name")

    def __init__(self, name: str, fn: IndexFunc, description: str) -> None:
        self.name = name
        self.description = description
        self.fn = fn
        self.buckets: dict[str, _Bucket] = {}

    def empty_copy(self) -> _Index:
        return _Index(self.name, self.fn, self.description)

    def compute(self, obj: Obj) -> tuple[str, ...]:
        """The object's values, deduplicated. A failing index function is logged and the
        object left out of this index: it runs inside the watch loop."""
        try:
            values = self.fn(obj)
        except Exception:
            log.exception(
                "store %s: index %r failed on %s/%s; object left out of it",
                self.description or "?",
                self.name,
                *object_key(obj),
            )
            return ()
        if isinstance(values, str):  # a bare string would otherwise be indexed per character
            return (values,)
        return tuple(dict.fromkeys(v for v in values if isinstance(v, str)))

    def objects(self, value: str) -> Iterable[Obj]:
        """The objects filed under `value`, in the order they were filed."""
        bucket = self.buckets.get(value)
        if bucket is None:
            return ()
        if isinstance(bucket, tuple):
            return bucket
        if isinstance(bucket, _Many):
            return bucket.values()
        return (bucket,)

    def add(self, obj: Obj) -> None:
        buckets = self.buckets
        for v in self.compute(obj):
            bucket = buckets.get(v)
            if bucket is None:
                buckets[v] = obj
            elif isinstance(bucket, tuple):
                if len(bucket) < _SMALL:
                    buckets[v] = (*bucket, obj)
                else:
                    many = _Many((object_key(o), o) for o in bucket)
                    many[object_key(obj)] = obj
                    buckets[v] = many
            elif isinstance(bucket, _Many):
                bucket[object_key(obj)] = obj
            else:
                buckets[v] = (bucket, obj)

    def remove(self, obj: Obj) -> None:
        buckets = self.buckets
        for v in self.compute(obj):
            bucket = buckets.get(v)
            if bucket is None:
                continue
            if bucket is obj:
                del buckets[v]
            elif isinstance(bucket, tuple):
                rest = tuple(o for o in bucket if o is not obj)
                buckets[v] = rest[0] if len(rest) == 1 else rest
            elif isinstance(bucket, _Many):
                key = object_key(obj)
                if bucket.get(key) is obj:
                    del bucket[key]
                if len(bucket) == 1:
                    (buckets[v],) = bucket.values()  # one object left: the object itself


# ---------------------------------------------------------------- store
class Store:
    """Objects keyed by (namespace, name), with named secondary indexes. Writes (`put`,
    `delete`, `replace`) belong to the informer that owns the store."""

    def __init__(self, description: str = "") -> None:
        #: Names the resource (and namespace) in log lines; set by the owning informer.
        self.description = description
        # namespace -> name -> object: `list_namespace` needs no extra index.
        self._objects: dict[str, dict[str, Obj]] = {}
        self._count = 0
        self._indexes: dict[str, _Index] = {}
        #: Our own writes the cache does not show yet: key -> (the version of the cached
        #: object the write replaced, the write's answer, what makes it as the cache
        #: keeps it (None: made)).
        self._own: dict[Key, tuple[tuple[Any, Any], Obj, Callable[[Obj], Obj] | None]] = {}

    # ------------------------------------------------------------ reads
    def get(self, namespace: str | None, name: str) -> Obj | None:
        """The cached object, or None. Pass "" or None as namespace for cluster-scoped ones."""
        return self._objects.get(namespace or "", {}).get(name)

    def latest(self, namespace: str | None, name: str) -> Obj | None:
        """The object as our own last write left it while the cache does not show that
        write yet (`wrote`); else the cached object."""
        key = (namespace or "", name)
        own = self._own.get(key) if self._own else None
        if own is None:
            return self.get(namespace, name)
        replaced, answer, prepare = own
        if prepare is not None:
            answer = prepare(answer)
            self._own[key] = (replaced, answer, None)
        return answer

    def shows_own_write(self, namespace: str | None, name: str) -> bool:
        """Whether `latest` reads our own write, not the cached object."""
        return (namespace or "", name) in self._own

    # ------------------------------------------------------------ our own writes
    def writing(self, namespace: str | None, name: str) -> None:
        """A write of ours is under way: `latest` reads the cache until it answers."""
        self._own.pop((namespace or "", name), None)

    def wrote(
        self,
        answer: Obj,
        based_on: Mapping[str, Any],
        prepare: Callable[[Obj], Obj] | None = None,
    ) -> None:
        """Our write, decided on the cached `based_on`, was answered with `answer`:
        `latest` reads it, made by `prepare` on the first read (the informer's
        `as_cached`), while the cache still holds `based_on`'s version."""
        key = object_key(answer)
        self._own.pop(key, None)
        replaced = object_version(based_on)
        cached = self.get(*key)
        if cached is not None and object_version(cached) == replaced:
            self._own[key] = (replaced, answer, prepare)

    def _moved(self, key: Key, new: Obj | None) -> None:
        """The cache changed the object of `key`: it is the server's word from now on."""
        own = self._own.get(key)
        if own is not None and (new is None or object_version(new) != own[0]):
            del self._own[key]

    def list(self) -> builtins.list[Obj]:
        """Every cached object (a new list; the objects themselves are shared)."""
        return [obj for by_name in self._objects.values() for obj in by_name.values()]

    def list_namespace(self, namespace: str | None) -> builtins.list[Obj]:
        """The cached objects in one namespace ("" or None: cluster-scoped objects)."""
        return list(self._objects.get(namespace or "", {}).values())

    def keys(self) -> builtins.list[Key]:
        return [(ns, name) for ns, by_name in self._objects.items() for name in by_name]

    def __len__(self) -> int:
        return self._count

    def __contains__(self, key: object) -> bool:
        if not (isinstance(key, tuple) and len(key) == 2):
            return False
        ns, name = key
        return isinstance(name, str) and self.get(ns, name) is not None

    # ------------------------------------------------------------ indexes
    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Register an index; objects already cached are indexed at once. A name given
        twice is an error: readers of a shared informer must agree on what it means."""
        if name in self._indexes:
            raise ValueError(f"index {name!r} already exists")
        index = _Index(name, fn, self.description)
        for by_name in self._objects.values():
            for obj in by_name.values():
                index.add(obj)
        self._indexes[name] = index

    def has_index(self, name: str) -> bool:
        return name in self._indexes

    def index_keys(self, name: str, value: str) -> builtins.list[Key]:
        """Keys of the objects filed under `value` in index `name` (KeyError if no such index)."""
        return [object_key(obj) for obj in self._indexes[name].objects(value)]

    def by_index(self, name: str, value: str) -> builtins.list[Obj]:
        """The objects filed under `value` in index `name` (KeyError if no such index)."""
        return list(self._indexes[name].objects(value))

    def index_values(self, name: str) -> builtins.list[str]:
        """Every value index `name` currently holds (e.g. all owner UIDs seen)."""
        return list(self._indexes[name].buckets)

    # ------------------------------------------------------------ writes (informer only)
    def put(self, obj: Obj) -> Obj | None:
        """Insert or replace one object; returns the object it replaced, if any."""
        key = object_key(obj)
        by_name = self._objects.setdefault(key[0], {})
        old = by_name.get(key[1])
        by_name[key[1]] = obj
        if self._own:
            self._moved(key, obj)
        if old is None:
            self._count += 1
        for index in self._indexes.values():
            if old is not None:
                index.remove(old)
            index.add(obj)
        return old

    def delete(self, namespace: str | None, name: str) -> Obj | None:
        """Remove one object; returns it, or None if it was not cached."""
        ns = namespace or ""
        by_name = self._objects.get(ns)
        if by_name is None or name not in by_name:
            return None
        old = by_name.pop(name)
        self._own.pop((ns, name), None)
        if not by_name:
            del self._objects[ns]
        self._count -= 1
        for index in self._indexes.values():
            index.remove(old)
        return old

    def replace(self, objs: Iterable[Obj]) -> builtins.list[Change]:
        """Swap the whole content for `objs` and return what changed: vanished objects
        first, as (old, None), then (old or None, new) for each new one. Built aside and
        swapped in at the end, so no reader sees a mix and a failure changes nothing."""
        objects: dict[str, dict[str, Obj]] = {}
        count = 0
        for obj in objs:
            ns, name = object_key(obj)
            by_name = objects.setdefault(ns, {})
            if name not in by_name:
                count += 1
            by_name[name] = obj  # a duplicate key in the list: the last one wins
        indexes = {n: idx.empty_copy() for n, idx in self._indexes.items()}
        for by_name in objects.values():
            for obj in by_name.values():
                for index in indexes.values():
                    index.add(obj)

        changes: builtins.list[Change] = []
        for ns, by_name in self._objects.items():
            fresh = objects.get(ns, {})
            changes.extend((old, None) for name, old in by_name.items() if name not in fresh)
        for ns, by_name in objects.items():
            prior = self._objects.get(ns, {})
            changes.extend((prior.get(name), obj) for name, obj in by_name.items())

        self._objects, self._count, self._indexes = objects, count, indexes
        for key in list(self._own):
            self._moved(key, self.get(*key))
        return changes
