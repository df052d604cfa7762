"""The relay's own objects in the plan: one action for each kind it owns. Pure.

Each kind (`kinds.py`) climbs the verb ladder (`pool/ladder.py`). Published: created,
applied on drift (handed over to the apply manager first if still the create's), or
withdrawn when no longer wanted. Held (invalid spec): left as they run. Withdrawn: ours
deleted, one being deleted waited for, anyone else's never touched, one the caches may
hide read by name once.
"""

from __future__ import annotations

from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.pool.ladder import Owned, Rung, ladder
from dynamo_pool_operator.pool.model import Action, Decision, Snapshot, Verb
from dynamo_pool_operator.pool.relay.kinds import RELAY_EVENTS, RELAY_KINDS, rule


def desired_objects(snapshot: Snapshot) -> dict[str, dict[str, Any]]:
    """The relay objects a published relay wants, by kind; none of a kind whose body cannot
    be made now (the Deployment while the cluster's ID is unknown)."""
    out = {}
    for kind in RELAY_KINDS:
        body = kind.render(snapshot) if kind.wanted(snapshot.relay) else None
        if body is not None:
            out[kind.kind] = dict(body)
    return out


#: Why the relay objects are held while the relay's spec is invalid.
SPEC_INVALID = (
    "held: the relay's spec is invalid (Published says which field), so it cannot be "
    "rendered; it runs as last written and is written again once the spec is valid"
)


def plan_relay_objects(snapshot: Snapshot, decision: Decision) -> tuple[Action, ...]:
    relay = snapshot.relay
    name = relay.object_name
    actions: list[Action] = []
    if not decision.keeps_pool and not names.is_valid_service_name(name):
        return ()  # no object can carry that name
    for kind in RELAY_KINDS:
        res = kind.resource
        live = snapshot.relay_objects.get(res.kind)
        wanted = decision.keeps_pool and kind.wanted(relay)
        if decision.hold and live is not None:
            wanted = True  # held (an invalid spec): left as it runs, wanted or not
        # Held, no body can be made: each is left as it runs.
        body = kind.render(snapshot) if wanted and decision.publish else None
        step = ladder(
            Owned(
                live,
                body,
                relay.uid,
                rule(res.kind),
                wanted=wanted,
                replace=decision.publish and kind.replaced(snapshot),
                # One of the name without our labels shows only to a create, or (not
                # wanted) to a read of its name.
                may_be_hidden=wanted or res.kind in snapshot.hidden_unread,
                apply_manager=names.FIELD_MANAGER,
            )
        )
        if step.verb is None:
            continue  # not wanted, and absent or someone else's: never touched
        if step.rung is Rung.HELD:  # its input cannot be read: left as it is
            cause = kind.held_because if decision.publish else SPEC_INVALID
            actions.append(
                Action(Verb.HOLD, res, relay.namespace, name, RELAY_EVENTS, live=live, cause=cause)
            )
            continue
        if step.rung is Rung.REPLACED:
            actions.append(
                Action(step.verb, res, relay.namespace, name, kind.replaced_events, live=live)
            )
            continue
        actions.append(
            Action(
                step.verb,
                res,
                relay.namespace,
                name,
                RELAY_EVENTS,
                live=live,
                body=body if step.verb is not Verb.WAIT else None,
                hand_over=step.hand_over,
                read_if_taken=step.read_if_taken,
                wanted=wanted,
            )
        )
    return tuple(actions)
