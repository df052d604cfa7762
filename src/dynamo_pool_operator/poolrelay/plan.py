"""One plan for the whole pool: the decision, every owned object's action in the order
the writes must go, the advisories, and what the status shows. Pure.

Order: publishing, the relay's Deployment and Service come first and the
contributors' objects (exports) after, since an export points at its Service — but
an export of a relay object that is withdrawn goes first (the relay Service replaced
by one of the other shape goes after its export); withdrawing, the other way round.
An MCS implementation never sees an export of a Service already gone. Other exports
no longer wanted (a renamed frontend's) go last, after the new ones are created.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..pipeline.model import Action, Advisory, Contribution, Contributor, Decision, Snapshot
from .checks import decide
from .objects import plan_relay_objects


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
    )
    return Plan(
        decision,
        plan_relay_objects(snapshot, decision),
        tuple(c.plan(snapshot, decision) for c in contributors),
    )
