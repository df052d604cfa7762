"""Every word a DynamoPoolRelay's status says, in one place.

The status is an API: `kubectl wait --for=condition=Ready`, alerts on
`dynamo_pool_operator_relays{condition,reason}`, the `status` and `check` commands
and the printer columns all read these words. So they are declared once, here, and
everything else derives its lists from them: the rules that pick a reason
(`pool/report.py`, `pool/plan.py`, `pool/report.py`,
`pool/exports/verdict.py`), docs/crd.md's tables (generated), the `status` command's
hints (keyed by these reasons), the metrics and the printer columns.

One grammar for all of them (Cluster API's): a condition type is a CamelCase
adjective or past participle that reads as a positive state (`Published`,
`RelayAvailable`, `Exported`, `Ready`); each type's reasons are a `StrEnum`
named `<Type>Reason`, CamelCase, naming the cause rather than the symptom;
`Ready` summarizes the others in `READY_PARTS` order and, when it is not True,
carries the first failing part's reason. Adding a condition is: its type here
(in `READY_PARTS` at the place it ranks), its reasons and their meanings here,
and the rule that computes it as a `Condition`, listed in `pool/report.RULES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Protocol

from dynamo_pool_operator.runtime.objects import MESSAGE_LIMIT, record


class Status(StrEnum):
    """A condition's status (metav1.ConditionStatus)."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ConditionType(StrEnum):
    PUBLISHED = "Published"
    RELAY_AVAILABLE = "RelayAvailable"
    CLUSTER_ID_MATCHED = "ClusterIDMatched"
    EXPORTED = "Exported"
    READY = "Ready"


#: The conditions `Ready` summarizes, in its order: the first one that is not True is
#: the reason shown (the one to fix first). `ClusterIDMatched` is present only where
#: the cluster ID is checked (`mcs` with the About API served), `Exported` only with an
#: MCS implementation.
READY_PARTS: tuple[ConditionType, ...] = (
    ConditionType.PUBLISHED,
    ConditionType.RELAY_AVAILABLE,
    ConditionType.CLUSTER_ID_MATCHED,
    ConditionType.EXPORTED,
)


class PublishedReason(StrEnum):
    """Why a relay is (not) published: the check chain's decision."""

    PUBLISHED = "Published"
    RELAY_TERMINATING = "RelayTerminating"
    INVALID_CONFIGURATION = "InvalidConfiguration"
    DGD_UNREADABLE = "DGDUnreadable"
    DGD_NOT_FOUND = "DGDNotFound"
    DGD_TERMINATING = "DGDTerminating"
    KUBERNETES_DISCOVERY_DISABLED = "KubernetesDiscoveryDisabled"
    NO_WORKERS = "NoWorkers"
    GLOBAL_DYNAMO_NAMESPACE = "GlobalDynamoNamespace"
    OWNERSHIP_CONFLICT = "OwnershipConflict"


class RelayAvailableReason(StrEnum):
    """Whether the relay's Deployment runs, from the Deployment's own status."""

    AVAILABLE = "Available"
    PARTIALLY_AVAILABLE = "PartiallyAvailable"
    WITHDRAWN = "Withdrawn"
    WRITE_REFUSED = "WriteRefused"
    DEPLOYMENT_MISSING = "DeploymentMissing"
    SERVICE_MISSING = "ServiceMissing"
    SCALED_TO_ZERO = "ScaledToZero"
    PROGRESSING = "Progressing"
    UNAVAILABLE = "Unavailable"


class ClusterIDMatchedReason(StrEnum):
    """Whether the Global Discovery Service can join the pool: the relay's cluster ID
    against the cluster's own (the About API property `cluster.clusterset.k8s.io`)."""

    MATCHED = "Matched"
    FROM_CLUSTER_PROPERTY = "FromClusterProperty"
    NO_CLUSTER_PROPERTY = "NoClusterProperty"
    CLUSTER_ID_MISMATCH = "ClusterIDMismatch"
    CLUSTER_PROPERTY_UNREADABLE = "ClusterPropertyUnreadable"


