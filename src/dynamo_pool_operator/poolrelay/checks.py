"""Publish or withdraw a pool's relay: an ordered chain of named pure checks.

Each check looks at one thing and, when that thing stops the pool, says why and
what to change. The chain's order *is* the documented precedence (docs/crd.md's
table is generated from `CHECKS`): it runs from "may this relay act at all" to "may
it write its objects", so the reason shown is the one to fix first. The first check
that withdraws wins; when none does, the relay is published.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..api import names
from ..api.dgd import DISCOVERY_BACKEND_ANNOTATION, KUBERNETES_DISCOVERY, Pool
from ..api.relay import Relay
from ..pipeline.model import Decision
from ..runtime.ownership import describe_controller, is_controlled_by


class Reason(StrEnum):
    """The `Published` (and `Ready`) condition's reason: why a relay is (not) published."""

    PUBLISHED = "Published"
    RELAY_TERMINATING = "RelayTerminating"
    INVALID_CONFIGURATION = "InvalidConfiguration"
    DGD_NOT_FOUND = "DGDNotFound"
    DGD_TERMINATING = "DGDTerminating"
    KUBERNETES_DISCOVERY_DISABLED = "KubernetesDiscoveryDisabled"
    NO_WORKERS = "NoWorkers"
    GLOBAL_DYNAMO_NAMESPACE = "GlobalDynamoNamespace"
    OWNERSHIP_CONFLICT = "OwnershipConflict"


def decision(reason: Reason, message: str) -> Decision:
    """A decision with `reason`: publish exactly when it is `Published`."""
    return Decision(reason is Reason.PUBLISHED, reason, message)


@dataclass(frozen=True, slots=True)
class Facts:
    """What the checks look at: the relay, its pool (None: no DGD), the objects named
    `<name>-pool-relay` by kind, and the operator's default discovery backend."""

    relay: Relay
    pool: Pool | None
    relay_objects: Mapping[str, Mapping[str, Any] | None]
    default_discovery_backend: str


@dataclass(frozen=True, slots=True)
class Check:
    """One rule: `withdraws(facts)` is the message (what to change) when it stops the
    pool, None when it does not. `fix` is the rule in a line, for the docs."""

    reason: Reason
    fix: str
    withdraws: Callable[[Facts], str | None]


def relay_terminating(f: Facts) -> str | None:
    if not f.relay.terminating:
        return None
    return (
        "the DynamoPoolRelay is being deleted; its pool is withdrawn (a finalizer holds "
        "it: the deletion completes when that finalizer is removed)"
    )


def invalid_configuration(f: Facts) -> str | None:
    relay_name = names.relay_name(f.relay.name)
    name_problems = names.dns1035_label_errors(relay_name)
    if name_problems:
        return (
            f"the relay Service name {relay_name!r} is not a valid Service name: "
            f"{'; '.join(name_problems)}. Name the DynamoPoolRelay (and its DGD) with at most "
            f"{names.DNS1035_MAX - len(names.RELAY_SUFFIX)} lower-case letters, digits or '-'"
        )
    if f.relay.problems:
        return "; ".join(f.relay.problems)
    return None


def dgd_not_found(f: Facts) -> str | None:
    if f.pool is not None:
        return None
    return f"no DynamoGraphDeployment {f.relay.name!r} in namespace {f.relay.namespace!r}"


def dgd_terminating(f: Facts) -> str | None:
    if f.pool is None or not f.pool.terminating:
        return None
    return f"DynamoGraphDeployment {f.pool.name!r} is being deleted"


def kubernetes_discovery_disabled(f: Facts) -> str | None:
    if f.pool is None:
        return None
    backend = f.pool.discovery_backend(f.default_discovery_backend)
    if backend == KUBERNETES_DISCOVERY:
        return None
    return (
        f"the DGD's discovery backend is {backend!r}; a pool needs Kubernetes pod "
        f"discovery: set the DGD annotation {DISCOVERY_BACKEND_ANNOTATION}="
        f"{KUBERNETES_DISCOVERY!r} (or remove it if the operator's discovery.backend is "
        f"{KUBERNETES_DISCOVERY!r})"
    )


