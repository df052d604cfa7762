"""The relay's status, computed purely: the report phase of a reconcile.

`report` turns the snapshot, plan and outcome into the status to write, whether it
differs from the shown one, the Events of its transitions, the failures and when to
look again. A status write is an event on the relay, so it is written only when it
differs, and a condition keeps its `lastTransitionTime` while its status stays.

Each condition (words: `api/conditions.py`) is made by one rule in `RULES`;
`with_ready` adds `Ready`, True only when all the others are (so `kubectl wait
--for=condition=Ready` waits for an importable pool), and `stamped` dates them. A move
(`Condition.moved`) records the Event `api/event_reasons.py` declares for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from dynamo_pool_operator.api import crd
from dynamo_pool_operator.api.conditions import (
    READY_PARTS,
    ClusterIDMatchedReason,
    Condition,
    ConditionType,
    ReadyReason,
    Status,
)
from dynamo_pool_operator.api.conditions import RelayAvailableReason as AvailableReason
from dynamo_pool_operator.api.event_reasons import QUIET_REASONS, WARNING_STATES, EventReason
from dynamo_pool_operator.api.mcs import CLUSTER_ID_PROPERTY
from dynamo_pool_operator.api.relay import API_VERSION, Relay
from dynamo_pool_operator.api.shown import ShownCondition
from dynamo_pool_operator.pool.exports.plan import ExportRules
from dynamo_pool_operator.pool.exports.verdict import report_exports
from dynamo_pool_operator.pool.model import (
    ActionResult,
    Advisory,
    ConditionView,
    Decision,
    Outcome,
    Result,
    Snapshot,
    StatusLine,
    Verb,
)
from dynamo_pool_operator.pool.plan import Plan
from dynamo_pool_operator.runtime.objects import DEPLOYMENTS, Meta, find_condition, record, rfc3339

# `RelayAvailable`: does the pool's relay run? Pure, from the Deployment's own status.
# True when the Deployment exists, is ours, its rollout is complete (`kubectl rollout
# status`'s rule) and at least one replica is available: one pod serves the pool (the
# relay is active-active). Old pods of a rollout do not count (they run what the relay
# no longer says). False with the Deployment's own words where it gives them; an
# unpullable image shows once the progress deadline passes (`ProgressDeadlineExceeded`).


@record
class Availability:
    status: Status
    reason: AvailableReason
    message: str
    #: "available/desired" relay pods, for the printer column ("" when unknown).
    pods: str = ""

    @property
    def condition(self) -> Condition:
        return Condition(ConditionType.RELAY_AVAILABLE, self.status, str(self.reason), self.message)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _quote(status: Mapping[str, Any]) -> str:
    """The Deployment's own words on why it has no available replica."""
    said = []
    for type_ in ("ReplicaFailure", "Progressing", "Available"):
        c = find_condition(status.get("conditions"), type_)
        if c is None:
            continue
        if (type_ == "ReplicaFailure" and c.get("status") == Status.TRUE) or (
            type_ != "ReplicaFailure" and c.get("status") == Status.FALSE
        ):
            said.append(f"{type_} {c.get('reason', '')}: {c.get('message', '')}".strip())
    return "; ".join(said)


def _rolling_out(status: Mapping[str, Any]) -> bool:
    """A rollout in progress (`Progressing=True`, not `NewReplicaSetAvailable`) with no
    replica failure: pods are on their way."""
    failure = find_condition(status.get("conditions"), "ReplicaFailure")
    if failure is not None and failure.get("status") == Status.TRUE:
        return False
    c = find_condition(status.get("conditions"), "Progressing")
    return (
        c is not None
        and c.get("status") == Status.TRUE
        and c.get("reason") != "NewReplicaSetAvailable"
    )


def _failed(status: Mapping[str, Any]) -> bool:
    """The rollout ran past its progress deadline (or a replica cannot be made)."""
    failure = find_condition(status.get("conditions"), "ReplicaFailure")
    progressing = find_condition(status.get("conditions"), "Progressing")
    return (failure is not None and failure.get("status") == Status.TRUE) or (
        progressing is not None and progressing.get("status") == Status.FALSE
    )


def _missing(obj: Mapping[str, Any] | None) -> str:
    """Why an object is not there ("" when it is)."""
    if obj is None:
        return "does not exist yet"
    if Meta(obj).terminating:
        return "is being deleted; it is created again once gone"
    return ""