class ExportedReason(StrEnum):
    """The `Exported` condition's own reasons; a refusal shows the implementation's."""

    IMPLEMENTATION_READY = "ImplementationReady"
    READY_WITH_CONFLICT = "ReadyWithConflict"
    EXPORT_EXISTS = "ExportExists"
    UNCONFIRMED = "Unconfirmed"
    PENDING = "Pending"
    EXPORT_FAILED = "ExportFailed"
    NOT_CONTROLLED = "NotControlled"
    WITHDRAWN = "Withdrawn"
    NOTHING_TO_EXPORT = "NothingToExport"
    EXPORT_API_UNAVAILABLE = "ExportAPIUnavailable"


class ReadyReason(StrEnum):
    """`Ready`'s own reasons; when it is not True it carries its first failing part's."""

    READY = "Ready"
    #: Not a reason the operator writes: what readers show for a relay with no status yet.
    NOT_RECONCILED = "NotReconciled"


class ExportState(StrEnum):
    """An entry's `state` in `status.exports[]`."""

    EXPORTED = "Exported"
    PENDING = "Pending"
    FAILED = "Failed"
    FOREIGN = "Foreign"
    SKIPPED = "Skipped"
    #: Ours, withdrawn, and still being deleted past `multiCluster.unconfirmedAfter`:
    #: someone else's finalizers hold it (the line names them).
    WITHDRAWING = "Withdrawing"


class ExportLineReason(StrEnum):
    """An entry's `reason` in `status.exports[]` (none for a plain `Exported`)."""

    INVALID_SERVICE_NAME = "InvalidServiceName"
    SERVICE_NAME_TOO_LONG = "ServiceNameTooLong"
    EXPORT_FAILED = "ExportFailed"
    NOT_CONTROLLED = "NotControlled"
    TERMINATING = "Terminating"
    #: Not written in this pass: what it needs (its Service) did not succeed.
    WAITING = "Waiting"
    #: The relay Service is being replaced by one of the other shape: its export is
    #: withdrawn with it and created again after the new one (a rule reads this back).
    SERVICE_REPLACED = "ServiceReplaced"
    #: A frontend's Service is someone else's (not the DGD's): not exported.
    FOREIGN_SERVICE = "ForeignService"
    #: A frontend's Service does not exist (yet): not exported until it exists and is
    #: the DGD's (`Pending`).
    SERVICE_NOT_FOUND = "ServiceNotFound"
    #: A withdrawn export stays, held by finalizers that are not ours (`Withdrawing`).
    HELD_BY_FINALIZERS = "HeldByFinalizers"
    #: Exported, but the Global Router finds a pool's frontends by the name
    #: `<dgd>-frontend` only: this frontend's Service is named otherwise.
    FRONTEND_NOT_DISCOVERABLE = "FrontendNotDiscoverable"


#: Our words by their text: a shown condition is read on every pass, and a dict lookup
#: is what the enum's own constructor does, at a fraction of its cost.
CONDITION_TYPES: dict[str, ConditionType] = {t.value: t for t in ConditionType}
STATUSES: dict[str, Status] = {s.value: s for s in Status}


class Stated(Protocol):
    """A condition's status and reason: a `Condition`, or one as a status shows it
    (`api.shown.ShownCondition`)."""

    @property
    def status(self) -> str | None: ...

    @property
    def reason(self) -> str: ...


@record
class Condition:
    """One condition as a rule computes it (before its times and generation), or as a
    status shows it (`read`): transitions are decided on these, never on dicts."""

    type: ConditionType
    status: Status
    reason: str
    message: str

    @property
    def true(self) -> bool:
        return self.status == Status.TRUE

    @classmethod
    def read(cls, shown: Mapping[str, Any] | None) -> Condition | None:
        """A condition as a status shows it; None when absent, or when its type or status
        is none of ours (any computed condition then differs from it). A reason or
        message that is not a string reads as ""."""
        if shown is None:
            return None
        type_, status = shown.get("type"), shown.get("status")
        if not (isinstance(type_, str) and isinstance(status, str)):
            return None
        typed, stated = CONDITION_TYPES.get(type_), STATUSES.get(status)
        if typed is None or stated is None:
            return None
        reason, message = shown.get("reason"), shown.get("message")
        return cls(
            typed,
            stated,
            reason if isinstance(reason, str) else "",
            message if isinstance(message, str) else "",
        )

    def moved(self, before: Stated | None) -> bool:
        """A transition: the status or reason differs from what was shown (or nothing was)."""
        return before is None or (before.status, before.reason) != (self.status, self.reason)

    def written(self, *, generation: int, since: str) -> dict[str, Any]:
        """The condition as the status carries it (metav1.Condition)."""
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message[:MESSAGE_LIMIT],
            "observedGeneration": generation,
            "lastTransitionTime": since,
        }


