"""One plan for the whole pool: the decision, every owned object's action in write order
and what each needs, the advisories, and what the status shows. Pure.

Order: publishing, the relay's objects before the exports that point at them (but an
export of a withdrawn relay object before it); withdrawing, the other way round; other
exports no longer wanted last, after their replacements exist.

Needs (an action whose needs did not all succeed this pass is skipped, and the status
says what it waits for): a relay object is withdrawn only after every export pointing
at it, so an MCS implementation never sees an export of a gone Service; an export is
created only once its object was, and the kinds that object comes after
(`relay/kinds.py`); a relay object's update waits for those kinds (its create moves no
traffic: it goes at once). A need on an object already as wanted is observed done.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.conditions import PUBLISHED_MEANINGS
from dynamo_pool_operator.api.conditions import PublishedReason as Reason
from dynamo_pool_operator.api.dgd import DISCOVERY_BACKEND_ANNOTATION, KUBERNETES_DISCOVERY, Pool
from dynamo_pool_operator.api.relay import Relay
from dynamo_pool_operator.pool.exports.plan import ExportRules, plan_exports
from dynamo_pool_operator.pool.model import (
    Action,
    Advisory,
    Contribution,
    Decision,
    Key,
    Snapshot,
    Verb,
)
from dynamo_pool_operator.pool.relay.kinds import BY_KIND
from dynamo_pool_operator.pool.relay.objects import plan_relay_objects
from dynamo_pool_operator.runtime.objects import describe_controller, is_controlled_by, record

# Publish or withdraw a pool's relay: an ordered chain of named pure checks.
#
# The chain's order is the documented precedence (docs/crd.md's table is generated from
# `CHECKS`), from "may this relay act at all" to "may it write its objects", so the
# reason shown is the one to fix first. The first check that withdraws wins. The last
# holds instead: an invalid spec leaves a published pool running as it is (decision 0013).


def decision(reason: Reason, message: str, *, hold: bool = False) -> Decision:
    """A decision with `reason`: publish exactly when it is `Published`."""
    return Decision(reason is Reason.PUBLISHED, reason, message, hold)


@record
class Facts:
    """What the checks look at: the relay, its pool (None: no DGD), the relay objects by
    kind, and the default discovery backend."""

    relay: Relay
    pool: Pool | None
    relay_objects: Mapping[str, Mapping[str, Any] | None]
    default_discovery_backend: str
    #: The DGD exists but cannot be decoded (why), and no readable version is cached.
    pool_unreadable: str = ""


@record
class Check:
    """One rule: `withdraws(facts)` is the message (what to change) when it stops the pool,
    else None; its one-line rule is the reason's meaning (`PUBLISHED_MEANINGS`)."""

    reason: Reason
    withdraws: Callable[[Facts], str | None]
    #: It holds the pool as it runs instead of withdrawing it (an invalid spec).
    holds: bool = False


def relay_terminating(f: Facts) -> str | None:
    if not f.relay.terminating:
        return None
    return (
        "the DynamoPoolRelay is being deleted; its pool is withdrawn (a finalizer holds "
        "it: the deletion completes when that finalizer is removed)"
    )


def invalid_name(f: Facts) -> str | None:
    relay_name = f.relay.object_name
    name_problems = names.dns1035_label_errors(relay_name)
    if name_problems:
        return (
            f"the relay Service name {relay_name!r} is not a valid Service name: "
            f"{'; '.join(name_problems)}. Name the DynamoPoolRelay (and its DGD) with at most "
            f"{names.DNS1035_MAX - len(names.RELAY_SUFFIX)} lower-case letters, digits or '-'"
        )
    return None


#: What an invalid spec does to a pool that would be published (decision 0013).
HELD_AS_RUNNING = (
    "the relay's objects and exports are kept as they run until the spec is fixed "
    "(nothing is withdrawn)"
)


def invalid_spec(f: Facts) -> str | None:
    if not f.relay.problems:
        return None
    return "; ".join(f.relay.problems) + f"; {HELD_AS_RUNNING}"


