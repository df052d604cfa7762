"""The one drift rule: would applying what we want change the object the cache shows?

Every kind a relay owns declares how it is compared (a `Rule`, next to what makes its
body), and `drift` answers for all of them, so "ours and right" means the same thing
for the relay's Deployment, its Service and each ServiceExport:

- every field of the body is in the live object with the same value
  (`runtime/objects/diff.contains`: fields others set are no drift, quantities are
  compared by value);
- a kind whose cache keeps a digest instead of the object (`runtime/objects/owned.py`)
  is answered from that view, which says what `contains` says on the whole object;
- a kind that names what it repairs (an Event note says which fields were taken back)
  is compared part by part, each part named.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dynamo_pool_operator.api import labels
from dynamo_pool_operator.runtime.objects.diff import contains, needs_apply
from dynamo_pool_operator.runtime.objects.owned import VIEW, Shape


@dataclass(frozen=True, slots=True)
class Part:
    """A named part of an object we own: its name as an Event note says it, and where it
    is in an object (the same for the live object and the body)."""

    name: str
    of: Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class Rule:
    """How one kind we own is compared with what an apply of it would write."""

    #: Compared part by part, each named when it differs; empty: the whole object.
    parts: tuple[Part, ...] = ()
    #: The shape of the view the kind's cache keeps instead of the object, if it does.
    view: Shape | None = None
    #: Maps of Kubernetes quantities (dotted paths from the root), compared by value:
    #: a kind compared whole only (a part has no path from the root).
    quantities: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.parts and self.quantities:
            raise ValueError("quantities are compared at paths of the whole object: no parts")


@dataclass(frozen=True, slots=True)
class Drift:
    """Whether an apply would change the object, and which named parts it would."""

    drifted: bool = False
    #: The parts that differ, for a kind compared by parts (empty otherwise).
    fields: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.drifted


#: Nothing would change.
NO_DRIFT = Drift()


def drift(rule: Rule, live: Mapping[str, Any], body: Mapping[str, Any]) -> Drift:
    """Would applying `body` change `live` (as the kind's cache keeps it)?"""
    if rule.parts:
        fields = tuple(p.name for p in rule.parts if not contains(p.of(live), p.of(body)))
        return Drift(bool(fields), fields)
    view = live.get(VIEW)
    if rule.view is not None and isinstance(view, Mapping):
        # The body's render hash keys the shape's digest of it: one digest per render.
        hashed = (body.get("metadata") or {}).get("annotations") or {}
        return Drift(rule.view.drifted(view, body, hashed.get(labels.RENDER_HASH)))
    return Drift(needs_apply(live, body, quantities=rule.quantities))