#: What each reason means and what to do: docs/crd.md's tables (generated). `Published`'s
#: are the check chain's one-line rules.
PUBLISHED_MEANINGS: dict[PublishedReason, str] = {
    PublishedReason.PUBLISHED: "True: every check passed; the relay runs and its Services "
    "are exported.",
    PublishedReason.RELAY_TERMINATING: "The relay is being deleted but a finalizer (someone "
    "else's) holds it: its pool is withdrawn meanwhile. Nothing to change; the deletion "
    "completes when that finalizer is removed.",
    PublishedReason.INVALID_CONFIGURATION: "The relay's name makes `<name>-pool-relay` an "
    "invalid Service name (dots, upper case, > 52 characters): withdrawn; or a spec field is "
    "invalid: the message names it, and a running pool is kept as it runs until it is fixed.",
    PublishedReason.DGD_UNREADABLE: "The DGD exists but the operator cannot decode it (a "
    "field nested deeper than 1,024 levels, say): the message names it and why; make the "
    "DGD readable. A DGD that was readable before keeps its last readable version.",
    PublishedReason.DGD_NOT_FOUND: "Create the DGD of the same name in the same namespace.",
    PublishedReason.DGD_TERMINATING: "The DGD is being deleted; a new one of the same name is "
    "published again.",
    PublishedReason.KUBERNETES_DISCOVERY_DISABLED: "Set the DGD annotation "
    "`nvidia.com/dynamo-discovery-backend: kubernetes` (or remove an `etcd` one when "
    "`discovery.backend` is `kubernetes`).",
    PublishedReason.NO_WORKERS: "Add a component of type `worker`, `prefill` or `decode`.",
    PublishedReason.GLOBAL_DYNAMO_NAMESPACE: "A pool needs its own Dynamo namespace: unset "
    "`globalDynamoNamespace` on its components.",
    PublishedReason.OWNERSHIP_CONFLICT: "A Deployment or Service named `<dgd>-pool-relay` "
    "exists and this relay does not control it. The operator never adopts: delete it (or "
    "rename the pool). It publishes again by itself once the name is free (within two "
    "minutes for an object without the relay's labels: it is read again every 30 s to "
    "120 s, no watch shows it).",
}

RELAY_AVAILABLE_MEANINGS: dict[RelayAvailableReason, str] = {
    RelayAvailableReason.AVAILABLE: "True: the rollout is complete and every replica of "
    "`spec.replicas` is available.",
    RelayAvailableReason.PARTIALLY_AVAILABLE: "True: the rollout is complete and at least one "
    "replica is available, not all (one relay pod serves the pool).",
    RelayAvailableReason.WITHDRAWN: "The pool is not published (see `Published`).",
    RelayAvailableReason.WRITE_REFUSED: "The API server refused a write of the relay's "
    "Deployment or Service; the message names the verb, the object and the answer.",
    RelayAvailableReason.DEPLOYMENT_MISSING: "The Deployment does not exist yet, or ours is "
    "being deleted (it is created again once gone).",
    RelayAvailableReason.SERVICE_MISSING: "The relay Service does not exist yet, or ours is "
    "being deleted (it is created again once gone).",
    RelayAvailableReason.SCALED_TO_ZERO: "`spec.replicas` is 0: no relay pod runs.",
    RelayAvailableReason.PROGRESSING: "The Deployment is new, was just changed or is rolling "
    "out: its controller has not observed its current generation, or not every replica runs "
    "the current pod template yet (`kubectl rollout status`'s rule; old pods run what the "
    "relay no longer says, so they do not count). Records no Warning: a rollout that fails "
    "turns `Unavailable` at its progress deadline.",
    RelayAvailableReason.UNAVAILABLE: "No replica is available, or a rollout ran past its "
    "progress deadline; the Deployment's own `ReplicaFailure`, `Progressing` (e.g. "
    "`ProgressDeadlineExceeded`: an image that cannot be pulled ends here) and `Available` "
    "conditions are quoted.",
}

