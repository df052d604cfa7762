"""`RelayAvailable` from the relay Deployment's own status (pool/status.py).

The rule: True when the Deployment exists, its rollout is complete (its controller
observed its generation, every replica is updated, no old one is left) and it has at
least one available replica; the reason says whether all `spec.replicas` are. The
Deployment-condition mapping is tested here because kwok, the test world's kubelet,
never fails to pull an image.
"""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.api.conditions import RELAY_AVAILABLE_MEANINGS as REASONS
from dynamo_pool_operator.api.conditions import RelayAvailableReason as AvailableReason
from dynamo_pool_operator.pool.report import Availability, availability

NAME = "llama-pool-relay"
SERVICE = {"metadata": {"name": NAME}}


def deployment(
    replicas: int = 2,
    available: int = 2,
    *,
    generation: int = 3,
    observed: int = 3,
    conditions: list[dict[str, Any]] | None = None,
    updated: int | None = None,
    running: int | None = None,
    **meta: Any,
) -> dict[str, Any]:
    """A Deployment whose rollout is complete unless `updated` / `running` say not."""
    return {
        "metadata": {"name": NAME, "generation": generation, **meta},
        "spec": {"replicas": replicas},
        "status": {
            "observedGeneration": observed,
            "availableReplicas": available,
            "updatedReplicas": replicas if updated is None else updated,
            "replicas": replicas if running is None else running,
            "conditions": conditions or [],
        },
    }


def run(dep: Any, service: Any = SERVICE, **kw: Any) -> Any:
    return availability(dep, service, published=kw.pop("published", True), name=NAME, **kw)


def test_every_replica_available() -> None:
    a = run(deployment(2, 2))
    assert (a.status, a.reason, a.pods) == ("True", AvailableReason.AVAILABLE, "2/2")
    assert a.message == "2/2 relay pods available"


def test_one_available_replica_serves_the_pool() -> None:
    a = run(deployment(3, 1))
    assert (a.status, a.reason, a.pods) == ("True", AvailableReason.PARTIALLY_AVAILABLE, "1/3")


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({"published": False}, AvailableReason.WITHDRAWN),
        ({"refused": "create Service x: 403"}, AvailableReason.WRITE_REFUSED),
    ],
)
def test_before_looking_at_the_deployment(kw: dict[str, Any], reason: AvailableReason) -> None:
    a = run(deployment(), **kw)
    assert (a.status, a.reason) == ("False", reason)


def test_missing_objects() -> None:
    assert run(None).reason is AvailableReason.DEPLOYMENT_MISSING
    assert run(deployment(), None).reason is AvailableReason.SERVICE_MISSING
    going = deployment(deletionTimestamp="2026-12-01T00:00:00Z")
    assert run(going).reason is AvailableReason.DEPLOYMENT_MISSING
    assert "being deleted" in run(going).message
    svc_going = {"metadata": {"name": NAME, "deletionTimestamp": "x"}}
    assert run(deployment(), svc_going).reason is AvailableReason.SERVICE_MISSING


def test_objects_just_created_are_progressing_not_missing() -> None:
    both = frozenset({"Deployment", "Service"})
    a = run(None, None, created=both, replicas=3)
    assert (a.status, a.reason, a.pods) == ("False", AvailableReason.PROGRESSING, "0/3")
    cached = {"metadata": {"name": NAME, "generation": 1}, "spec": {"replicas": 3}}
    assert run(cached) == a, "the next pass, from the cache, says the same: no status write"
    assert run(deployment(), None, created=frozenset({"Service"})).status == "True"


def test_scaled_to_zero_and_not_yet_observed() -> None:
    zero = run(deployment(0, 0))
    assert (zero.status, zero.reason, zero.pods) == ("False", AvailableReason.SCALED_TO_ZERO, "0/0")
    stale = run(deployment(2, 2, generation=4, observed=3))
    assert (stale.status, stale.reason) == ("False", AvailableReason.PROGRESSING)
    assert "generation 4" in stale.message
    new = run(deployment(2, 0, observed=0) | {"status": {}})
    assert new.reason is AvailableReason.PROGRESSING


def test_no_available_replica_quotes_what_the_deployment_says() -> None:
    conditions = [
        {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
         "message": "Deployment does not have minimum availability."},
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
         "message": 'ReplicaSet "llama-pool-relay-5d9" has timed out progressing.'},
        {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
         "message": 'pods "x" is forbidden: error looking up service account'},
    ]  # fmt: skip
    a = run(deployment(2, 0, conditions=conditions))
    assert (a.status, a.reason, a.pods) == ("False", AvailableReason.UNAVAILABLE, "0/2")
    assert a.message.startswith("no relay pod of llama-pool-relay is available (0/2): ")
    order = ["ReplicaFailure FailedCreate", "Progressing ProgressDeadlineExceeded", "Available"]
    positions = [a.message.index(word) for word in order]
    assert positions == sorted(positions), "the most telling first"
    assert "error looking up service account" in a.message


