"""Hand the fields of an exclusive create over to the server-side apply manager.

An object that must never be adopted is created with a POST: an apply is an
upsert, and would take over a same-named object someone made since our cache
read. But the API server records a POST's fields under an "Update" entry of the
field manager, and a later apply by the same manager name owns only what it
applied. Fields the POST set therefore stay owned by the Update entry forever:
an apply cannot remove them, and a keyed list element the POST sent stays next
to the one the apply sends (a changed port became two `relay` ports, and every
apply was refused with 422 "Duplicate value").

So right after the create, the Update entry is moved into the manager's Apply
entry, as kubectl's client-side to server-side apply upgrade does: a merge patch
of `metadata.managedFields` carrying the uid and resourceVersion just read, so
the server refuses it (409) if the object changed in between — a replaced list
built from a stale read could drop another manager's entry. On 409 the object is
read again and, if it is still the same object and still ours, handed over from
that version. Nothing but `managedFields` changes; the object's content is the
same before and after.

Objects whose handover did not happen (a create by an earlier version, a lost
race) are found from the cache: informers of such objects keep a summary of
`managedFields` (manager and operation, no field sets), see `summarize`.

This module is the rules alone, and reaches no client: the pure planning asks
`needs_handover`. The requests are `guarded.hand_over`'s.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

APPLY = "Apply"
UPDATE = "Update"


class HandoverLost(Exception):
    """The object changed hands (or is another object of the same name) before its
    fields could be handed over; the caller re-decides from fresh state."""


def managed_entries(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    meta = obj.get("metadata")
    managed = meta.get("managedFields") if isinstance(meta, Mapping) else None
    return [m for m in managed if isinstance(m, Mapping)] if isinstance(managed, list) else []


def _is_update_entry(entry: Mapping[str, Any], manager: str) -> bool:
    # Only the main resource: a status write's entry (subresource "status") is another
    # field set, which an apply of the main resource never touches.
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
    hand over. Pure; other managers' entries are kept as they are, in order."""
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


def summarize(obj: dict[str, Any]) -> dict[str, Any]:
    """An informer transform: keep of `managedFields` only who wrote how (manager,
    operation, subresource), not the field sets, so the cache can tell an object whose
    fields were never handed over at a few bytes per object."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("managedFields"), list):
        meta["managedFields"] = [
            {k: e[k] for k in ("manager", "operation", "subresource") if k in e}
            for e in meta["managedFields"]
            if isinstance(e, Mapping)
        ]
    return obj
