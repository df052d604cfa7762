"""The kinds of object a relay owns, one entry each: the one table a new kind joins.

Each entry says all the operator needs of a kind: its render and when it is wanted,
what its cache keeps and which changes wake the relay (`pool/controller.py`), the writes
it waits for (`pool/plan.py`) and why it may be written (`rbac.py`). The table's order
is the write order when publishing. Pure.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from dynamo_pool_operator.api.dgd import pool_from_object
from dynamo_pool_operator.api.event_reasons import EventReason
from dynamo_pool_operator.api.mcs import CLUSTER_ID_PROPERTY
from dynamo_pool_operator.api.relay import Relay, RelayDefaults, relay_from_object
from dynamo_pool_operator.pool.ladder import Rule
from dynamo_pool_operator.pool.model import EventNames, Snapshot
from dynamo_pool_operator.pool.relay import render
from dynamo_pool_operator.runtime.objects import DEPLOYMENTS, SERVICES, Resource, Shape, record

#: A refused write of a relay object is a Warning; successful ones record no Event.
RELAY_EVENTS = EventNames(failed=EventReason.RELAY_WRITE_FAILED)

#: What every relay object's cache keeps verbatim beside its digest: keys vary per relay.
OWNERS = frozenset({"metadata.ownerReferences"})


def _always(relay: Relay) -> bool:
    return True


def _never(snapshot: Snapshot) -> bool:
    return False


@record
class OwnedKind:
    """One kind of object a relay owns (see the module docstring)."""

    resource: Resource
    #: The body a published pass wants; None while an input it needs cannot be read
    #: (`held_because` says which): the object is then left as it is.
    render: Callable[[Snapshot], Mapping[str, Any] | None]
    #: Why the operator may write it (its RBAC rule's reason).
    why: str
    #: Whether a published relay wants one at all.
    wanted: Callable[[Relay], bool] = _always
    held_because: str = ""
    #: Fields its cache keeps verbatim beside the digest of what we render.
    open_paths: frozenset[str] = OWNERS
    #: Kinds whose write in the same pass must succeed before this one's update, and
    #: before the create of an export of it (its own create moves no traffic yet).
    after: tuple[str, ...] = ()
    #: What its cache keeps of its spec and status beyond the view (conditions: of these
    #: types, their type, status, reason and message).
    spec_kept: tuple[str, ...] = ()
    status_kept: tuple[str, ...] = ()
    conditions_kept: tuple[str, ...] = ()
    #: A change of the status its cache keeps wakes the relay (it says whether it runs).
    status_wakes: bool = False
    #: Its cache keeps the creation time (a pass reads it).
    creation_read: bool = False
    #: Its cache also holds every other object of the kind while exports are on, as
    #: stubs: a frontend's Service is one (whose it is decides its export).
    frontends: bool = False
    #: Ours is deleted to be created again (a field that cannot change in place).
    replaced: Callable[[Snapshot], bool] = _never
    replaced_events: EventNames = RELAY_EVENTS

    @property
    def kind(self) -> str:
        return self.resource.kind


def _deployment(snapshot: Snapshot) -> Mapping[str, Any] | None:
    cluster_id, pool = snapshot.effective_cluster_id, snapshot.pool
    if cluster_id is None or pool is None:
        return None  # it would roll every relay pod twice: without the ID, then with it
    return render.deployment(snapshot.relay, pool, cluster_id)


def _service(snapshot: Snapshot) -> Mapping[str, Any] | None:
    return render.service(snapshot.relay)


def _reshaped(snapshot: Snapshot) -> bool:
    return snapshot.service_reshaped


DEPLOYMENT = OwnedKind(
    DEPLOYMENTS,
    _deployment,
    why="the relay Deployment <dgd>-pool-relay",
    held_because=(
        f"held: the cluster's ID ({CLUSTER_ID_PROPERTY}) cannot be read and no earlier one "
        "is known, and the relay pods get it as DYN_CLUSTER_ID; it is written once the "
        "property can be read (or set spec.clusterId)"
    ),
    open_paths=OWNERS
    | {
        "spec.template.metadata.labels",
        "spec.template.metadata.annotations",
        "spec.template.spec.nodeSelector",
        "spec.template.spec.tolerations",
        "spec.template.spec.containers.resources",
    },
    spec_kept=("replicas",),
    status_kept=("observedGeneration", "replicas", "updatedReplicas", "availableReplicas"),
    conditions_kept=("ReplicaFailure", "Progressing", "Available"),
    status_wakes=True,
)
SERVICE = OwnedKind(
    SERVICES,
    _service,
    why=(
        "the relay Service <dgd>-pool-relay; every other Service is read (whose a "
        "frontend's Service is), never written"
    ),
    open_paths=OWNERS | {"spec.clusterIP"},
    # A port moves in the pods before the Service sends traffic to it; the pool is
    # exported only once its pods' Deployment exists.
    after=("Deployment",),
    # `spec.clusterIP` is immutable: the Service of the other shape is deleted and made
    # again; that interrupts the pool's import, so it is said (Normal). Its creation time
    # ends its export's hold (`exports/plan.py`).
    spec_kept=("clusterIP",),
    creation_read=True,
    frontends=True,
    replaced=_reshaped,
    replaced_events=EventNames(
        failed=EventReason.RELAY_WRITE_FAILED, withdrawn=EventReason.RELAY_SERVICE_REPLACED
    ),
)

POD_DISRUPTION_BUDGET = OwnedKind(
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    lambda snapshot: render.pod_disruption_budget(snapshot.relay),
    why="the relay's PodDisruptionBudget <dgd>-pool-relay (minAvailable 1)",
    # With one relay pod, `minAvailable: 1` would block every node drain: none below two.
    wanted=lambda relay: relay.replicas >= 2,
)

#: Every kind a relay owns, in the order they are written when publishing.
RELAY_KINDS: tuple[OwnedKind, ...] = (DEPLOYMENT, SERVICE, POD_DISRUPTION_BUDGET)
BY_KIND: Mapping[str, OwnedKind] = {k.kind: k for k in RELAY_KINDS}


@functools.cache
def _sample() -> Snapshot:
    """A published relay that sets nothing optional, with a cluster ID: every kind's
    body as a shape (which fields are closed, which open)."""
    meta = {"name": "sample", "namespace": "sample", "uid": "sample"}
    relay = relay_from_object(
        {"metadata": meta, "spec": {"clusterId": "sample"}},
        RelayDefaults(image="sample", port=1, replicas=2),
    )
    pool = pool_from_object({"metadata": {"name": "sample", "namespace": "sample"}})
    return Snapshot(relay, pool, {})


@functools.cache
def shape(kind: str) -> Shape:
    """The closed and open fields of the relay `kind`, from the render of the sample."""
    entry = BY_KIND[kind]
    sample = entry.render(_sample())
    assert sample is not None, f"the sample renders every kind ({kind})"
    return Shape(dict(sample), open_paths=entry.open_paths, quantities=render.QUANTITY_PATHS)


@functools.cache
def rule(kind: str) -> Rule:
    """How the relay `kind` is compared with its render: from the view its cache keeps.
    Made once per kind."""
    return Rule(view=shape(kind), quantities=render.QUANTITY_PATHS)