def availability(
    deployment: Mapping[str, Any] | None,
    service: Mapping[str, Any] | None = None,
    *,
    published: bool,
    refused: str = "",
    name: str = "",
    created: frozenset[str] = frozenset(),
    replicas: int = 1,
    pending: str = "",
) -> Availability:
    """`deployment` and `service`: the relay objects as this pass leaves them (None when
    absent); `created`: the kinds this pass created (not cached yet), the Deployment with
    `replicas`; `refused`: their refused writes; `pending`: their writes this pass
    skipped, and why, said while the relay is not available."""
    said = _available(deployment, service, published, refused, name, created, replicas)
    if pending and said.status is not Status.TRUE:
        return Availability(said.status, said.reason, f"{said.message}; {pending}", said.pods)
    return said


def _available(
    deployment: Mapping[str, Any] | None,
    service: Mapping[str, Any] | None,
    published: bool,
    refused: str,
    name: str,
    created: frozenset[str],
    replicas: int,
) -> Availability:
    if not published:
        # A refused delete of the relay's objects is said here: the withdrawal is not done.
        said = "the pool is withdrawn" + (f"; its objects stay: {refused}" if refused else "")
        return Availability(Status.FALSE, AvailableReason.WITHDRAWN, said)
    if refused:
        return Availability(Status.FALSE, AvailableReason.WRITE_REFUSED, refused)
    if service is None and "Service" in created:
        pass  # just made: the Deployment decides
    elif why := _missing(service):
        return Availability(Status.FALSE, AvailableReason.SERVICE_MISSING, f"Service {name} {why}")
    if deployment is None and "Deployment" in created:
        # Said as the next pass will see it from the cache (generation 1, no status),
        # so that pass computes the same condition and writes nothing.
        deployment = {"metadata": {"generation": 1}, "spec": {"replicas": replicas}}
    if why := _missing(deployment):
        return Availability(
            Status.FALSE, AvailableReason.DEPLOYMENT_MISSING, f"Deployment {name} {why}"
        )
    assert deployment is not None
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    desired = _int(spec.get("replicas")) if "replicas" in spec else 1
    available = _int(status.get("availableReplicas"))
    pods = f"{available}/{desired}"
    if desired == 0:
        return Availability(
            Status.FALSE,
            AvailableReason.SCALED_TO_ZERO,
            "spec.replicas is 0: no relay pod runs",
            pods,
        )
    generation, observed = Meta(deployment).generation, _int(status.get("observedGeneration"))
    if observed < generation:
        return Availability(
            Status.FALSE,
            AvailableReason.PROGRESSING,
            f"the Deployment controller has not observed generation {generation} of "
            f"{name} yet (observed {observed})",
            pods,
        )
    updated, running = _int(status.get("updatedReplicas")), _int(status.get("replicas"))
    if updated < desired or running > updated:
        if _failed(status):
            return Availability(
                Status.FALSE,
                AvailableReason.UNAVAILABLE,
                f"the rollout of {name} failed ({updated}/{desired} relay pods updated): "
                f"{_quote(status)}",
                pods,
            )
        old = running - updated
        return Availability(
            Status.FALSE,
            AvailableReason.PROGRESSING,
            f"{name} is rolling out: {updated}/{desired} relay pods updated"
            + (f", {old} old one{'s' if old != 1 else ''} still running" if old > 0 else ""),
            pods,
        )
    if available == 0 and _rolling_out(status):
        return Availability(
            Status.FALSE,
            AvailableReason.PROGRESSING,
            f"{name} is rolling out: no relay pod available yet (0/{desired})",
            pods,
        )
    if available == 0:
        why = _quote(status)
        return Availability(
            Status.FALSE,
            AvailableReason.UNAVAILABLE,
            f"no relay pod of {name} is available (0/{desired})" + (f": {why}" if why else ""),
            pods,
        )
    if available < desired:
        return Availability(
            Status.TRUE,
            AvailableReason.PARTIALLY_AVAILABLE,
            f"{available}/{desired} relay pods available",
            pods,
        )
    return Availability(
        Status.TRUE, AvailableReason.AVAILABLE, f"{available}/{desired} relay pods available", pods
    )


#: The Normal Event of a pool that became Ready.
POOL_READY = EventReason.POOL_READY


def warned(c: Condition) -> bool:
    """Whether a condition that just moved records a Warning: it turned False (not
    Unknown, the implementation at work) with a reason not quiet, or into a warning state."""
    if (c.status, c.reason) in WARNING_STATES:
        return True
    return c.status == Status.FALSE and c.reason not in QUIET_REASONS


def summary(parts: Sequence[Condition]) -> Condition:
    """`Ready`: True only when every part is; else the first part that is not, with its
    reason."""
    for part in parts:
        if not part.true:
            return Condition(
                ConditionType.READY, Status.FALSE, part.reason, f"{part.type}: {part.message}"
            )
    said = "; ".join(p.message for p in parts[1:]) if len(parts) > 1 else parts[0].message
    return Condition(
        ConditionType.READY, Status.TRUE, ReadyReason.READY, f"the pool is published: {said}"
    )


