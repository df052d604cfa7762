"""`RelayAvailable`: does the pool's relay run? Pure, from the Deployment's own status.

The rule: **True when the relay Deployment exists, is the relay's, its rollout is
complete — its controller has observed its current generation, every replica runs
the current pod template (`kubectl rollout status`'s rule: `updatedReplicas` is
`spec.replicas` and no old replica is left) — and at least one replica is
available.** One available pod serves the pool (the relay is active-active); the
reason says whether all `spec.replicas` are (`Available`) or only some
(`PartiallyAvailable`). While a change rolls out, the old pods do not count: they
run what the relay no longer says (another cluster ID, port, image), so a pass that
changed the Deployment, and every pass until the rollout completes, says
`Progressing`. False, with what the Deployment itself reports where it says why (the
reasons' meanings are `api/status.RELAY_AVAILABLE_MEANINGS`, docs/crd.md's table).

An image that cannot be pulled shows as `Unavailable` with the Deployment's
`ProgressDeadlineExceeded` message once its progress deadline passes (the Deployment
does not carry the pods' `ErrImagePull`; `kubectl describe pod` does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dynamo_pool_operator.api.status import Condition, ConditionType, Status
from dynamo_pool_operator.api.status import RelayAvailableReason as AvailableReason
from dynamo_pool_operator.runtime.objects import conditions
from dynamo_pool_operator.runtime.objects.meta import Meta


@dataclass(frozen=True, slots=True)
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
        c = conditions.find(status.get("conditions"), type_)
        if c is None:
            continue
        if (type_ == "ReplicaFailure" and c.get("status") == Status.TRUE) or (
            type_ != "ReplicaFailure" and c.get("status") == Status.FALSE
        ):
            said.append(f"{type_} {c.get('reason', '')}: {c.get('message', '')}".strip())
    return "; ".join(said)


def _rolling_out(status: Mapping[str, Any]) -> bool:
    """The Deployment controller reports a rollout in progress (`Progressing=True` for a
    new or updated ReplicaSet) and no replica failure: pods are on their way. A rollout
    that completed (`NewReplicaSetAvailable`) or ran past its progress deadline
    (`Progressing=False ProgressDeadlineExceeded`) is not."""
    failure = conditions.find(status.get("conditions"), "ReplicaFailure")
    if failure is not None and failure.get("status") == Status.TRUE:
        return False
    c = conditions.find(status.get("conditions"), "Progressing")
    return (
        c is not None
        and c.get("status") == Status.TRUE
        and c.get("reason") != "NewReplicaSetAvailable"
    )


def _failed(status: Mapping[str, Any]) -> bool:
    """The rollout ran past its progress deadline (or a replica cannot be made)."""
    failure = conditions.find(status.get("conditions"), "ReplicaFailure")
    progressing = conditions.find(status.get("conditions"), "Progressing")
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
    """`deployment` and `service`: the relay objects as this pass leaves them (the
    server's answer to an apply, else the cached ones; None when absent); `created`:
    the kinds this pass created (not cached yet), `replicas` what the Deployment was
    created with; `refused`: the relay objects' refused writes; `pending`: their writes
    this pass skipped, and why. A change the Deployment controller rolls out moves the
    generation past the observed one (`Progressing`); a change of metadata only moves
    neither, and the pods it had still serve."""
    said = available(
        deployment,
        service,
        published=published,
        refused=refused,
        name=name,
        created=created,
        replicas=replicas,
    )
    if pending and said.status is not Status.TRUE:
        return Availability(said.status, said.reason, f"{said.message}; {pending}", said.pods)
    return said


def available(
    deployment: Mapping[str, Any] | None,
    service: Mapping[str, Any] | None,
    *,
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


def shown_inputs(deployment: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """What `availability` reads of a Deployment's status: a status update that changes
    none of it cannot change the relay's status, so it need not wake the relay (the
    Deployment controller writes its status often)."""
    status = (deployment or {}).get("status") or {}
    said = tuple(
        (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
        for type_ in ("ReplicaFailure", "Progressing", "Available")
        if (c := conditions.find(status.get("conditions"), type_)) is not None
    )
    return (
        status.get("observedGeneration"),
        status.get("availableReplicas"),
        status.get("updatedReplicas"),
        status.get("replicas"),
        said,
    )
