"""The relay's own objects in the plan: its Deployment and Service. Pure.

Each climbs the verb ladder every owned object climbs (`pool/ladder.py`). Published:
each is created when absent, applied when the drift rule (`pool/drift.py`, from the
digest the cache keeps: `render.rule`) says an apply would change it, left alone
otherwise; an object of ours that still shows its create's fields with the create (not
handed over to the apply manager) is handed over right before its first apply. The
decision already made sure every existing one is ours (else `OwnershipConflict`).
Withdrawn: each the relay controls is deleted; one being deleted is waited for; anyone
else's is never touched.
"""

from __future__ import annotations

from typing import Any

from dynamo_pool_operator.api import labels, names
from dynamo_pool_operator.api.events import EventReason
from dynamo_pool_operator.api.mcs import CLUSTER_ID_PROPERTY
from dynamo_pool_operator.pool.ladder import Owned, Rung, ladder
from dynamo_pool_operator.pool.model import Action, Decision, EventNames, Snapshot, Verb
from dynamo_pool_operator.pool.relay import render
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES, Resource

#: The relay objects by kind, in the order they are written when publishing.
RELAY_OBJECTS: tuple[tuple[str, Resource], ...] = (
    ("Deployment", DEPLOYMENTS),
    ("Service", SERVICES),
)
#: A refused write of a relay object is a Warning about that object; successful writes
#: of the relay's own objects record no Event (they follow the relay's spec).
RELAY_EVENTS = EventNames(failed=EventReason.RELAY_WRITE_FAILED)
#: A Service of the wrong shape is deleted to be created again: that interrupts the
#: pool's import, so it is said (Normal), unlike the relay's other writes.
SERVICE_REPLACED = EventNames(
    failed=EventReason.RELAY_WRITE_FAILED, withdrawn=EventReason.RELAY_SERVICE_REPLACED
)


#: Why the Deployment is held while the cluster's ID is unknown.
CLUSTER_ID_UNKNOWN = (
    f"held: the cluster's ID ({CLUSTER_ID_PROPERTY}) cannot be read and no earlier one "
    "is known, and the relay pods get it as DYN_CLUSTER_ID; it is written once the "
    "property can be read (or set spec.clusterId)"
)


def desired_objects(snapshot: Snapshot) -> dict[str, dict[str, Any]]:
    """What the relay objects should look like, by kind (published relays only); no
    Deployment while the cluster's ID is unknown (it would roll every relay pod twice:
    without the ID, then with it)."""
    relay, pool = snapshot.relay, snapshot.pool
    assert pool is not None
    cluster_id = snapshot.effective_cluster_id
    out = {"Service": render.service(relay)}
    if cluster_id is not None:
        out["Deployment"] = render.deployment(relay, pool, cluster_id)
    return out


def plan_relay_objects(snapshot: Snapshot, decision: Decision) -> tuple[Action, ...]:
    relay = snapshot.relay
    name = names.relay_name(relay.name)
    actions: list[Action] = []
    if decision.publish:
        desired = desired_objects(snapshot)
        for kind, res in RELAY_OBJECTS:
            live, body = snapshot.relay_objects.get(kind), desired.get(kind)
            step = ladder(
                Owned(
                    live,
                    body,
                    relay.uid,
                    render.rule(kind),
                    # `spec.clusterIP` is immutable: the Service of the other shape is
                    # deleted (as read: uid and resourceVersion) and created again once
                    # it is gone.
                    replace=kind == "Service" and live is not None and relay.reshaped(live),
                    # The caches watch our objects by label: one of the name without our
                    # labels shows only to a create (whose it is decides the next pass).
                    may_be_hidden=True,
                    apply_manager=labels.FIELD_MANAGER,
                )
            )
            assert step.verb is not None  # wanted: every rung acts
            if step.rung is Rung.HELD:  # its input cannot be read: left as it is
                actions.append(
                    Action(
                        Verb.HOLD,
                        res,
                        relay.namespace,
                        name,
                        RELAY_EVENTS,
                        live=live,
                        cause=CLUSTER_ID_UNKNOWN,
                    )
                )
                continue
            if step.rung is Rung.REPLACED:
                actions.append(
                    Action(step.verb, res, relay.namespace, name, SERVICE_REPLACED, live=live)
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
                )
            )
        return tuple(actions)
    if not names.is_valid_service_name(name):
        return ()  # no object can carry that name
    for kind, res in RELAY_OBJECTS:
        live = snapshot.relay_objects.get(kind)
        step = ladder(Owned(live, None, relay.uid, render.rule(kind), wanted=False))
        if step.verb is None:
            continue  # absent, or someone else's: never touched
        actions.append(
            Action(step.verb, res, relay.namespace, name, RELAY_EVENTS, live=live, wanted=False)
        )
    return tuple(actions)
