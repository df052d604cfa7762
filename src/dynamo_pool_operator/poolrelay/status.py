"""The relay's status, computed purely, and written only when it changes.

A status write is itself an event on the relay; writing the same status on
every reconcile would be a feedback loop (and a write per pool per resync).
So the desired status is compared with the cached one, and the `Ready`
condition keeps its `lastTransitionTime` while its status stays the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..api import crd, names
from ..api.relay import API_VERSION, Relay
from ..pipeline.model import Decision, StatusLine
from ..runtime import conditions

READY = "Ready"
#: The Ready reason of a published relay whose own Deployment or Service write the API
#: server refused: the pool is not importable while its relay objects are missing.
WRITE_REFUSED = "WriteRefused"
#: The Ready reason of a published relay one of whose own objects is still being
#: deleted (it is created again once gone).
PROGRESSING = "Progressing"


def desired_status(
    relay: Relay,
    current: Mapping[str, Any] | None,
    decision: Decision,
    *,
    cluster_id: str,
    exports: Sequence[StatusLine],
    now: datetime,
    refused: str = "",
    waiting: Sequence[str] = (),
) -> dict[str, Any]:
    """The status the relay should show; `current` is the cached `status` (or None).
    Published relays only: `refused` names the relay's own writes the API server
    refused (Ready False, `WriteRefused`); `waiting`, its own objects still being
    deleted (Ready False, `Progressing`)."""
    current = current or {}
    reason, message = str(decision.reason), decision.message
    if decision.publish and refused:
        reason, message = WRITE_REFUSED, refused
    elif decision.publish and waiting:
        reason = PROGRESSING
        message = f"{', '.join(waiting)} is being deleted; it is created again once gone"
    ready = decision.publish and not refused and not waiting
    status: dict[str, Any] = {
        "observedGeneration": relay.generation,
        "conditions": [
            conditions.condition(
                READY,
                "True" if ready else "False",
                reason,
                message,
                generation=relay.generation,
                previous=conditions.find(current.get("conditions"), READY),
                now=now,
            )
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
