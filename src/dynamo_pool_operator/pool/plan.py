"""One plan for the whole pool: the decision, every owned object's action in the order
the writes must go and what each needs, the advisories, and what the status shows. Pure.

Order: publishing, the relay's Deployment and Service come first and the
contributors' objects (exports) after, since an export points at its Service — but
an export of a relay object that is withdrawn goes first (the relay Service replaced
by one of the other shape goes after its export); withdrawing, the other way round.
Other exports no longer wanted (a renamed frontend's) go last, after the new ones are
created.

Needs (the executor skips an action whose needs did not all succeed in this pass, and
the status says what it waits for):
- a relay object is withdrawn only after every export that points at it was (a
  replaced Service), and, withdrawing the pool, after every export of the pool was:
  an MCS implementation never sees an export of a Service already gone;
- an export is created for a relay object only once that object was created;
- the relay Service is written only after the Deployment's write in the same pass
  succeeded (a port moves in the pods before the Service sends traffic to it).
A need on an object that is already as wanted is not recorded: it is observed done.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from dynamo_pool_operator.pool.checks import decide
from dynamo_pool_operator.pool.model import (
    Action,
    Advisory,
    Contribution,
    Contributor,
    Decision,
    Key,
    Snapshot,
    Verb,
)
from dynamo_pool_operator.pool.relay.objects import plan_relay_objects


@dataclass(frozen=True, slots=True)
class Plan:
    decision: Decision
    relay_actions: tuple[Action, ...]
    contributions: tuple[Contribution, ...]

    @property
    def actions(self) -> tuple[Action, ...]:
        """Every action, in the order they are carried out."""
        others = tuple(a for c in self.contributions for a in c.actions)
        if self.decision.publish:
            relay_names = {a.name for a in self.relay_actions}
            ahead = [not a.wanted and a.name in relay_names for a in others]
            first = tuple(a for a, go in zip(others, ahead, strict=True) if go)
            rest = tuple(a for a, go in zip(others, ahead, strict=True) if not go)
            return first + self.relay_actions + rest
        return others + self.relay_actions

    @property
    def advisories(self) -> tuple[Advisory, ...]:
        return tuple(w for c in self.contributions for w in c.advisories)


#: Verbs after which the object exists as the plan wants it only if they succeed.
_WRITING = (Verb.CREATE, Verb.APPLY, Verb.HOLD)


def _relay_needs(
    action: Action, decision: Decision, relay: dict[Key, Action], others: Sequence[Action]
) -> tuple[Key, ...]:
    if action.verb is Verb.WITHDRAW:
        going = [o for o in others if not o.wanted]
        if decision.publish:  # replaced: after the exports that point at it
            going = [o for o in going if o.points_at == action.key]
        return tuple(o.key for o in going)
    if action.resource.kind == "Service" and action.verb in (Verb.CREATE, Verb.APPLY):
        # Publishing plans the Deployment with the Service, always.
        deployment = relay[("Deployment", action.name)]
        if deployment.verb in _WRITING:
            return (deployment.key,)
    return ()


def _other_needs(action: Action, relay: dict[Key, Action]) -> tuple[Key, ...]:
    if action.verb is not Verb.CREATE or action.points_at is None:
        return ()
    target = relay.get(action.points_at)
    return (target.key,) if target is not None and target.verb is Verb.CREATE else ()


def with_needs(
    decision: Decision,
    relay_actions: tuple[Action, ...],
    contributions: tuple[Contribution, ...],
) -> tuple[tuple[Action, ...], tuple[Contribution, ...]]:
    """The actions with what each needs recorded (the rules above)."""
    relay = {a.key: a for a in relay_actions}
    others = [a for c in contributions for a in c.actions]
    relay_actions = tuple(
        dataclasses.replace(a, needs=_relay_needs(a, decision, relay, others))
        for a in relay_actions
    )
    contributions = tuple(
        dataclasses.replace(
            c,
            actions=tuple(dataclasses.replace(a, needs=_other_needs(a, relay)) for a in c.actions),
        )
        for c in contributions
    )
    return relay_actions, contributions


def make_plan(
    snapshot: Snapshot,
    contributors: Sequence[Contributor],
    *,
    default_discovery_backend: str,
) -> Plan:
    decision = decide(
        snapshot.relay,
        snapshot.pool,
        snapshot.relay_objects,
        default_discovery_backend=default_discovery_backend,
        pool_unreadable=snapshot.pool_unreadable,
    )
    relay_actions, contributions = with_needs(
        decision,
        plan_relay_objects(snapshot, decision),
        tuple(c.plan(snapshot, decision) for c in contributors),
    )
    return Plan(decision, relay_actions, contributions)
