"""The relay's status, computed purely, and written only when it changes.

A status write is itself an event on the relay; writing the same status on
every reconcile would be a feedback loop (and a write per pool per resync).
So the desired status is compared with the cached one, and the `Ready`
condition keeps its `lastTransitionTime` while its status stays the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..api import crd, names
from ..api.relay import API_VERSION, Relay
from .decide import Decision

READY = "Ready"
#: The Ready reason of a published relay whose own Deployment or Service write the API
#: server refused: the pool is not importable while its relay objects are missing.
WRITE_REFUSED = "WriteRefused"


@dataclass(frozen=True, slots=True)
class ExportStatus:
    """One line of `status.exports[]`: a Service the pool exports or skips, and why."""

    name: str
    state: str
    reason: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"name": self.name, "state": self.state}
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        return out


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def desired_status(
    relay: Relay,
    current: Mapping[str, Any] | None,
    decision: Decision,
    *,
    cluster_id: str,
    exports: Sequence[ExportStatus],
    now: datetime,
    refused: str = "",
) -> dict[str, Any]:
    """The status the relay should show; `current` is the cached `status` (or None).
    `refused` names the relay's own writes the API server refused (published relays
    only): Ready is then False with reason `WriteRefused`."""
    current = current or {}
    old_ready = next(
        (
            c
            for c in current.get("conditions") or ()
            if isinstance(c, Mapping) and c.get("type") == READY
        ),
        None,
    )
    ready = decision.publish and not refused
    reason = decision.reason.value if not (decision.publish and refused) else WRITE_REFUSED
    message = refused if decision.publish and refused else decision.message
    status_value = "True" if ready else "False"
    transition = (
        old_ready["lastTransitionTime"]
        if old_ready
        and old_ready.get("status") == status_value
        and old_ready.get("lastTransitionTime")
        else _rfc3339(now)
    )
    status: dict[str, Any] = {
        "observedGeneration": relay.generation,
        "conditions": [
            {
                "type": READY,
                "status": status_value,
                "reason": reason,
                "message": message[:32768],
                "observedGeneration": relay.generation,
                "lastTransitionTime": transition,
            }
        ],
        "serviceName": names.relay_name(relay.name) if decision.publish else "",
        "clusterId": cluster_id,
        "exports": [e.to_dict() for e in exports],
    }
    return status


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
