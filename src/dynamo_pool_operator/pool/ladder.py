"""The one verb ladder: what to do about one object a relay owns, or would own. Pure.

The relay's Deployment and Service (`pool/relay/objects.py`) and each ServiceExport
(`pool/exports/plan.py`) climb the same rungs, first match wins:

1. not wanted: absent or anyone else's -> nothing (never touched); ours being
   deleted -> WAIT; ours -> WITHDRAW; absent from a cache that may hide it (it watches
   by label selector) and not read by name since -> LOOK (read the name once: whose the
   object is, if any, goes to the next pass);
2. wanted but its body cannot be made (an input cannot be read) -> HOLD, left as it is;
3. wanted, ours, but to be replaced (a field that cannot change in place, a hold
   that takes it away meanwhile) -> WAIT while being deleted, else WITHDRAW; created
   again once gone;
4. absent -> CREATE, or nothing while its creation is held back;
5. being deleted -> WAIT until gone;
6. anyone else's -> FOREIGN: never adopted, repaired or deleted;
7. ours -> APPLY when the drift rule (`drift`, below) says an apply would change
   it, else NONE.

Whose an object is is decided here, by its controller reference, and nowhere else in
the plan; the Events an action records follow from its verb (`model.EventNames`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.pool.model import Verb
from dynamo_pool_operator.runtime.objects import (
    VIEW,
    Shape,
    View,
    contains,
    is_controlled_by,
    is_terminating,
    needs_apply,
    needs_handover,
    record,
)

# The one drift rule: would applying what we want change the object the cache shows?
#
# Every kind a relay owns declares how it is compared (a `Rule`), and `drift` answers for
# all, so "ours and right" means one thing for the Deployment, the Service and each
# export: every field of the body is in the live object with the same value (`contains`:
# others' fields are no drift, quantities compare by value); a kind cached as a digest is
# answered from that view; a kind that names what it repairs is compared part by part.


@record
class Part:
    """A named part of an object we own: its name as an Event note says it, and where it
    is in an object (the same for the live object and the body)."""

    name: str
    of: Callable[[Mapping[str, Any]], Any]


@record
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


@record
class Drift:
    """Whether an apply would change the object, and which named parts it would."""

    drifted: bool = False
    #: The parts that differ, for a kind compared by parts (empty otherwise).
    fields: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.drifted


#: Nothing would change.
NO_DRIFT = Drift()
#: An apply would change the object (a kind compared whole: no parts to name).
_DRIFTED = Drift(True)


def drift(rule: Rule, live: Mapping[str, Any], body: Mapping[str, Any]) -> Drift:
    """Would applying `body` change `live` (as the kind's cache keeps it)?"""
    if rule.parts:
        fields = []
        for part in rule.parts:
            have, want = part.of(live), part.of(body)
            if have != want and not contains(have, want):  # equal: settled in C
                fields.append(part.name)
        return Drift(True, tuple(fields)) if fields else NO_DRIFT
    view = live.get(VIEW)
    if rule.view is not None and type(view) is View:
        # The body's render hash keys the shape's digest of it: one digest per render.
        hashed = (body.get("metadata") or {}).get("annotations") or {}
        return (
            _DRIFTED if rule.view.drifted(view, body, hashed.get(names.RENDER_HASH)) else NO_DRIFT
        )
    return _DRIFTED if needs_apply(live, body, quantities=rule.quantities) else NO_DRIFT


class Rung(StrEnum):
    """Which rung decided (why the verb)."""

    UNTOUCHED = "untouched"  # not wanted, and absent or anyone else's: no action
    HIDDEN = "hidden"  # not wanted, absent from a cache that may hide it: read the name
    UNWANTED = "unwanted"  # ours and not wanted
    HELD = "held"  # wanted, its body cannot be made
    REPLACED = "replaced"  # wanted, ours, deleted to be created again
    ABSENT = "absent"
    DEFERRED = "deferred"  # absent, its creation held back: no action
    DELETING = "deleting"
    FOREIGN = "foreign"
    DRIFTED = "drifted"
    RIGHT = "right"


@record
class Owned:
    """One object of a relay's as one pass sees it."""

    #: The cached object (None: the cache shows none of the name).
    live: Mapping[str, Any] | None
    #: What a create or apply writes (None while wanted: an input it needs cannot be read).
    body: Mapping[str, Any] | None
    #: The relay's uid: its objects are those it controls.
    owner_uid: str
    #: How the kind is compared with its body.
    rule: Rule
    wanted: bool = True
    #: Ours is deleted to be created again (rung 3).
    replace: bool = False
    #: False: an absent one is not created in this pass (rung 4).
    create: bool = True
    #: The kind's cache may hide an object of the name (it watches by label): a create
    #: that finds the name taken reads it; not wanted and absent, the name is read once.
    may_be_hidden: bool = False
    #: The manager a create's fields are handed over to before the first apply ("": none).
    apply_manager: str = ""


@record
class Step:
    """The ladder's answer for one object."""

    #: None: no action.
    verb: Verb | None
    rung: Rung
    #: The drift rule's verdict (rung 7 only).
    drift: Drift = NO_DRIFT
    #: APPLY: hand the create's fields over to `apply_manager` first.
    hand_over: bool = False
    #: CREATE: read the object of the name if it is found taken.
    read_if_taken: bool = False


# The answers that carry nothing of the object, made once: every settled object of a
# fleet gets `_RIGHT` on every pass.
_UNTOUCHED = Step(None, Rung.UNTOUCHED)
_LOOK = Step(Verb.LOOK, Rung.HIDDEN)
_HELD = Step(Verb.HOLD, Rung.HELD)
_DEFERRED = Step(None, Rung.DEFERRED)
_DELETING = Step(Verb.WAIT, Rung.DELETING)
_FOREIGN = Step(Verb.FOREIGN, Rung.FOREIGN)
_RIGHT = Step(Verb.NONE, Rung.RIGHT, NO_DRIFT)


def _delete(terminating: bool, rung: Rung) -> Step:
    return Step(Verb.WAIT if terminating else Verb.WITHDRAW, rung)


def ladder(o: Owned) -> Step:
    """The verb for `o` (see the module's rungs)."""
    live = o.live
    if live is None:
        if not o.wanted:
            return _LOOK if o.may_be_hidden else _UNTOUCHED
        if o.body is None:
            return _HELD
        if not o.create:
            return _DEFERRED
        return Step(Verb.CREATE, Rung.ABSENT, read_if_taken=o.may_be_hidden)
    ours = is_controlled_by(live, o.owner_uid)
    terminating = is_terminating(live)
    if not o.wanted:
        return _delete(terminating, Rung.UNWANTED) if ours else _UNTOUCHED
    if o.body is None:
        return _HELD
    if o.replace and ours:
        return _delete(terminating, Rung.REPLACED)
    if terminating:
        return _DELETING
    if not ours:
        return _FOREIGN
    verdict = drift(o.rule, live, o.body)
    if not verdict:
        return _RIGHT
    # The create's fields go to the apply manager only when an apply needs them
    # (decision 0003): one write per created object, none meanwhile.
    hand_over = bool(o.apply_manager) and needs_handover(live, o.apply_manager)
    return Step(Verb.APPLY, Rung.DRIFTED, verdict, hand_over=hand_over)