CLUSTER_ID_MATCHED_MEANINGS: dict[ClusterIDMatchedReason, str] = {
    ClusterIDMatchedReason.MATCHED: "True: `spec.clusterId` is the cluster's ID.",
    ClusterIDMatchedReason.FROM_CLUSTER_PROPERTY: "True: the relay has no `spec.clusterId` "
    "and takes the cluster's ID.",
    ClusterIDMatchedReason.NO_CLUSTER_PROPERTY: "True: the cluster has no ID property (or an "
    "empty value): nothing to compare.",
    ClusterIDMatchedReason.CLUSTER_ID_MISMATCH: "False: `spec.clusterId` differs from the "
    "cluster's ID, and the Global Discovery Service joins a pool only when they are equal: "
    "set `spec.clusterId` to the cluster's ID (the message names both) or remove it.",
    ClusterIDMatchedReason.CLUSTER_PROPERTY_UNREADABLE: "Unknown: the cluster's ID property "
    "cannot be read (its cache has not synced: is the ClusterProperty reader role bound?). "
    "The relay keeps its last known cluster ID (`status.clusterId`); a published relay that "
    "never had one holds its Deployment until the ID can be read.",
}

EXPORTED_MEANINGS: dict[ExportedReason, str] = {
    ExportedReason.IMPLEMENTATION_READY: "True: the implementation confirmed every export "
    "(`Ready=True`, or `Valid=True` where it writes no `Ready`).",
    ExportedReason.READY_WITH_CONFLICT: "True: the implementation imports an export "
    "(`Ready=True`) but reports a conflict with another cluster's export of the name "
    "(`Conflict=True`; KEP-1645: the oldest export's properties win); the conflict is "
    "quoted and a Warning recorded.",
    ExportedReason.EXPORT_EXISTS: "True (`multiCluster.confirmation: none`): every export "
    "exists and the implementation writes no condition (Karmada, AWS Cloud Map, Clusternet): "
    "nothing "
    "more is known.",
    ExportedReason.UNCONFIRMED: "Unknown (`multiCluster.confirmation: valid` or `ready`): "
    "the implementation has written no condition on an export for longer than "
    "`multiCluster.unconfirmedAfter` (60s), or (`ready`) only `Valid=True` and no `Ready`; "
    "a Warning says so. Is it running? One that never writes conditions wants "
    "`confirmation: none`, one that never writes `Ready` (Antrea) `valid`.",
    ExportedReason.PENDING: "Unknown: the implementation is still working (`Ready=False` "
    "`AwaitingExport`, no condition yet on a new export, `AwaitingReady` under "
    "`confirmation: ready`), an export is being deleted, it "
    "waits for its Service (`Waiting`), the relay Service's export waits for its "
    "replaced Service (`ServiceReplaced`), or a frontend's Service does not exist yet "
    "(`ServiceNotFound`: Dynamo's operator makes it; a frontend is exported only once its "
    "Service exists and is the DGD's).",
    ExportedReason.EXPORT_FAILED: "False: a write of an export failed (see the "
    "`ExportFailed` Event).",
    ExportedReason.NOT_CONTROLLED: "False: someone else's export has a name the pool needs.",
    ExportedReason.WITHDRAWN: "False: the pool is not published.",
    ExportedReason.NOTHING_TO_EXPORT: "False: no Service of the pool can be exported (every "
    "name is skipped).",
    ExportedReason.EXPORT_API_UNAVAILABLE: "False: `multiCluster.mcsImplementation` is set but "
    "the cluster no longer serves the ServiceExport API (its CRD was deleted): install the "
    "MCS CRDs again and the exports are created again within "
    "`multiCluster.apiDiscoveryInterval`, no restart needed.",
}

#: Every condition's reasons and meanings, by type (Ready's parts; Ready itself takes
#: its first failing part's reason).
MEANINGS: dict[str, dict[str, str]] = {
    ConditionType.PUBLISHED: {str(r): text for r, text in PUBLISHED_MEANINGS.items()},
    ConditionType.RELAY_AVAILABLE: {str(r): text for r, text in RELAY_AVAILABLE_MEANINGS.items()},
    ConditionType.CLUSTER_ID_MATCHED: {
        str(r): text for r, text in CLUSTER_ID_MATCHED_MEANINGS.items()
    },
    ConditionType.EXPORTED: {str(r): text for r, text in EXPORTED_MEANINGS.items()},
}
#: What an `Exported` reason that is none of ours means: the MCS implementation's own.
IMPLEMENTATION_REASON_MEANING = (
    "False: the MCS implementation's own reason (`Valid=False`, `Ready=False`, "
    "`Conflict=True`), with its message and time, verbatim."
)
