"""Every Event reason the operator records on a relay, in one place.

Events are an API too: alerts and `kubectl get events --field-selector reason=...`
read their reasons. So each reason is declared once, here, with its type and what it
means, and every emitter takes it from here: the executor's writes (`EventNames`), the
export plan's advisories, the report's transitions. docs/events.md's table is
generated from `EVENTS` (tools/generate_docs.py), and a unit test fails when a reason
is recorded that is not declared here.

Besides these, a condition that moves records a Warning with the condition's own
reason (`api/conditions.py`'s words; for `Exported`, also the MCS implementation's):
`CONDITION_CHANGED` says which, and `QUIET_REASONS` and `WARNING_STATES` say when
(`pool/report.py`'s `warned` applies them).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from dynamo_pool_operator.api.conditions import (
    MEANINGS,
    ClusterIDMatchedReason,
    ConditionType,
    ExportedReason,
    RelayAvailableReason,
    Status,
)
from dynamo_pool_operator.runtime.objects import record

EventType = Literal["Normal", "Warning"]


class EventReason(StrEnum):
    """The reasons of the Events of writes (the executor's) and of a pool's readiness."""

    EXPORT_CREATED = "ExportCreated"
    EXPORT_REPAIRED = "ExportRepaired"
    EXPORT_DELETED = "ExportDeleted"
    EXPORT_FAILED = "ExportFailed"
    POOL_READY = "PoolReady"
    RELAY_WRITE_FAILED = "RelayWriteFailed"
    RELAY_SERVICE_REPLACED = "RelayServiceReplaced"


class ExportWarning(StrEnum):
    """The Warning reasons of the export plan's advisories."""

    INVALID_SERVICE_NAME = "InvalidServiceName"
    SERVICE_NAME_TOO_LONG = "ServiceNameTooLong"
    NO_FRONTEND = "NoFrontend"
    CLUSTER_ID_MISMATCH = "ClusterIDMismatch"
    #: The cluster ID could not be read: the same reason as a failed export write.
    EXPORT_FAILED = EventReason.EXPORT_FAILED.value
    FOREIGN_SERVICE = "ForeignService"
    #: A withdrawn export of ours held past `unconfirmedAfter` by others' finalizers.
    EXPORT_STUCK_TERMINATING = "ExportStuckTerminating"
    #: A frontend exported under a name the Global Router does not look for.
    FRONTEND_NOT_DISCOVERABLE = "FrontendNotDiscoverable"


@record
class Event:
    """What an Event is: its type, action and related object, when it is recorded
    and what to do about it (docs/events.md's row)."""

    type: EventType
    action: str
    related: str
    when: str
    what_to_do: str = ""


EVENTS: dict[str, Event] = {
    EventReason.EXPORT_CREATED: Event(
        "Normal", "Create", "the export", "The pool's ServiceExport was created."
    ),
    EventReason.EXPORT_REPAIRED: Event(
        "Normal",
        "Repair",
        "the export",
        "Someone changed our DGD label or controller reference; restored on the same object.",
    ),
    EventReason.EXPORT_DELETED: Event(
        "Normal",
        "Delete",
        "the export",
        "Withdrawn (relay withdrawn, frontend renamed/removed, its Service gone or someone "
        "else's, name not importable).",
    ),
    EventReason.EXPORT_FAILED: Event(
        "Warning",
        "Create / Repair / Delete / ReadClusterID",
        "the export, or the ClusterProperty",
        "A write (or the cluster ID read) failed; retried with backoff.",
        "Read the note: RBAC, admission webhooks and quotas are the usual causes.",
    ),
    EventReason.POOL_READY: Event(
        "Normal",
        "Ready",
        "—",
        "The pool became Ready: published, relay pods available and (with an "
        "implementation) exports confirmed.",
    ),
    EventReason.RELAY_WRITE_FAILED: Event(
        "Warning",
        "Create / Apply / Delete",
        "the relay's Deployment or Service",
        "The API server refused a write of the relay's own object; `Ready` is `False` "
        "(`WriteRefused`) meanwhile. Retried with backoff.",
        "Read the note: RBAC, admission policies, quotas and a full Service IP range are "
        "the usual causes.",
    ),
    EventReason.RELAY_SERVICE_REPLACED: Event(
        "Normal",
        "Delete",
        "the relay",
        "The relay Service had the other shape (`spec.service.headless` or "
        "`poolRelay.headless` changed, or an upgrade to the headless default): `clusterIP` "
        "is immutable, so the operator deleted its own Service (uid and resourceVersion as "
        "read) and creates the new one at once. The Service's export was withdrawn just "
        "before (`ExportDeleted`) and is created again 5 s after the new Service exists, so "
        "the MCS implementation drops the import of the old shape first; the pool is not "
        "imported meanwhile. The frontends' exports stay.",
    ),
    ExportWarning.INVALID_SERVICE_NAME: Event(
        "Warning",
        "Export",
        "the DGD",
        "A frontend's Service name is not a valid Service name (> 63 characters); not exported.",
        "Shorten the DGD or component name.",
    ),
    ExportWarning.SERVICE_NAME_TOO_LONG: Event(
        "Warning",
        "Export",
        "the DGD",
        "Karmada only: names over 55 characters cannot be imported (`derived-<name>` "
        "label); not exported, and an earlier export of it is withdrawn.",
        "Shorten the DGD or component name.",
    ),
    ExportWarning.FOREIGN_SERVICE: Event(
        "Warning",
        "Export",
        "the Service",
        "A frontend's Service name (`<dgd>-<component>`) is taken by a Service that is not "
        "the DGD's (not controlled by the DGD, nor by a DynamoComponentDeployment the DGD "
        "controls); the note names its controller. Not exported, and an export of ours of "
        "that name is withdrawn.",
        "Rename the frontend.",
    ),
    ExportWarning.NO_FRONTEND: Event(
        "Warning",
        "Export",
        "the DGD",
        "The pool has no frontend component; only the relay Service is exported.",
    ),
    ExportWarning.FRONTEND_NOT_DISCOVERABLE: Event(
        "Warning",
        "Export",
        "the DGD",
        "No frontend component is named `Frontend`: each is exported as "
        "`<dgd>-<component>`, but the Global Router finds a pool's frontends by the name "
        "`<dgd>-frontend` only, so no router finds this pool. Their export lines say "
        "`FrontendNotDiscoverable` (also, without this Warning, that of a frontend beside "
        "`Frontend`: the router uses only that one).",
        "Name the frontend component `Frontend` (its Service becomes `<dgd>-frontend`).",
    ),
    ExportWarning.CLUSTER_ID_MISMATCH: Event(
        "Warning",
        "CheckClusterID",
        "the ClusterProperty",
        "mcs only: `spec.clusterId` differs from `cluster.clusterset.k8s.io`.",
        "Set `spec.clusterId` to the property's value.",
    ),
    ExportWarning.EXPORT_STUCK_TERMINATING: Event(
        "Warning",
        "Withdraw",
        "the export",
        "A withdrawn export of ours has been being deleted for longer than "
        "`multiCluster.unconfirmedAfter` (60s): finalizers someone else added (AWS Cloud "
        "Map's, Clusternet's, ...) hold it, and the implementation may still import it. "
        "The note names them; the relay's `status.exports[]` shows the export "
        "`Withdrawing` with them. Once per export, when its line turns `Withdrawing`.",
        "Find why the finalizer's controller does not finish (is it running? its logs), "
        "or remove the finalizer by hand once its cleanup is done.",
    ),
}

#: The action of each export advisory that is not `Export`.
ADVISORY_ACTIONS: dict[ExportWarning, str] = {
    ExportWarning.CLUSTER_ID_MISMATCH: "CheckClusterID",
    ExportWarning.EXPORT_FAILED: "ReadClusterID",
    ExportWarning.EXPORT_STUCK_TERMINATING: "Withdraw",
}

#: False reasons that record no Warning: the cause has its own Event already (a refused
#: write), follows from another condition (a withdrawn pool is withdrawn everywhere), or
#: is the normal first moments of a relay (a new Deployment its controller has not
#: observed yet; one that stays unavailable turns `Unavailable`, which warns).
QUIET_REASONS: frozenset[str] = frozenset(
    {
        RelayAvailableReason.WRITE_REFUSED,
        RelayAvailableReason.WITHDRAWN,
        RelayAvailableReason.PROGRESSING,
        ExportedReason.EXPORT_FAILED,
        ExportedReason.WITHDRAWN,
        # Warned about by the plan's advisory, a series about the ClusterProperty.
        ClusterIDMatchedReason.CLUSTER_ID_MISMATCH,
    }
)

#: States other than False that record a Warning when a condition enters them: an
#: export no implementation confirmed in time (still not exported), and one imported
#: despite a conflict (it works, but another cluster's export disagrees with it).
WARNING_STATES: frozenset[tuple[Status, str]] = frozenset(
    {
        (Status.UNKNOWN, ExportedReason.UNCONFIRMED),
        (Status.TRUE, ExportedReason.READY_WITH_CONFLICT),
    }
)


#: A condition that moved: a Warning whose reason is the condition's (docs/events.md).
CONDITION_CHANGED_REASON = (
    "the condition's reason (`ScaledToZero`, `Unavailable`, `ConflictingPorts`, `DGDNotFound`, ...)"
)
CONDITION_CHANGED = Event(
    "Warning",
    "`Published` / `RelayAvailable` / `Exported`",
    "the DGD, the Deployment, or the export",
    "A condition turned False with a new reason (or entered "
    + " or ".join(f"`{status} {reason}`" for status, reason in sorted(WARNING_STATES))
    + "); the note is the condition's message. No Warning for `Unknown` (`Pending`: the "
    "implementation is at work), nor for "
    + ", ".join(f"`{r}`" for r in sorted(QUIET_REASONS))
    + " (their cause has an Event of its own, follows from `Published=False`, or is a "
    "rollout under way: one that fails turns `Unavailable`).",
    "See [crd.md](crd.md#conditions).",
)

#: Condition transitions worth a row of their own in docs/events.md.
NOTED_TRANSITIONS: dict[str, Event] = {
    ExportedReason.EXPORT_API_UNAVAILABLE: Event(
        "Warning",
        "Exported",
        "—",
        "`mcsImplementation` is set but the cluster stopped serving the ServiceExport API "
        "(its CRD was deleted): nothing is exported and `Ready` is False. One Event per "
        "relay when it happens (an `Exported` transition, as the row above).",
        "Install the MCS CRDs again; the exports are created again within "
        "`multiCluster.apiDiscoveryInterval`, no restart.",
    ),
}


def declared(reason: str, action: str) -> bool:
    """Whether an Event of `reason` and `action` is declared here: one of the operator's
    own reasons, or a condition's transition with one of that condition's reasons (an
    `Exported` refusal carries the MCS implementation's own reason, whatever it is)."""
    if reason in EVENTS:
        return True
    if action == ConditionType.EXPORTED:
        return True
    return reason in MEANINGS.get(action, {})
