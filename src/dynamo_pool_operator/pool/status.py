"""The relay's status, computed purely: the report phase of a reconcile.

`report` turns what a pass saw (the snapshot), decided (the plan) and came to (the
outcome) into everything the reconciler does after the writes: the status to write,
whether it differs from what the relay shows, the Events that announce its
transitions, the failures to raise and when to look again. Nothing here reads a
cache or the API server, so every rule is a unit test.

A status write is itself an event on the relay; writing the same status on every
reconcile would be a feedback loop (and a write per pool per resync). So the desired
status is compared with the shown one, and each condition keeps its
`lastTransitionTime` while its status stays the same.

Conditions (their words: `api/status.py`): `Published` (the check chain's decision),
`RelayAvailable` (`availability.py`), `ClusterIDMatched` (`cluster_id_matched`, where
the cluster ID is checked), `Exported` (with an MCS implementation, the export
contributor's), and `Ready`, True only when all the others are, with the first failing
one's reason — so `kubectl wait --for=condition=Ready` waits for a pool that is
importable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dynamo_pool_operator.api import crd, names
from dynamo_pool_operator.api.events import EventReason, warns
from dynamo_pool_operator.api.mcs import CLUSTER_ID_PROPERTY
from dynamo_pool_operator.api.relay import API_VERSION, Relay
from dynamo_pool_operator.api.status import (
    READY_PARTS,
    ClusterIDMatchedReason,
    Condition,
    ConditionType,
    ReadyReason,
    Status,
)
from dynamo_pool_operator.pool.availability import Availability, availability
from dynamo_pool_operator.pool.model import (
    Advisory,
    ConditionView,
    Contributor,
    Decision,
    Outcome,
    Result,
    Snapshot,
    StatusLine,
    Verb,
)
from dynamo_pool_operator.pool.plan import Plan
from dynamo_pool_operator.runtime.objects import conditions
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS

#: The Normal Event of a pool that became Ready.
POOL_READY = EventReason.POOL_READY


def warned(c: Mapping[str, Any]) -> bool:
    """Whether a condition that just changed records a Warning (`api.events.warns`)."""
    return warns(c.get("status", ""), c.get("reason", ""))


def summary(parts: Sequence[Condition]) -> Condition:
    """`Ready`: True only when every part is True; otherwise the first part that is not
    (in `api.status.READY_PARTS` order), with its reason."""
    for part in parts:
        if not part.true:
            return Condition(
                ConditionType.READY, Status.FALSE, part.reason, f"{part.type}: {part.message}"
            )
    said = "; ".join(p.message for p in parts[1:]) if len(parts) > 1 else parts[0].message
    return Condition(
        ConditionType.READY, Status.TRUE, ReadyReason.READY, f"the pool is published: {said}"
    )


def desired_status(
    relay: Relay,
    current: Mapping[str, Any] | None,
    decision: Decision,
    *,
    cluster_id: str | None,
    exports: Sequence[StatusLine],
    available: Availability,
    exported: ConditionView | None,
    now: datetime,
    more: Sequence[Condition] = (),
) -> dict[str, Any]:
    """The status the relay should show; `current` is the cached `status` (or None).
    `exported` is absent without an MCS implementation (and so is its condition);
    `more`: the other parts of Ready that apply (`cluster_id_matched`). `cluster_id`
    None (unknown) leaves `status.clusterId` out: it stays unknown, never ""."""
    current = current or {}
    computed = [
        Condition(
            ConditionType.PUBLISHED,
            Status.TRUE if decision.publish else Status.FALSE,
            str(decision.reason),
            decision.message,
        ),
        Condition(
            ConditionType.RELAY_AVAILABLE,
            available.status,
            str(available.reason),
            available.message,
        ),
    ]
    if exported is not None:
        computed.append(
            Condition(exported.type, exported.status, exported.reason, exported.message)
        )
    computed += more
    by_type = {c.type: c for c in computed}
    parts = [by_type[t] for t in READY_PARTS if t in by_type]
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
    if cluster_id is None:
        del status["clusterId"]
    return status


def cluster_id_matched(snapshot: Snapshot, *, published: bool) -> Condition | None:
    """`ClusterIDMatched`: the Global Discovery Service joins a pool only when the
    relay's cluster ID equals the cluster's own (the About API property). None where
    the ID is not checked (no MCS implementation, Karmada, the About API not served).
    `published`: the decision; only a published relay has a Deployment to hold."""
    cid, spec = snapshot.cluster_id, snapshot.relay.cluster_id
    if not cid.checked:
        return None

    def said(status: Status, reason: ClusterIDMatchedReason, message: str) -> Condition:
        return Condition(ConditionType.CLUSTER_ID_MATCHED, status, reason, message)

    if cid.unreadable:
        known = snapshot.effective_cluster_id
        if known is not None:
            keeps = f"the relay keeps its last known cluster ID {known!r}"
        elif published:
            keeps = "no cluster ID is known yet: the relay Deployment waits for it"
        else:
            keeps = "no cluster ID is known yet"
        return said(
            Status.UNKNOWN,
            ClusterIDMatchedReason.CLUSTER_PROPERTY_UNREADABLE,
            f"{cid.unreadable}; {keeps}",
        )
    if not cid.value:
        return said(
            Status.TRUE,
            ClusterIDMatchedReason.NO_CLUSTER_PROPERTY,
            f"the cluster has no ID property {CLUSTER_ID_PROPERTY} (or it is empty): nothing to "
            "compare",
        )
    if not spec:
        return said(
            Status.TRUE,
            ClusterIDMatchedReason.FROM_CLUSTER_PROPERTY,
            f"the relay takes the cluster's ID {cid.value!r}",
        )
    if spec == cid.value:
        return said(
            Status.TRUE,
            ClusterIDMatchedReason.MATCHED,
            f"spec.clusterId is the cluster's ID {spec!r}",
        )
    return said(
        Status.FALSE,
        ClusterIDMatchedReason.CLUSTER_ID_MISMATCH,
        f"spec.clusterId is {spec!r} but this cluster's ID ({CLUSTER_ID_PROPERTY}) is "
        f"{cid.value!r}; the Global Discovery Service joins a pool only when they are equal: "
        f"set spec.clusterId to {cid.value!r} or remove it",
    )


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


@dataclass(frozen=True, slots=True)
class StatusReport:
    """What a pass comes to after its writes: the report phase's whole answer."""

    #: The status the relay should show.
    status: dict[str, Any]
    #: It differs from what the relay shows: write it.
    changed: bool
    #: Events announcing the conditions that moved, recorded once the status is written.
    transitions: tuple[Advisory, ...]
    #: Failed writes and reads, raised after the pass so the key is retried with backoff.
    failures: tuple[Exception, ...]
    #: When to look again with no event to say so (a grace period or hold ends).
    recheck_at: datetime | None