def dgd_unreadable(f: Facts) -> str | None:
    if f.pool is not None or not f.pool_unreadable:
        return None
    return (
        f"DynamoGraphDeployment {f.relay.name!r} exists but cannot be decoded: "
        f"{f.pool_unreadable}; make it readable (no field nested past 1,024 levels)"
    )


def dgd_not_found(f: Facts) -> str | None:
    if f.pool is not None:
        return None
    return f"no DynamoGraphDeployment {f.relay.name!r} in namespace {f.relay.namespace!r}"


def dgd_terminating(f: Facts) -> str | None:
    if f.pool is None or not f.pool.terminating:
        return None
    return f"DynamoGraphDeployment {f.pool.name!r} is being deleted"


def kubernetes_discovery_disabled(f: Facts) -> str | None:
    if f.pool is None:
        return None
    backend = f.pool.discovery_backend(f.default_discovery_backend)
    if backend == KUBERNETES_DISCOVERY:
        return None
    return (
        f"the DGD's discovery backend is {backend!r}; a pool needs Kubernetes pod "
        f"discovery: set the DGD annotation {DISCOVERY_BACKEND_ANNOTATION}="
        f"{KUBERNETES_DISCOVERY!r} (or remove it if the operator's discovery.backend is "
        f"{KUBERNETES_DISCOVERY!r})"
    )


def no_workers(f: Facts) -> str | None:
    if f.pool is None or f.pool.workers:
        return None
    return "the DGD has no worker component (type worker, prefill or decode)"


def global_dynamo_namespace(f: Facts) -> str | None:
    if f.pool is None or not f.pool.uses_global_namespace:
        return None
    shared = [c.name for c in f.pool.components if c.global_dynamo_namespace]
    return (
        f"components {shared} use the shared global Dynamo namespace "
        f"{names.GLOBAL_DYNAMO_NAMESPACE!r}; a pool needs its own Dynamo namespace"
    )


def ownership_conflict(f: Facts) -> str | None:
    relay_name = f.relay.object_name
    conflicts = [
        f"{kind} {relay_name!r} has {describe_controller(obj)}"
        for kind, obj in sorted(f.relay_objects.items())
        if obj is not None and not is_controlled_by(obj, f.relay.uid)
    ]
    if not conflicts:
        return None
    return (
        "; ".join(conflicts) + ": the operator never adopts objects; delete the other "
        "object, or use another name for the DynamoPoolRelay and its DGD"
    )


#: The precedence, first match wins.
CHECKS: tuple[Check, ...] = (
    Check(Reason.RELAY_TERMINATING, relay_terminating),
    Check(Reason.INVALID_CONFIGURATION, invalid_name),
    Check(Reason.DGD_UNREADABLE, dgd_unreadable),
    Check(Reason.DGD_NOT_FOUND, dgd_not_found),
    Check(Reason.DGD_TERMINATING, dgd_terminating),
    Check(Reason.KUBERNETES_DISCOVERY_DISABLED, kubernetes_discovery_disabled),
    Check(Reason.NO_WORKERS, no_workers),
    Check(Reason.GLOBAL_DYNAMO_NAMESPACE, global_dynamo_namespace),
    Check(Reason.OWNERSHIP_CONFLICT, ownership_conflict),
    # Last: an invalid spec holds only a pool every other check would publish.
    Check(Reason.INVALID_CONFIGURATION, invalid_spec, holds=True),
)


def decide(
    relay: Relay,
    pool: Pool | None,
    relay_objects: Mapping[str, Mapping[str, Any] | None],
    *,
    default_discovery_backend: str,
    pool_unreadable: str = "",
) -> Decision:
    """Run the chain for `relay` given its pool (None when the DGD is absent or cannot be
    read: `pool_unreadable` says why) and the cached relay objects by kind."""
    facts = Facts(relay, pool, relay_objects, default_discovery_backend, pool_unreadable)
    for check in CHECKS:
        message = check.withdraws(facts)
        if message is not None:
            return decision(check.reason, message, hold=check.holds)
    relay_name = relay.object_name
    return decision(Reason.PUBLISHED, f"relay Service {relay_name!r} is published")


