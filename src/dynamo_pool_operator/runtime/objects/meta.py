"""A typed, read-only view of any Kubernetes object's metadata and conditions.

A cached object may be malformed (a list `metadata`, a string `generation`); one view
gives one answer to each such case instead of a `get(...) or {}` dig each with its own
idea. It copies nothing: as cheap as the digs, on the no-op reconcile path.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeGuard

# metav1.Condition lists: find one by type, and the timestamps conditions carry. Generic:
# which conditions exist is the API's and the reconciler's business.

#: metav1.Condition's message limit.
MESSAGE_LIMIT = 32768


def rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: object) -> datetime | None:
    """A timestamp as the API server writes it; None when absent or malformed."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text)  # reads the "Z" suffix since Python 3.11
    except ValueError:
        return None


def seconds_since(stamp: object, now: datetime) -> float | None:
    """Seconds from an API server timestamp to `now`; None when absent or malformed."""
    moment = parse_rfc3339(stamp)
    return None if moment is None else (now - moment).total_seconds()


def find_condition(conditions: object, type_: str) -> Mapping[str, Any] | None:
    """The condition of `type_` in a (possibly malformed) list, or None."""
    if not isinstance(conditions, Sequence) or isinstance(conditions, str):
        return None
    for c in conditions:
        if (type(c) is dict or isinstance(c, Mapping)) and c.get("type") == type_:
            return c
    return None


def object_version(obj: Mapping[str, Any] | None) -> tuple[Any, Any]:
    """(uid, resourceVersion) of an object; (None, None) for none."""
    meta = (obj or {}).get("metadata") or {}
    return (meta.get("uid"), meta.get("resourceVersion"))


# Who controls an object: the one place that reads owner references, so a malformed one
# (not a mapping, `controller` not exactly `true`) has one reading: not a controller.


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The controller owner reference of `obj`, if any (None for a malformed object)."""
    meta = obj.get("metadata") if type(obj) is dict else None  # decoded: no call per level
    refs = (meta if type(meta) is dict else _meta_of(obj)).get("ownerReferences")
    if not isinstance(refs, list):
        return None
    for ref in refs:
        if (type(ref) is dict or isinstance(ref, Mapping)) and ref.get("controller") is True:
            return ref
    return None


#: Kept of an identity stub's metadata: who the object is, whose it is.
_STUB_METADATA = ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp")
_STUB_REFERENCE = ("apiVersion", "kind", "name", "uid", "controller")


def identity_stub(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An informer transform: an object's identity and controller reference only (a
    cache that only answers "whose is it")."""
    meta = _meta_of(obj)
    kept: dict[str, Any] = {k: meta[k] for k in _STUB_METADATA if k in meta}
    ref = controller_of(obj)
    if ref is not None:
        kept["ownerReferences"] = [{k: ref[k] for k in _STUB_REFERENCE if k in ref}]
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": kept}


def is_controlled_by(obj: Mapping[str, Any], uid: str) -> bool:
    """True when `obj`'s controller is the object with `uid` (a non-empty uid)."""
    if not uid:
        return False
    ref = controller_of(obj)
    return ref is not None and ref.get("uid") == uid


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


_EMPTY: Mapping[str, Any] = {}