def no_workers(f: Facts) -> str | None:
    if f.pool is None or f.pool.workers:
        return None
    return "the DGD has no worker component (type worker, prefill or decode)"


def global_dynamo_namespace(f: Facts) -> str | None:
    if f.pool is None or not f.pool.uses_global_namespace:
        return None
    shared = [c.name for c in f.pool.components if c.global_dynamo_namespace]
    return (
        f"components {shared} use the shared global Dynamo namespace "
        f"{names.GLOBAL_DYNAMO_NAMESPACE!r}; a pool needs its own Dynamo namespace"
    )


def ownership_conflict(f: Facts) -> str | None:
    relay_name = names.relay_name(f.relay.name)
    conflicts = [
        f"{kind} {relay_name!r} has {describe_controller(obj)}"
        for kind, obj in sorted(f.relay_objects.items())
        if obj is not None and not is_controlled_by(obj, f.relay.uid)
    ]
    if not conflicts:
        return None
    return (
        "; ".join(conflicts) + ": the operator never adopts objects; delete the other "
        "object, or use another name for the DynamoPoolRelay and its DGD"
    )


#: The precedence, first match wins.
CHECKS: tuple[Check, ...] = (
    Check(
        Reason.RELAY_TERMINATING,
        "The relay is being deleted but a finalizer (someone else's) holds it: its pool is "
        "withdrawn meanwhile. Nothing to change; the deletion completes when that finalizer "
        "is removed.",
        relay_terminating,
    ),
    Check(
        Reason.INVALID_CONFIGURATION,
        "The relay's name makes `<name>-pool-relay` an invalid Service name (dots, upper "
        "case, > 52 characters), or a spec field is invalid: the message names it.",
        invalid_configuration,
    ),
    Check(
        Reason.DGD_NOT_FOUND,
        "Create the DGD of the same name in the same namespace.",
        dgd_not_found,
    ),
    Check(
        Reason.DGD_TERMINATING,
        "The DGD is being deleted; a new one of the same name is published again.",
        dgd_terminating,
    ),
    Check(
        Reason.KUBERNETES_DISCOVERY_DISABLED,
        "Set the DGD annotation `nvidia.com/dynamo-discovery-backend: kubernetes` (or remove "
        "an `etcd` one when `discovery.backend` is `kubernetes`).",
        kubernetes_discovery_disabled,
    ),
    Check(
        Reason.NO_WORKERS,
        "Add a component of type `worker`, `prefill` or `decode`.",
        no_workers,
    ),
    Check(
        Reason.GLOBAL_DYNAMO_NAMESPACE,
        "A pool needs its own Dynamo namespace: unset `globalDynamoNamespace` on its components.",
        global_dynamo_namespace,
    ),
    Check(
        Reason.OWNERSHIP_CONFLICT,
        "A Deployment or Service named `<dgd>-pool-relay` exists and this relay does not "
        "control it. The operator never adopts: delete it (or rename the pool). It publishes "
        "again by itself once the name is free.",
        ownership_conflict,
    ),
)


def decide(
    relay: Relay,
    pool: Pool | None,
    relay_objects: Mapping[str, Mapping[str, Any] | None],
    *,
    default_discovery_backend: str,
) -> Decision:
    """Run the chain for `relay` given its pool (None when the DGD is absent) and the
    cached objects named `<name>-pool-relay` keyed by kind ("Deployment", "Service")."""
    facts = Facts(relay, pool, relay_objects, default_discovery_backend)
    for check in CHECKS:
        message = check.withdraws(facts)
        if message is not None:
            return decision(check.reason, message)
    relay_name = names.relay_name(relay.name)
    return decision(Reason.PUBLISHED, f"relay Service {relay_name!r} is published")


def precedence_table() -> str:
    """docs/crd.md's table of withdrawal reasons, in precedence order (drift-tested)."""
    rows = ["| Reason | What to change |", "|---|---|"]
    rows += [f"| `{c.reason.value}` | {c.fix} |" for c in CHECKS]
    return "\n".join(rows) + "\n"