def precedence_table() -> str:
    """docs/crd.md's table of withdrawal reasons, in precedence order (drift-tested)."""
    rows = ["| Reason | Does | What to change |", "|---|---|---|"]
    rows += [
        f"| `{c.reason.value}` | {'holds' if c.holds else 'withdraws'} | "
        f"{PUBLISHED_MEANINGS[c.reason]} |"
        for c in CHECKS
    ]
    return "\n".join(rows) + "\n"


@record
class Plan:
    decision: Decision
    relay_actions: tuple[Action, ...]
    contributions: tuple[Contribution, ...]
    #: Every action, in the order they are carried out; ordered once.
    _ordered: tuple[Action, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ordered", self._order())

    @property
    def actions(self) -> tuple[Action, ...]:
        """Every action, in the order they are carried out."""
        return self._ordered

    def _order(self) -> tuple[Action, ...]:
        others = tuple([a for c in self.contributions for a in c.actions])
        if self.decision.keeps_pool:
            relay_names = {a.name for a in self.relay_actions}
            ahead = [not a.wanted and a.name in relay_names for a in others]
            first = tuple([a for a, go in zip(others, ahead, strict=True) if go])
            rest = tuple([a for a, go in zip(others, ahead, strict=True) if not go])
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
    if action.verb is not Verb.APPLY:
        return ()  # a create moves no traffic yet: an export of it waits instead
    # The kinds its update waits for (`relay/kinds.py`), when this pass writes them.
    before = [relay.get((kind, action.name)) for kind in BY_KIND[action.resource.kind].after]
    return tuple([b.key for b in before if b is not None and b.verb in _WRITING])


def _absent_until_written(action: Action | None) -> bool:
    """Created by this pass, or absent and held: it exists only once written."""
    if action is None:
        return False
    return action.verb is Verb.CREATE or (action.verb is Verb.HOLD and action.live is None)


def _other_needs(action: Action, relay: dict[Key, Action]) -> tuple[Key, ...]:
    if action.verb is not Verb.CREATE or action.points_at is None:
        return ()
    target = relay.get(action.points_at)
    if target is None:
        return ()
    # The export waits for its object, and for the kinds that object comes after, where
    # they exist only once written: never an export of a relay without its pods.
    after = BY_KIND[target.resource.kind].after
    waits = [target, *(relay.get((kind, target.name)) for kind in after)]
    return tuple([w.key for w in waits if w is not None and _absent_until_written(w)])


def with_needs(
    decision: Decision,
    relay_actions: tuple[Action, ...],
    contributions: tuple[Contribution, ...],
) -> tuple[tuple[Action, ...], tuple[Contribution, ...]]:
    """The actions with what each needs recorded (the rules above)."""
    relay = {a.key: a for a in relay_actions}
    others = [a for c in contributions for a in c.actions]
    relay_actions = tuple(
        [_needing(a, _relay_needs(a, decision, relay, others)) for a in relay_actions]
    )
    contributions = tuple([_contribution_needing(c, relay) for c in contributions])
    return relay_actions, contributions


def _needing(action: Action, needs: tuple[Key, ...]) -> Action:
    """`action` with `needs` (itself when it needs nothing: no copy in a quiet pass)."""
    return dataclasses.replace(action, needs=needs) if needs != action.needs else action


def _contribution_needing(c: Contribution, relay: dict[Key, Action]) -> Contribution:
    actions = tuple([_needing(a, _other_needs(a, relay)) for a in c.actions])
    same = all(a is b for a, b in zip(actions, c.actions, strict=True))
    return c if same else dataclasses.replace(c, actions=actions)


def make_plan(
    snapshot: Snapshot,
    exports: ExportRules | None,
    *,
    default_discovery_backend: str,
) -> Plan:
    """The pass's plan: the decision, the relay's objects, then the exports (None: the
    feature is off), with what each action needs."""
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
        (plan_exports(snapshot, decision, exports),) if exports is not None else (),
    )
    return Plan(decision, relay_actions, contributions)
