"""The relay's own objects in the plan: its Deployment and Service. Pure.

Each climbs the verb ladder every owned object climbs (`pool/ladder.py`). Published:
each is created when absent, applied when the drift rule (`pool/ladder.py`, from the
digest the cache keeps: `rule`) says an apply would change it, left alone
otherwise; an object of ours that still shows its create's fields with the create (not
handed over to the apply manager) is handed over right before its first apply. The
decision already made sure every existing one is ours (else `OwnershipConflict`).
Held (the relay's spec is invalid: nothing can be rendered): each is left as it runs,
none created. Withdrawn: each the relay controls is deleted; one being deleted is waited for; anyone
else's is never touched; one the caches may hide (our labels removed from it) is read by
name once when they show none, and deleted the next pass if it is ours.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.dgd import KUBERNETES_DISCOVERY, Pool, pool_from_object
from dynamo_pool_operator.api.events import EventReason
from dynamo_pool_operator.api.mcs import CLUSTER_ID_PROPERTY
from dynamo_pool_operator.api.relay import (
    HEADLESS_CLUSTER_IP,
    Relay,
    RelayDefaults,
    relay_from_object,
)
from dynamo_pool_operator.pool.ladder import Owned, Rule, Rung, ladder
from dynamo_pool_operator.pool.model import Action, Decision, EventNames, Snapshot, Verb
from dynamo_pool_operator.runtime.objects import DEPLOYMENTS, SERVICES, Resource, Shape, with_hash

# The relay's Deployment and Service, rendered from the relay and its pool. Pure.
#
# The rendered objects are apply configurations: only the fields we own, so a
# server-side apply never fights other managers (HPA on replicas excepted: we own
# `spec.replicas` on purpose, the relay spec is its one source).
#
# The relay pods' contract (environment variables) mirrors what Dynamo's operator
# injects into component pods, plus the pool's cluster ID:
# `DYN_NAMESPACE`, `DYN_DISCOVERY_BACKEND=kubernetes`, `DYN_CLUSTER_ID`,
# `DYN_PARENT_DGD_K8S_NAME`, `DYN_PARENT_DGD_K8S_NAMESPACE`, `DYN_POOL_RELAY_PORT`
# and the downward-API identity `POD_NAME`, `POD_NAMESPACE`, `POD_UID`.

CONTAINER = "relay"
PORT_NAME = "relay"

#: Maps of Kubernetes quantities, compared by value (`runtime/objects/diff.py`): the API
#: server keeps each quantity in its canonical form (`1000m` as `1`, `1024Mi` as `1Gi`),
#: which is no drift; any other value, or a missing one, is, and is repaired.
QUANTITY_PATHS = frozenset(
    {
        "spec.template.spec.containers.resources.limits",
        "spec.template.spec.containers.resources.requests",
    }
)
#: What the caches keep verbatim of each relay object (`runtime/objects/diff.py`): fields whose
#: keys vary with the relay, or that a render may leave out. The rest of what `render`
#: makes is kept as a digest.
OPEN_PATHS = {
    "Deployment": frozenset(
        {
            "metadata.ownerReferences",
            "spec.template.metadata.labels",
            "spec.template.metadata.annotations",
            "spec.template.spec.nodeSelector",
            "spec.template.spec.tolerations",
            "spec.template.spec.containers.resources",
        }
    ),
    "Service": frozenset({"metadata.ownerReferences", "spec.clusterIP"}),
}


def _metadata(relay: Relay) -> dict[str, Any]:
    return {
        "name": names.relay_name(relay.name),
        "namespace": relay.namespace,
        "labels": names.owned_object_labels(relay.name),
        "ownerReferences": [relay.owner_reference()],
    }


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


def _env(relay: Relay, pool: Pool, cluster_id: str) -> list[dict[str, Any]]:
    return [
        {"name": "DYN_NAMESPACE", "value": pool.dynamo_namespace},
        {"name": "DYN_DISCOVERY_BACKEND", "value": KUBERNETES_DISCOVERY},
        {"name": "DYN_CLUSTER_ID", "value": cluster_id},
        {"name": "DYN_PARENT_DGD_K8S_NAME", "value": pool.name},
        {"name": "DYN_PARENT_DGD_K8S_NAMESPACE", "value": pool.namespace},
        {"name": "DYN_POOL_RELAY_PORT", "value": str(relay.port)},
        _field_env("POD_NAME", "metadata.name"),
        _field_env("POD_NAMESPACE", "metadata.namespace"),
        _field_env("POD_UID", "metadata.uid"),
    ]


def _probe(period: int) -> dict[str, Any]:
    return {"tcpSocket": {"port": PORT_NAME}, "periodSeconds": period}


def deployment(relay: Relay, pool: Pool, cluster_id: str | None = None) -> dict[str, Any]:
    """The relay Deployment (apps/v1), with its render hash annotation. `cluster_id` is
    the effective cluster ID (`relay.cluster_id` when not given)."""
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": relay.image,
        "imagePullPolicy": relay.image_pull_policy,
        "ports": [{"name": PORT_NAME, "containerPort": relay.port, "protocol": "TCP"}],
        "env": _env(relay, pool, relay.cluster_id if cluster_id is None else cluster_id),
        "readinessProbe": _probe(5),
        "livenessProbe": _probe(10),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    if relay.resources:
        container["resources"] = copy.deepcopy(dict(relay.resources))
    pod_spec: dict[str, Any] = {
        "serviceAccountName": relay.service_account_name
        or names.discovery_service_account(pool.name),
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
    }
    if relay.node_selector:
        pod_spec["nodeSelector"] = dict(relay.node_selector)
    if relay.tolerations:
        pod_spec["tolerations"] = [copy.deepcopy(dict(t)) for t in relay.tolerations]
    template_meta: dict[str, Any] = {
        "labels": {**relay.pod_labels, **names.selector(relay.name), names.DGD_NAME: pool.name}
    }
    if relay.pod_annotations:
        template_meta["annotations"] = dict(relay.pod_annotations)
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(relay),
        "spec": {
            "replicas": relay.replicas,
            "selector": {"matchLabels": names.selector(relay.name)},
            "template": {"metadata": template_meta, "spec": pod_spec},
        },
    }
    return with_hash(obj, names.RENDER_HASH)


def service(relay: Relay) -> dict[str, Any]:
    """The relay Service (core/v1): the name the pool is exported under. Headless unless
    the relay says otherwise: an MCS implementation imports a headless Service as its
    Ready pod IPs, one per relay, and a ClusterIP Service as the one ClusterIP."""
    spec: dict[str, Any] = {
        "selector": names.selector(relay.name),
        "ports": [
            {"name": PORT_NAME, "port": relay.port, "targetPort": PORT_NAME, "protocol": "TCP"}
        ],
    }
    if relay.headless:
        spec["clusterIP"] = HEADLESS_CLUSTER_IP
    obj = {"apiVersion": "v1", "kind": "Service", "metadata": _metadata(relay), "spec": spec}
    return with_hash(obj, names.RENDER_HASH)


@functools.cache
def shape(kind: str) -> Shape:
    """The closed and open fields of the relay `kind` ("Deployment", "Service"), from
    the render of a relay that sets nothing optional."""
    relay = relay_from_object(
        {"metadata": {"name": "sample", "namespace": "sample", "uid": "sample"}},
        RelayDefaults(image="sample", port=1),
    )
    pool = pool_from_object({"metadata": {"name": "sample", "namespace": "sample"}})
    sample = deployment(relay, pool, "sample") if kind == "Deployment" else service(relay)
    return Shape(sample, open_paths=OPEN_PATHS[kind], quantities=QUANTITY_PATHS)


@functools.cache
def rule(kind: str) -> Rule:
    """How the relay `kind` is compared with its render (`pool/ladder.py`): from the view
    its cache keeps (the relay object caches keep views, not pod templates), else
    whole. Made once per kind: it is configuration, read by every pass."""
    return Rule(view=shape(kind), quantities=QUANTITY_PATHS)


# ----------------------------------------------------------------------

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
    out = {"Service": service(relay)}
    if cluster_id is not None:
        out["Deployment"] = deployment(relay, pool, cluster_id)
    return out


#: Why the relay objects are held while the relay's spec is invalid.
SPEC_INVALID = (
    "held: the relay's spec is invalid (Published says which field), so it cannot be "
    "rendered; it runs as last written and is written again once the spec is valid"
)


def plan_relay_objects(snapshot: Snapshot, decision: Decision) -> tuple[Action, ...]:
    relay = snapshot.relay
    name = names.relay_name(relay.name)
    actions: list[Action] = []
    if decision.keeps_pool:
        # Held (an invalid spec): no body can be made, so each is left as it runs.
        desired = desired_objects(snapshot) if decision.publish else {}
        cause = CLUSTER_ID_UNKNOWN if decision.publish else SPEC_INVALID
        for kind, res in RELAY_OBJECTS:
            live, body = snapshot.relay_objects.get(kind), desired.get(kind)
            step = ladder(
                Owned(
                    live,
                    body,
                    relay.uid,
                    rule(kind),
                    # `spec.clusterIP` is immutable: the Service of the other shape is
                    # deleted (as read: uid and resourceVersion) and created again once
                    # it is gone.
                    replace=kind == "Service" and snapshot.service_reshaped,
                    # The caches watch our objects by label: one of the name without our
                    # labels shows only to a create (whose it is decides the next pass).
                    may_be_hidden=True,
                    apply_manager=names.FIELD_MANAGER,
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
                        cause=cause,
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
        # One of ours the caches cannot show (our labels removed) is read by name once.
        hidden = kind in snapshot.hidden_unread
        step = ladder(Owned(live, None, relay.uid, rule(kind), wanted=False, may_be_hidden=hidden))
        if step.verb is None:
            continue  # absent, or someone else's: never touched
        actions.append(
            Action(step.verb, res, relay.namespace, name, RELAY_EVENTS, live=live, wanted=False)
        )
    return tuple(actions)
