"""Index functions the store tests file objects under (the operator itself indexes only
by controller UID, `runtime.store.index_by_controller_uid`)."""

from __future__ import annotations

from dynamo_pool_operator.runtime.cache.store import IndexFunc, Obj, object_key

NAMESPACE_INDEX = "namespace"
OWNER_UID_INDEX = "owner-uid"


def index_by_namespace(obj: Obj) -> list[str]:
    """Index by namespace ("" for cluster-scoped objects)."""
    return [object_key(obj)[0]]


def index_by_owner_uid(obj: Obj) -> list[str]:
    """Index by the UID of every owner reference, controller or not."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [str(r["uid"]) for r in refs if r.get("uid")]


def label_index(key: str) -> IndexFunc:
    """An index function on the value of label `key` (objects without it are not indexed)."""

    def by_label(obj: Obj) -> list[str]:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        value = labels.get(key)
        return [value] if isinstance(value, str) else []

    by_label.__name__ = f"label_index({key!r})"
    return by_label