def is_map(value: object) -> TypeGuard[Mapping[str, Any]]:
    """Whether `value` is a map: decoded objects are dicts, told by type before the ABC."""
    return (
        type(value) is dict
        or isinstance(value, dict)
        or (value is not None and isinstance(value, Mapping))
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if is_map(value) else _EMPTY


def _meta_of(obj: object) -> Mapping[str, Any]:
    """`obj`'s metadata (empty when either is no map), without a call per level."""
    meta = obj.get("metadata") if type(obj) is dict else _mapping(obj).get("metadata")
    return meta if type(meta) is dict else _mapping(meta)


def labels_of(obj: object) -> Mapping[str, Any]:
    """`Meta(obj).labels`, without making the view (read for every export every pass)."""
    labels = _meta_of(obj).get("labels")
    return labels if type(labels) is dict else _mapping(labels)


def is_terminating(obj: object) -> bool:
    """`Meta(obj).terminating`, without making the view (read for every owned object
    every pass)."""
    return bool(_meta_of(obj).get("deletionTimestamp"))


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class Meta:
    """`Meta(obj)`: the metadata of `obj` (any value; a non-mapping has none)."""

    __slots__ = ("_meta", "_obj")

    def __init__(self, obj: object) -> None:
        self._obj = obj if type(obj) is dict else _mapping(obj)
        self._meta = _meta_of(obj)

    @property
    def name(self) -> str:
        return _text(self._meta.get("name"))

    @property
    def namespace(self) -> str:
        return _text(self._meta.get("namespace"))

    @property
    def uid(self) -> str:
        return _text(self._meta.get("uid"))

    @property
    def resource_version(self) -> str:
        return _text(self._meta.get("resourceVersion"))

    @property
    def generation(self) -> int:
        """`metadata.generation` (0 when absent or not an integer)."""
        return _int(self._meta.get("generation"))

    @property
    def labels(self) -> Mapping[str, Any]:
        labels = self._meta.get("labels")
        return labels if type(labels) is dict else _mapping(labels)

    @property
    def annotations(self) -> Mapping[str, Any]:
        return _mapping(self._meta.get("annotations"))

    @property
    def terminating(self) -> bool:
        """The object has a deletion timestamp: it goes once its finalizers are done."""
        return bool(self._meta.get("deletionTimestamp"))

    @property
    def created(self) -> datetime | None:
        """`metadata.creationTimestamp` (None when absent or malformed)."""
        return parse_rfc3339(self._meta.get("creationTimestamp"))

    def age(self, now: datetime) -> float | None:
        """Seconds since creation (None when the creation time is unknown)."""
        return seconds_since(self._meta.get("creationTimestamp"), now)

    @property
    def owner_references(self) -> list[Any]:
        """`metadata.ownerReferences` as written (empty when absent or not a list)."""
        refs = self._meta.get("ownerReferences")
        return refs if isinstance(refs, list) else []

    @property
    def controller(self) -> Mapping[str, Any] | None:
        """The controller owner reference (`runtime/objects/meta.py` reads it)."""
        return controller_of(self._obj)

    def condition(self, type_: str) -> Mapping[str, Any] | None:
        """`status.conditions[type=type_]` of the object, if any."""
        return find_condition(_mapping(self._obj.get("status")).get("conditions"), type_)


# Hand the fields of an exclusive create over to the server-side apply manager.
#
# We create with a POST (an apply is an upsert and could adopt a same-named object made
# since our read), but the server records a POST's fields under an "Update" entry that a
# later apply by the same manager does not own: the apply cannot remove them, and a
# keyed list element the POST sent stays beside the applied one (a changed port became
# two `relay` ports, and every apply got 422 "Duplicate value"). So the Update entry is
# merged into the manager's Apply entry, as kubectl's client-side to server-side upgrade
# does, by a merge patch of `managedFields` guarded by uid and resourceVersion (on 409:
# read again and retry while still ours). Objects never handed over are found from the
# cache's summary of `managedFields` (`summarize_managed_fields`). The rules are here;
# the requests are `guarded.hand_over`'s.

APPLY = "Apply"
UPDATE = "Update"


def managed_entries(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    meta = obj.get("metadata")
    managed = meta.get("managedFields") if isinstance(meta, Mapping) else None
    return [m for m in managed if isinstance(m, Mapping)] if isinstance(managed, list) else []


def _is_update_entry(entry: Mapping[str, Any], manager: str) -> bool:
    # Only the main resource: a status write's entry is another field set.
    return (
        entry.get("manager") == manager
        and entry.get("operation") == UPDATE
        and not entry.get("subresource")
    )


def needs_handover(obj: Mapping[str, Any], manager: str) -> bool:
    """True when `manager` still owns fields of `obj` through an Update entry."""
    return any(_is_update_entry(e, manager) for e in managed_entries(obj))


def union(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """The union of two FieldsV1 sets (nested maps of `f:`/`k:`/`v:`/`.` keys)."""
    out: dict[str, Any] = copy.deepcopy(dict(a))
    for key, value in b.items():
        mine = out.get(key)
        if isinstance(mine, Mapping) and isinstance(value, Mapping):
            out[key] = union(mine, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def handed_over(managed: list[Mapping[str, Any]], manager: str) -> list[dict[str, Any]] | None:
    """`managed` with every Update entry of `manager` merged into its Apply entry (made
    from the first Update entry when there is none), or None when there is nothing to
    hand over; other managers' entries kept, in order."""
    updates = [e for e in managed if _is_update_entry(e, manager)]
    if not updates:
        return None
    fields: dict[str, Any] = {}
    for e in updates:
        fields = union(fields, e.get("fieldsV1") or {})
    out: list[dict[str, Any]] = []
    applied = False
    for e in managed:
        if _is_update_entry(e, manager):
            continue
        entry = copy.deepcopy(dict(e))
        if entry.get("manager") == manager and entry.get("operation") == APPLY and not applied:
            entry["fieldsV1"] = union(entry.get("fieldsV1") or {}, fields)
            applied = True
        out.append(entry)
    if not applied:
        first = copy.deepcopy(dict(updates[0]))
        first["operation"] = APPLY
        first["fieldsV1"] = fields
        first["fieldsType"] = "FieldsV1"
        out.append(first)
    return out


def summarize_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """An informer transform: keep of `managedFields` only who wrote how, not the field
    sets (a few bytes an object)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("managedFields"), list):
        meta["managedFields"] = [
            {k: e[k] for k in ("manager", "operation", "subresource") if k in e}
            for e in meta["managedFields"]
            if isinstance(e, Mapping)
        ]
    return obj