def test_healthy_conditions_are_not_quoted() -> None:
    conditions = [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]
    a = run(deployment(1, 0, conditions=conditions))
    assert a.message == "no relay pod of llama-pool-relay is available (0/1)"


def test_replicas_default_to_one_and_garbage_counts_as_zero() -> None:
    dep = deployment()
    dep["spec"] = {}
    assert run(dep).pods == "2/1"
    dep = deployment()
    dep["status"]["availableReplicas"] = "2"
    assert run(dep).reason is AvailableReason.UNAVAILABLE


def test_every_reason_is_documented() -> None:
    assert set(REASONS) == set(AvailableReason)


@pytest.mark.parametrize(
    ("progressing", "failure", "reason"),
    [
        (("True", "NewReplicaSetCreated"), None, AvailableReason.PROGRESSING),
        (("True", "ReplicaSetUpdated"), None, AvailableReason.PROGRESSING),
        (("True", "NewReplicaSetAvailable"), None, AvailableReason.UNAVAILABLE),
        (("False", "ProgressDeadlineExceeded"), None, AvailableReason.UNAVAILABLE),
        (("True", "ReplicaSetUpdated"), ("True", "FailedCreate"), AvailableReason.UNAVAILABLE),
        (None, None, AvailableReason.UNAVAILABLE),
    ],
    ids=["new", "updated", "rolled-out", "deadline", "replica-failure", "no-condition"],
)
def test_no_pod_available_is_progressing_only_while_a_rollout_is_under_way(
    progressing: tuple[str, str] | None,
    failure: tuple[str, str] | None,
    reason: AvailableReason,
) -> None:
    conditions = []
    if progressing is not None:
        conditions.append(
            {"type": "Progressing", "status": progressing[0], "reason": progressing[1]}
        )
    if failure is not None:
        conditions.append({"type": "ReplicaFailure", "status": failure[0], "reason": failure[1]})
    a = run(deployment(2, 0, conditions=conditions))
    assert (a.status, a.reason, a.pods) == ("False", reason, "0/2")


# ------------------------------------------------------- whole conditions, every branch
# Written out by hand: status, reason, message and pods are what the relay shows.
GOING = "2026-12-01T00:00:00Z"
EXACT = [
    ("withdrawn", (deployment(),), {"published": False},
     Availability("False", AvailableReason.WITHDRAWN, "the pool is withdrawn")),
    ("refused", (deployment(),), {"refused": "create Service x: 403"},
     Availability("False", AvailableReason.WRITE_REFUSED, "create Service x: 403")),
    ("no-service", (deployment(), None), {},
     Availability("False", AvailableReason.SERVICE_MISSING,
                  f"Service {NAME} does not exist yet")),
    ("service-going", (deployment(), {"metadata": {"deletionTimestamp": GOING}}), {},
     Availability("False", AvailableReason.SERVICE_MISSING,
                  f"Service {NAME} is being deleted; it is created again once gone")),
    ("no-deployment", (None,), {},
     Availability("False", AvailableReason.DEPLOYMENT_MISSING,
                  f"Deployment {NAME} does not exist yet")),
    ("deployment-going", (deployment(deletionTimestamp=GOING),), {},
     Availability("False", AvailableReason.DEPLOYMENT_MISSING,
                  f"Deployment {NAME} is being deleted; it is created again once gone")),
    ("zero", (deployment(0, 0),), {},
     Availability("False", AvailableReason.SCALED_TO_ZERO,
                  "spec.replicas is 0: no relay pod runs", "0/0")),
    ("not-observed", (deployment(2, 1, generation=4, observed=3),), {},
     Availability("False", AvailableReason.PROGRESSING,
                  f"the Deployment controller has not observed generation 4 of {NAME} yet "
                  "(observed 3)", "1/2")),
    ("rolling-out",
     (deployment(2, 0, conditions=[{"type": "Progressing", "status": "True",
                                    "reason": "ReplicaSetUpdated"}]),), {},
     Availability("False", AvailableReason.PROGRESSING,
                  f"{NAME} is rolling out: no relay pod available yet (0/2)", "0/2")),
    ("unavailable-quoted",
     (deployment(1, 0, conditions=[
         {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
          "message": "no minimum"},
         {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
          "message": "done"},
         {"type": "ReplicaFailure", "status": "False", "reason": "FailedCreate",
          "message": "was"}]),), {},
     Availability("False", AvailableReason.UNAVAILABLE,
                  f"no relay pod of {NAME} is available (0/1): Available "
                  "MinimumReplicasUnavailable: no minimum", "0/1")),
    ("unavailable-two-quoted",
     (deployment(1, 0, conditions=[
         {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
          "message": "timed out"},
         {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
          "message": "forbidden"}]),), {},
     Availability("False", AvailableReason.UNAVAILABLE,
                  f"no relay pod of {NAME} is available (0/1): ReplicaFailure FailedCreate: "
                  "forbidden; Progressing ProgressDeadlineExceeded: timed out", "0/1")),
    ("partial", (deployment(3, 2),), {},
     Availability("True", AvailableReason.PARTIALLY_AVAILABLE, "2/3 relay pods available", "2/3")),
    ("all", (deployment(2, 2),), {},
     Availability("True", AvailableReason.AVAILABLE, "2/2 relay pods available", "2/2")),
]  # fmt: skip


