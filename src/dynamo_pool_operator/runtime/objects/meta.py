"""A typed, read-only view of any Kubernetes object's metadata and conditions.

Cached objects are plain mappings decoded from JSON, and nothing stops one of them
from being malformed (a `metadata` that is a list, a `generation` that is a string:
a CRD without a schema, a test, a future server). Reading them through one view
gives one answer to each malformed case — absent, empty, not terminating, no
controller — instead of a `get("metadata") or {}` dig, each with its own idea of
what a bad value means. The view copies nothing: it is as cheap as the digs it
replaces, which matters on the no-op reconcile path.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from dynamo_pool_operator.runtime.objects import conditions
from dynamo_pool_operator.runtime.objects.ownership import controller_of

_EMPTY: Mapping[str, Any] = {}


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else _EMPTY


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class Meta:
    """`Meta(obj)`: the metadata of `obj` (any value; a non-mapping has none)."""

    __slots__ = ("_meta", "_obj")

    def __init__(self, obj: object) -> None:
        self._obj = _mapping(obj)
        self._meta = _mapping(self._obj.get("metadata"))

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
        return _mapping(self._meta.get("labels"))

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
        return conditions.parse_rfc3339(self._meta.get("creationTimestamp"))

    def age(self, now: datetime) -> float | None:
        """Seconds since creation (None when the creation time is unknown)."""
        return conditions.seconds_since(self._meta.get("creationTimestamp"), now)

    @property
    def owner_references(self) -> list[Any]:
        """`metadata.ownerReferences` as written (empty when absent or not a list)."""
        refs = self._meta.get("ownerReferences")
        return refs if isinstance(refs, list) else []

    @property
    def controller(self) -> Mapping[str, Any] | None:
        """The controller owner reference (`runtime/objects/ownership.py` reads it)."""
        return controller_of(self._obj)

    def condition(self, type_: str) -> Mapping[str, Any] | None:
        """`status.conditions[type=type_]` of the object, if any."""
        return conditions.find(_mapping(self._obj.get("status")).get("conditions"), type_)
