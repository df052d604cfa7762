"""The relay's own objects in the plan: its Deployment and Service. Pure.

Published: each is created when absent, applied when the cache shows it drifted
from what `render` makes (`pool/drift.py`: a digest of the cached view), left alone otherwise; an
object of ours that still shows its create's fields with the create (not handed over
to the apply manager) is handed over right before its first apply. The decision
already made sure every existing one is ours (else `OwnershipConflict`). Withdrawn:
each the relay controls is deleted; one being deleted is waited for; anyone else's is
never touched.
"""

from __future__ import annotations

from typing import Any

from dynamo_pool_operator.api import labels, names
from dynamo_pool_operator.api.events import EventReason
from dynamo_pool_operator.api.mcs import CLUSTER_ID_PROPERTY
from dynamo_pool_operator.pool.drift import drift
from dynamo_pool_operator.pool.model import Action, Decision, EventNames, Snapshot, Verb
from dynamo_pool_operator.pool.relay import render
from dynamo_pool_operator.runtime.objects.meta import Meta
from dynamo_pool_operator.runtime.objects.ownership import is_controlled_by
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES, Resource
from dynamo_pool_operator.runtime.writes.handover import needs_handover

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
            if body is None:  # its input cannot be read: left as it is
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
            if kind == "Service" and live is not None and relay.reshaped(live):
                # `spec.clusterIP` is immutable: the Service of the other shape is deleted
                # (as read: uid and resourceVersion) and created again once it is gone.
                actions.append(
                    Action(
                        Verb.WAIT if Meta(live).terminating else Verb.WITHDRAW,
                        res,
                        relay.namespace,
                        name,
                        SERVICE_REPLACED,
                        live=live,
                    )
                )
                continue
            hand_over = False
            if live is None:
                verb = Verb.CREATE
            elif Meta(live).terminating:
                verb = Verb.WAIT
            else:
                drifted = bool(drift(render.rule(kind), live, body))
                verb = Verb.APPLY if drifted else Verb.NONE
                # The create's fields go to the apply manager only when an apply needs
                # them (decision 0003): one write per created object, none meanwhile.
                hand_over = drifted and needs_handover(live, labels.FIELD_MANAGER)
            actions.append(
                Action(
                    verb,
                    res,
                    relay.namespace,
                    name,
                    RELAY_EVENTS,
                    live=live,
                    body=body if verb is not Verb.WAIT else None,
                    hand_over=hand_over,
                    # The caches watch our objects by label: one of the name without our
                    # labels shows only here (whose it is decides the next pass).
                    read_if_taken=verb is Verb.CREATE,
                )
            )
        return tuple(actions)
    if not names.is_valid_service_name(name):
        return ()  # no object can carry that name
    for kind, res in RELAY_OBJECTS:
        live = snapshot.relay_objects.get(kind)
        if live is None or not is_controlled_by(live, relay.uid):
            continue  # absent, or someone else's: never touched
        verb = Verb.WAIT if Meta(live).terminating else Verb.WITHDRAW
        actions.append(
            Action(verb, res, relay.namespace, name, RELAY_EVENTS, live=live, wanted=False)
        )
    return tuple(actions)