@pytest.mark.parametrize(("args", "kw", "want"), [r[1:] for r in EXACT], ids=[r[0] for r in EXACT])
def test_the_whole_condition(args: tuple[Any, ...], kw: dict[str, Any], want: Availability) -> None:
    assert run(*args, **kw) == want


def test_the_defaults_are_an_unnamed_single_replica() -> None:
    """Called with the defaults (no name, no replicas), a Deployment just created is one
    replica, not yet observed."""
    a = availability(None, SERVICE, published=True, created=frozenset({"Deployment"}))
    assert a == Availability(
        "False",
        AvailableReason.PROGRESSING,
        "the Deployment controller has not observed generation 1 of  yet (observed 0)",
        "0/1",
    )


@pytest.mark.parametrize(
    ("updated", "running", "message"),
    [
        (1, 3, "llama-pool-relay is rolling out: 1/2 relay pods updated, 2 old ones still running"),
        (2, 3, "llama-pool-relay is rolling out: 2/2 relay pods updated, 1 old one still running"),
        (0, 2, "llama-pool-relay is rolling out: 0/2 relay pods updated, 2 old ones still running"),
        (1, 1, "llama-pool-relay is rolling out: 1/2 relay pods updated"),
    ],
)
def test_the_old_pods_of_a_rollout_do_not_make_the_relay_available(
    updated: int, running: int, message: str
) -> None:
    a = run(deployment(2, 2, updated=updated, running=running))
    assert (a.status, a.reason, a.message, a.pods) == (
        "False",
        AvailableReason.PROGRESSING,
        message,
        "2/2",
    )


def test_a_rollout_past_its_deadline_is_unavailable_though_old_pods_serve() -> None:
    stuck = [
        {
            "type": "Progressing",
            "status": "False",
            "reason": "ProgressDeadlineExceeded",
            "message": "ReplicaSet has timed out progressing.",
        }
    ]
    a = run(deployment(2, 2, updated=1, running=3, conditions=stuck))
    assert (a.status, a.reason) == ("False", AvailableReason.UNAVAILABLE)
    assert a.message == (
        "the rollout of llama-pool-relay failed (1/2 relay pods updated): Progressing "
        "ProgressDeadlineExceeded: ReplicaSet has timed out progressing."
    )


def test_a_withdrawn_pool_whose_relay_delete_is_refused_says_so() -> None:
    refused = "delete Deployment llama-pool-relay: 403 denied"
    a = run(deployment(), published=False, refused=refused)
    assert (a.status, a.reason, a.message) == (
        "False",
        AvailableReason.WITHDRAWN,
        "the pool is withdrawn; its objects stay: delete Deployment llama-pool-relay: 403 denied",
    )


def test_a_replica_that_cannot_be_made_fails_the_rollout_and_a_progressing_one_does_not() -> None:
    failure = {
        "type": "ReplicaFailure",
        "status": "True",
        "reason": "FailedCreate",
        "message": "quota",
    }
    a = run(deployment(2, 2, updated=1, running=3, conditions=[failure]))
    assert (a.status, a.reason, a.message, a.pods) == (
        "False",
        AvailableReason.UNAVAILABLE,
        "the rollout of llama-pool-relay failed (1/2 relay pods updated): "
        "ReplicaFailure FailedCreate: quota",
        "2/2",
    )
    fine = [
        {"type": "ReplicaFailure", "status": "False", "reason": "R", "message": "r"},
        {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": "p"},
    ]
    b = run(deployment(2, 2, updated=1, running=3, conditions=fine))
    assert (b.status, b.reason, b.pods) == ("False", AvailableReason.PROGRESSING, "2/2")


def test_pending_relay_writes_are_said_only_while_the_relay_is_not_available() -> None:
    pending = "Service llama-pool-relay waits for write Deployment llama-pool-relay: held"
    down = run(None, pending=pending)
    assert (down.status, down.reason, down.message, down.pods) == (
        "False",
        AvailableReason.DEPLOYMENT_MISSING,
        f"Deployment llama-pool-relay does not exist yet; {pending}",
        "",
    )
    up = run(deployment(2, 2), pending=pending)
    assert up == run(deployment(2, 2))


def test_the_pods_are_shown_while_a_change_rolls_out_and_while_a_write_waits() -> None:
    changed = run(deployment(2, 1, generation=4, observed=3))
    assert (changed.reason, changed.pods) == (AvailableReason.PROGRESSING, "1/2")
    waiting = run(deployment(2, 0, observed=2), pending="Service x waits")
    assert (waiting.reason, waiting.pods) == (AvailableReason.PROGRESSING, "0/2")
    assert waiting.message.endswith("; Service x waits")
