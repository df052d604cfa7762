"""The relay's status, computed purely, and written only when it changes.

A status write is itself an event on the relay; writing the same status on
every reconcile would be a feedback loop (and a write per pool per resync).
So the desired status is compared with the cached one, and each condition keeps
its `lastTransitionTime` while its status stays the same.

Conditions (KEP-1623 conventions; Cluster API's summary over detail conditions):
`Published` (the check chain's decision), `RelayAvailable` (`availability.py`),
`Exported` (with an MCS implementation: `exports/verdict.py`), and `Ready`, True
only when all the others are, with the first failing one's reason — so
`kubectl wait --for=condition=Ready` waits for a pool that is importable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..api import crd, names
from ..api.relay import API_VERSION, Relay
from ..pipeline.model import ConditionView, Decision, StatusLine
from ..runtime import conditions
from .availability import Availability, AvailableReason

READY = "Ready"
PUBLISHED = "Published"
RELAY_AVAILABLE = "RelayAvailable"
#: Ready's reason when every part is True.
READY_REASON = "Ready"


@dataclass(frozen=True, slots=True)
class Part:
    """A condition the `Ready` summary is made of, as the pass computed it."""

    type: str
    status: str
    reason: str
    message: str


#: False reasons that record no Warning: the cause has its own Event already (a refused
#: write), follows from another condition (a withdrawn pool is withdrawn everywhere), or
#: is the normal first moments of a relay (a new Deployment its controller has not
#: observed yet; one that stays unavailable turns `Unavailable`, which warns).
QUIET_REASONS = frozenset(
    {
        AvailableReason.WRITE_REFUSED,
        AvailableReason.WITHDRAWN,
        AvailableReason.PROGRESSING,
        "ExportFailed",
        "Withdrawn",
    }
)


def warned(c: Mapping[str, Any]) -> bool:
    """Whether a condition that just changed records a Warning: it turned False (not
    Unknown: `Pending` is the implementation still at work, not a fault) with a reason
    that is not quiet."""
    return c.get("status") == "False" and c.get("reason") not in QUIET_REASONS


def summary(parts: Sequence[Part]) -> Part:
    """`Ready`: True only when every part is True; otherwise the first part that is not
    (in the order given: Published, RelayAvailable, Exported), with its reason."""
    for part in parts:
        if part.status != "True":
            return Part(READY, "False", part.reason, f"{part.type}: {part.message}")
    said = "; ".join(p.message for p in parts[1:]) if len(parts) > 1 else parts[0].message
    return Part(READY, "True", READY_REASON, f"the pool is published: {said}")


def desired_status(
    relay: Relay,
    current: Mapping[str, Any] | None,
    decision: Decision,
    *,
    cluster_id: str,
    exports: Sequence[StatusLine],
    available: Availability,
    exported: ConditionView | None,
    now: datetime,
) -> dict[str, Any]:
    """The status the relay should show; `current` is the cached `status` (or None).
    `exported` is absent without an MCS implementation (and so is its condition)."""
    current = current or {}
    parts = [
        Part(
            PUBLISHED,
            "True" if decision.publish else "False",
            str(decision.reason),
            decision.message,
        ),
        Part(RELAY_AVAILABLE, available.status, str(available.reason), available.message),
    ]
    if exported is not None:
        parts.append(Part(exported.type, exported.status, exported.reason, exported.message))
    parts.append(summary(parts))
    shown = current.get("conditions")
    status: dict[str, Any] = {
        "observedGeneration": relay.generation,
        "conditions": [
            conditions.condition(
                p.type,
                p.status,
                p.reason,
                p.message,
                generation=relay.generation,
                previous=conditions.find(shown, p.type),
                now=now,
            )
            for p in parts
        ],
        "serviceName": names.relay_name(relay.name) if decision.publish else "",
        "clusterId": cluster_id,
        "relayPods": available.pods,
        "exports": [e.to_dict() for e in exports],
    }
    return status


def changed_conditions(
    current: Mapping[str, Any] | None, desired: Mapping[str, Any]
) -> list[Mapping[str, Any]]:
    """The desired conditions whose status or reason differs from what the relay shows:
    the transitions worth an Event (each once, when the status that shows it is written)."""
    shown = (current or {}).get("conditions")
    out = []
    for c in desired.get("conditions") or ():
        before = conditions.find(shown, c["type"])
        if before is None or (before.get("status"), before.get("reason")) != (
            c["status"],
            c["reason"],
        ):
            out.append(c)
    return out


def status_changed(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """True when writing `desired` would change what the relay shows.

    An empty list or map in `desired` matches an absent field: applying `exports: []`
    over a list we own removes its items, and the server then omits the field, so the
    next pass must not write the same empty list again."""
    current = current or {}
    return any(not _same(current.get(k), v) for k, v in desired.items())


def _same(shown: Any, desired: Any) -> bool:
    if isinstance(desired, list | dict) and not desired:
        return not shown
    return bool(shown == desired)


def status_apply(relay: Relay, status: Mapping[str, Any]) -> dict[str, Any]:
    """A server-side apply body for the status subresource. It carries the relay's uid,
    so a status computed for a deleted relay never lands on a new one of the same name."""
    return {
        "apiVersion": API_VERSION,
        "kind": crd.KIND,
        "metadata": {"name": relay.name, "namespace": relay.namespace, "uid": relay.uid},
        "status": dict(status),
    }