def with_ready(parts: Sequence[Condition]) -> tuple[Condition, ...]:
    """Every condition the relay shows: `Ready`'s parts in `READY_PARTS` order, then
    `Ready`. A part of another type (its words missing) raises rather than go unshown."""
    by_type = {c.type: c for c in parts}
    unknown = set(by_type) - set(READY_PARTS)
    if unknown or len(by_type) != len(parts):
        raise ValueError(f"conditions not in READY_PARTS, or twice: {[c.type for c in parts]}")
    ordered = [by_type[t] for t in READY_PARTS if t in by_type]
    return (*ordered, summary(ordered))


def stamped(
    said: Sequence[Condition],
    shown: Mapping[ConditionType, ShownCondition],
    *,
    generation: int,
    now: datetime,
) -> list[dict[str, Any]]:
    """The one way conditions enter the status, keeping the shown `lastTransitionTime`
    while the status holds (KEP-1623), so an unchanged condition is not written again."""
    out = []
    for c in said:
        before = shown.get(c.type)
        since = before.since if before is not None else None
        if before is None or before.status != c.status or not since:
            since = rfc3339(now)
        out.append(c.written(generation=generation, since=since))
    return out


def published(decision: Decision) -> Condition:
    """`Published`: the check chain's decision."""
    return Condition(
        ConditionType.PUBLISHED,
        Status.TRUE if decision.publish else Status.FALSE,
        str(decision.reason),
        decision.message,
    )


def exported_condition(view: ConditionView | None) -> Condition | None:
    """`Exported`, as the export feature reports it (None without an MCS implementation)."""
    if view is None:
        return None
    return Condition(view.type, view.status, view.reason, view.message)


def desired_status(
    relay: Relay,
    shown: Mapping[ConditionType, ShownCondition],
    said: Sequence[Condition],
    *,
    publish: bool,
    cluster_id: str | None,
    exports: Sequence[StatusLine],
    pods: str,
    now: datetime,
) -> dict[str, Any]:
    """The status the relay should show. `cluster_id` None (unknown) leaves
    `status.clusterId` out: unknown, never ""."""
    status: dict[str, Any] = {
        "observedGeneration": relay.generation,
        "conditions": stamped(said, shown, generation=relay.generation, now=now),
        "serviceName": relay.object_name if publish else "",
        "clusterId": cluster_id,
        "relayPods": pods,
        "exports": [e.to_dict() for e in exports],
    }
    if cluster_id is None:
        del status["clusterId"]
    return status


def cluster_id_matched(snapshot: Snapshot, *, published: bool) -> Condition | None:
    """`ClusterIDMatched`: the Global Discovery Service joins a pool only when the relay's
    cluster ID equals the cluster's own. None where the ID is not checked. `published`:
    only a published relay has a Deployment to hold."""
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
    shown: Mapping[ConditionType, ShownCondition], said: Sequence[Condition]
) -> list[Condition]:
    """The conditions whose status or reason differs from what the relay shows: the
    transitions worth an Event."""
    return [c for c in said if c.moved(shown.get(c.type))]


def status_apply(relay: Relay, status: Mapping[str, Any]) -> dict[str, Any]:
    """A server-side apply body for the status subresource, carrying the relay's uid, so
    it never lands on a new relay of the same name."""
    return {
        "apiVersion": API_VERSION,
        "kind": crd.KIND,
        "metadata": {"name": relay.name, "namespace": relay.namespace, "uid": relay.uid},
        "status": dict(status),
    }


@record
class StatusReport:
    """What a pass comes to after its writes: the report phase's whole answer."""

    #: The status the relay should show.
    status: dict[str, Any]
    #: The server-side apply body that writes it (`status_apply`).
    body: dict[str, Any]
    #: It differs from what the relay shows: write it.
    changed: bool
    #: Events announcing the conditions that moved, recorded once the status is written.
    transitions: tuple[Advisory, ...]
    #: Failed writes and reads, raised after the pass so the key is retried with backoff.
    failures: tuple[Exception, ...]
    #: When to look again with no event to say so (a grace period or hold ends).
    recheck_at: datetime | None


def refused_writes(results: Sequence[ActionResult]) -> str:
    """The relay objects' refused writes, for `RelayAvailable` ("" when none)."""
    return "; ".join(r.message for r in results if r.result is Result.FAILED)


