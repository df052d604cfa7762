"""A relay's status as the operator reads it back: `ShownStatus`.

A pass and the metrics read of the shown status only the conditions' type, status,
reason and time, the export lines' name, state and reason, the cluster ID, and whether
a write would change it. The messages and the rest were most of a cached relay
(docs/performance.md), so the relay cache keeps a `ShownStatus` instead: those fields
and a digest of each top-level field. `ShownStatus.read` is its one reader; the
sharing of equal parts (`held`) is the cache's.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import orjson

from dynamo_pool_operator.api.conditions import (
    CONDITION_TYPES,
    STATUSES,
    ConditionType,
)
from dynamo_pool_operator.runtime.objects import is_map, record

#: The status's top-level fields, as the report writes them: a `ShownStatus` keeps a
#: digest of each. One written but not listed would be written on every pass.
STATUS_FIELDS: tuple[str, ...] = (
    "observedGeneration",
    "conditions",
    "serviceName",
    "clusterId",
    "relayPods",
    "exports",
)
_FIELD_AT = {name: i for i, name in enumerate(STATUS_FIELDS)}
#: A word longer than this is text, not a word: not held.
_SHORT_WORD = 64

T = TypeVar("T")


def _as_read(value: T) -> T:
    """No holding: each value as read."""
    return value


@record
class ShownCondition:
    """A condition as a status shows it, without its message (the digest compares that);
    a status or reason that is not a string reads as None and ""."""

    type: str
    status: str | None
    reason: str
    since: Any


@record
class ShownLine:
    """An entry of `status.exports[]` as shown: its name, state and reason as written."""

    name: str
    state: Any = None
    reason: Any = None


def digest(value: Any) -> int:
    """A field's digest: equal for equal JSON values (maps in any key order). Held only in
    memory, so Python's hash serves (a collision would skip one status write)."""
    try:
        return hash(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
    except TypeError:
        return hash(repr(value))  # not JSON (only a test's status): still compared


#: The digests of `STATUS_FIELDS` packed (native signed 64 bits: Python's hash width).
_DIGESTS = struct.Struct(f"={len(STATUS_FIELDS)}q")
_DIGEST = struct.Struct("=q")


def _unset(value: Any) -> bool:
    """An empty list or map written matches a field shown as anything false: the
    server omits the empty field we apply."""
    return type(value) in (list, dict) and not value


@record
class ShownStatus:
    """What a relay's status shows, as the passes and the metrics read it."""

    #: `status.clusterId` as shown (None when absent).
    cluster_id: Any = None
    #: Every condition whose type is a string, in the order shown.
    conditions: tuple[ShownCondition, ...] = ()
    #: Every export line whose name is a string, in the order shown.
    exports: tuple[ShownLine, ...] = ()
    #: `digest` of each of `STATUS_FIELDS`, packed: 81 bytes a relay, not six ints (280).
    digests: bytes = b""
    #: The `STATUS_FIELDS` shown as nothing (absent, or false), a bit each, in order.
    unset: int = (1 << len(STATUS_FIELDS)) - 1

    @classmethod
    def read(
        cls, status: Mapping[str, Any] | None, held: Callable[[Any], Any] = _as_read
    ) -> ShownStatus:
        """The status `status` shows (not a map: an empty one). `held` hands back one
        object for equal parts a fleet's statuses repeat."""
        if type(status) is not dict and not isinstance(status, Mapping):
            return _NOTHING

        def word(value: Any) -> Any:
            return held(value) if type(value) is str and len(value) <= _SHORT_WORD else value

        conditions: list[ShownCondition] = []
        raw = status.get("conditions")
        if type(raw) is list or (isinstance(raw, Sequence) and not isinstance(raw, str)):
            times: dict[str, str] = {}  # one string for the times the conditions share
            for c in raw:
                if not is_map(c):
                    continue
                type_ = c.get("type")
                if type(type_) is not str and not isinstance(type_, str):
                    continue
                stated, reason, since = (
                    c.get("status"),
                    c.get("reason"),
                    c.get("lastTransitionTime"),
                )
                if isinstance(since, str):
                    since = times.setdefault(since, since)
                conditions.append(
                    held(
                        ShownCondition(
                            word(type_),
                            word(stated) if isinstance(stated, str) else None,
                            word(reason) if isinstance(reason, str) else "",
                            since,
                        )
                    )
                )
        lines: list[ShownLine] = []
        raw = status.get("exports")
        if type(raw) is list or (isinstance(raw, Sequence) and not isinstance(raw, str)):
            lines = [
                ShownLine(line["name"], word(line.get("state")), word(line.get("reason")))
                for line in raw
                if is_map(line) and isinstance(line.get("name"), str)
            ]
        values = [status.get(name) for name in STATUS_FIELDS]
        return cls(
            word(status.get("clusterId")),
            held(tuple(conditions)),
            tuple(lines),
            _DIGESTS.pack(*(digest(v) for v in values)),
            sum(1 << i for i, v in enumerate(values) if not v),
        )

    @classmethod
    def of(cls, status: ShownStatus | Mapping[str, Any] | None) -> ShownStatus:
        """`status` as a `ShownStatus` (read, when it is a mapping)."""
        return status if type(status) is ShownStatus else cls.read(status)  # type: ignore[arg-type]

    def differs(self, desired: Mapping[str, Any]) -> bool:
        """Whether writing `desired` would change what this status shows (an empty field
        matches an absent one). ValueError for a field not in `STATUS_FIELDS`."""
        for name, value in desired.items():
            at = _FIELD_AT.get(name)
            if at is None:
                raise ValueError(f"status.{name} is not one of STATUS_FIELDS: add it there")
            if _unset(value):
                if not self.unset >> at & 1:
                    return True
            elif not self.digests or _DIGEST.unpack_from(self.digests, 8 * at)[0] != digest(value):
                return True
        return False

    def by_type(self) -> dict[ConditionType, ShownCondition]:
        """The conditions that read as ours, by type: the first of each type, where its
        type and status are ours (the rest compare as absent)."""
        first: dict[str, ShownCondition] = {}
        for c in self.conditions:
            first.setdefault(c.type, c)
        return {
            CONDITION_TYPES[c.type]: c
            for c in first.values()
            if c.type in CONDITION_TYPES and c.status is not None and c.status in STATUSES
        }

    def lines(self) -> dict[str, ShownLine]:
        """The export lines by name (the last of each)."""
        return {line.name: line for line in self.exports}


_NOTHING = ShownStatus()


def read_conditions(
    status: ShownStatus | Mapping[str, Any] | None,
) -> dict[ConditionType, ShownCondition]:
    """The conditions a status shows that read as ours, by type (`ShownStatus.by_type`)."""
    return ShownStatus.of(status).by_type()