def refused_writes(plan: Plan, outcome: Outcome) -> str:
    """The relay objects' refused writes, for `RelayAvailable` ("" when none)."""
    return "; ".join(r.message for r in outcome.of(plan.relay_actions) if r.result is Result.FAILED)


def relay_availability(snapshot: Snapshot, plan: Plan, outcome: Outcome) -> Availability:
    """`RelayAvailable` from the cached relay objects and what this pass wrote of them."""
    relay = snapshot.relay
    created = frozenset(
        r.action.resource.kind
        for r in outcome.of(plan.relay_actions)
        if r.action.verb is Verb.CREATE and r.result is Result.DONE
    )
    objects = dict(snapshot.relay_objects)
    for r in outcome.of(plan.relay_actions):
        if r.action.verb is Verb.APPLY and r.result is Result.DONE and r.written is not None:
            objects[r.action.resource.kind] = r.written
    pending = "; ".join(
        f"{r.action.resource.kind} {r.action.name} {r.message}"
        for r in outcome.of(plan.relay_actions)
        if r.result is Result.SKIPPED
    )
    return availability(
        objects.get("Deployment"),
        objects.get("Service"),
        published=plan.decision.publish,
        refused=refused_writes(plan, outcome),
        name=names.relay_name(relay.name),
        created=created,
        replicas=relay.replicas,
        pending=pending,
    )


def transitions(
    snapshot: Snapshot,
    status: Mapping[str, Any],
    exported: ConditionView | None,
) -> tuple[Advisory, ...]:
    """A Warning for each condition turning False with a new reason (a refused write
    has its own Warning already; a withdrawn pool's parts say so once, on Published), a
    Normal one when the pool becomes Ready. One series per cause: the related object is
    the one the condition is about (the DGD, the relay Deployment, an export)."""
    pool, deployment = snapshot.pool, snapshot.relay_objects.get("Deployment")
    about: dict[str, Mapping[str, Any] | None] = {
        ConditionType.PUBLISHED: pool.reference() if pool is not None else None,
        ConditionType.RELAY_AVAILABLE: (
            DEPLOYMENTS.reference(dict(deployment)) if deployment is not None else None
        ),
    }
    if exported is not None:
        about[exported.type] = exported.related
    out: list[Advisory] = []
    for c in changed_conditions(snapshot.shown_status, status):
        if c["type"] == ConditionType.READY:
            if c["status"] == Status.TRUE:
                out.append(Advisory(POOL_READY, "Ready", c["message"], None, "Normal"))
        elif warned(c):
            out.append(Advisory(c["reason"], c["type"], c["message"], about.get(c["type"])))
    return tuple(out)


def report(
    snapshot: Snapshot,
    plan: Plan,
    outcome: Outcome,
    contributors: Sequence[Contributor],
    *,
    now: datetime,
) -> StatusReport:
    """The report phase: each contributor's status lines and condition after execution,
    the relay's availability, the desired status and everything that follows from it."""
    decision, relay = plan.decision, snapshot.relay
    lines: list[StatusLine] = []
    exported: ConditionView | None = None
    for contributor, contribution in zip(contributors, plan.contributions, strict=True):
        part = contributor.report(
            snapshot, decision, contribution, outcome.of(contribution.actions), now=now
        )
        lines += part.lines
        exported = part.condition if part.condition is not None else exported
    status = desired_status(
        relay,
        snapshot.shown_status,
        decision,
        cluster_id=snapshot.effective_cluster_id,
        exports=lines,
        available=relay_availability(snapshot, plan, outcome),
        exported=exported,
        now=now,
        more=[
            c for c in (cluster_id_matched(snapshot, published=decision.publish),) if c is not None
        ],
    )
    failures = (snapshot.unreadable if decision.publish else ()) + tuple(outcome.failures)
    return StatusReport(
        status,
        status_changed(snapshot.shown_status, status),
        transitions(snapshot, status, exported),
        failures,
        exported.recheck_at if exported is not None else None,
    )