def relay_availability(snapshot: Snapshot, plan: Plan, outcome: Outcome) -> Availability:
    """`RelayAvailable` from the cached relay objects and what this pass wrote of them."""
    relay = snapshot.relay
    results = outcome.of(plan.relay_actions)
    created = frozenset(
        r.action.resource.kind
        for r in results
        if r.action.verb is Verb.CREATE and r.result is Result.DONE
    )
    objects = dict(snapshot.relay_objects)
    for r in results:
        if r.action.verb is Verb.APPLY and r.result is Result.DONE and r.written is not None:
            objects[r.action.resource.kind] = r.written
    pending = "; ".join(
        f"{r.action.resource.kind} {r.action.name} {r.message}"
        for r in results
        if r.result is Result.SKIPPED
    )
    return availability(
        objects.get("Deployment"),
        objects.get("Service"),
        published=plan.decision.keeps_pool,
        refused=refused_writes(results),
        name=relay.object_name,
        created=created,
        replicas=relay.replicas,
        pending=pending,
    )


def transitions(
    snapshot: Snapshot,
    said: Sequence[Condition],
    exported: ConditionView | None,
) -> tuple[Advisory, ...]:
    """A Warning for each condition turning False with a new reason, a Normal Event when
    the pool becomes Ready; each related to the object it is about (one series per cause)."""
    out: list[Advisory] = []
    for c in changed_conditions(snapshot.shown_conditions, said):
        if c.type == ConditionType.READY:
            if c.true:
                out.append(Advisory(POOL_READY, "Ready", c.message, None, "Normal"))
        elif warned(c):
            out.append(Advisory(c.reason, c.type, c.message, _about(snapshot, c.type, exported)))
    return tuple(out)


def _about(
    snapshot: Snapshot, type_: ConditionType, exported: ConditionView | None
) -> Mapping[str, Any] | None:
    """The object a condition's Warning is about (made only for a Warning)."""
    if exported is not None and type_ == exported.type:
        return exported.related
    if type_ == ConditionType.PUBLISHED:
        pool = snapshot.pool
        return pool.reference() if pool is not None else None
    if type_ == ConditionType.RELAY_AVAILABLE:
        deployment = snapshot.relay_objects.get("Deployment")
        return DEPLOYMENTS.reference(dict(deployment)) if deployment is not None else None
    return None


@record
class Pass:
    """What one pass saw, decided and came to: the input of every condition rule."""

    snapshot: Snapshot
    plan: Plan
    outcome: Outcome
    #: `RelayAvailable`'s finding, with the relay pods for the printer column.
    available: Availability
    #: The export feature's condition (None without an MCS implementation).
    exported: ConditionView | None


#: Every condition rule: one condition of the status from a pass (None where it does
#: not apply). A new condition is its words (`api/conditions.py`) and a rule here.
RULES: tuple[Callable[[Pass], Condition | None], ...] = (
    lambda p: published(p.plan.decision),
    lambda p: p.available.condition,
    lambda p: cluster_id_matched(p.snapshot, published=p.plan.decision.keeps_pool),
    lambda p: exported_condition(p.exported),
)


def report(
    snapshot: Snapshot,
    plan: Plan,
    outcome: Outcome,
    exports: ExportRules | None,
    *,
    now: datetime,
) -> StatusReport:
    """The report phase: the exports' lines and condition, the relay's availability, the
    desired status and all that follows from it."""
    decision, relay = plan.decision, snapshot.relay
    lines: list[StatusLine] = []
    exported: ConditionView | None = None
    moved: list[Advisory] = []
    features = (exports,) if exports is not None else ()
    for feature, contribution in zip(features, plan.contributions, strict=True):
        part = report_exports(
            snapshot, decision, contribution, outcome.of(contribution.actions), feature, now=now
        )
        lines += part.lines
        moved += part.transitions
        exported = part.condition if part.condition is not None else exported
    available = relay_availability(snapshot, plan, outcome)
    seen = Pass(snapshot, plan, outcome, available, exported)
    said = with_ready([c for rule in RULES if (c := rule(seen)) is not None])
    # The conditions' Events first, then the export lines'.
    announced = transitions(snapshot, said, exported) + tuple(moved)
    status = desired_status(
        relay,
        snapshot.shown_conditions,
        said,
        publish=decision.keeps_pool,
        cluster_id=snapshot.effective_cluster_id,
        exports=lines,
        pods=available.pods,
        now=now,
    )
    failures = (snapshot.unreadable if decision.keeps_pool else ()) + tuple(outcome.failures)
    return StatusReport(
        status,
        status_apply(relay, status),
        snapshot.shown.differs(status),
        announced,
        failures,
        exported.recheck_at if exported is not None else None,
    )
