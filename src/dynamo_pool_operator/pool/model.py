"""The vocabulary of one pool reconcile: gather -> plan -> execute -> status.

Every object a relay owns is planned with the same verbs and carried out by the same
executor, so "never adopt, write only with uid + resourceVersion" is kept in one place
(`runtime/writes/guarded.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from typing import Any, Final, Literal

from dynamo_pool_operator.api.conditions import ConditionType, Status
from dynamo_pool_operator.api.dgd import Pool
from dynamo_pool_operator.api.mcs import ClusterID
from dynamo_pool_operator.api.relay import Relay
from dynamo_pool_operator.api.shown import ShownCondition, ShownLine, ShownStatus
from dynamo_pool_operator.runtime.objects import Resource, object_version, record


class Verb(StrEnum):
    """What to do about one object a relay owns (or would own)."""

    CREATE = "Create"  # absent: exclusive create
    APPLY = "Apply"  # ours and drifted: guarded apply of the fields we own
    WITHDRAW = "Withdraw"  # ours and no longer wanted: guarded delete
    WAIT = "Wait"  # being deleted: left alone until gone (then created again if wanted)
    FOREIGN = "Foreign"  # someone else's: never touched
    NONE = "None"  # ours and right
    HOLD = "Hold"  # wanted, but an input it needs cannot be read: left as it is (`cause`)
    LOOK = "Look"  # not wanted, and a cache that may hide it shows none: read by name

    @property
    def settles(self) -> bool:
        """Whether the action, once done, leaves its object as the plan wants it (what a
        dependent action may rely on)."""
        return self not in (Verb.WAIT, Verb.FOREIGN, Verb.HOLD, Verb.LOOK)


#: An action's object by kind and name: what other actions name as what they need.
Key = tuple[str, str]


@record
class EventNames:
    """The Events an action records: a Normal reason per successful write (empty: none)
    and the Warning reason of a failed one."""

    failed: str
    created: str = ""
    applied: str = ""
    withdrawn: str = ""


@record
class Action:
    """One object's verb, with everything the executor needs and nothing it decides."""

    verb: Verb
    resource: Resource
    namespace: str
    name: str
    events: EventNames
    #: The cached object decided on (None for CREATE): its uid and resourceVersion guard.
    live: Mapping[str, Any] | None = None
    #: CREATE: the whole object; APPLY: only the fields we own.
    body: Mapping[str, Any] | None = None
    #: APPLY: the object still shows its create's fields: hand them over first.
    hand_over: bool = False
    #: For APPLY: which of our fields differ (for the Event's note).
    fields: tuple[str, ...] = ()
    #: False for an object the relay controls but no longer wants.
    wanted: bool = True
    #: The object this one refers to (an export: its Service), by kind and name.
    points_at: Key | None = None
    #: The actions that must succeed in this pass before this one runs.
    needs: tuple[Key, ...] = ()
    #: HOLD: why (the input that cannot be read), as the status says it.
    cause: str = ""
    #: CREATE: a name found taken is read (the result's `found`): it may be hidden.
    read_if_taken: bool = False

    @property
    def key(self) -> Key:
        return (self.resource.kind, self.name)


@record
class Advisory:
    """An Event to record about the relay: a problem the user can fix that does not stop
    the reconcile (the plan's), or a condition that moved (the report's)."""

    reason: str
    action: str
    message: str
    #: The object it is about (DGD, ClusterProperty, export), at the version read.
    related: Mapping[str, Any] | None
    type: Literal["Normal", "Warning"] = "Warning"


class Result(StrEnum):
    DONE = "Done"  # written, or nothing to write
    GONE = "Gone"  # a delete found it already deleted
    LOST = "Lost"  # a guard refused it, or the name was taken: decide again
    FAILED = "Failed"  # the API server refused it
    SKIPPED = "Skipped"  # not run: what it needs did not succeed, or it is held

    @property
    def succeeded(self) -> bool:
        return self in (Result.DONE, Result.GONE)


@record
class ActionResult:
    action: Action
    result: Result
    #: FAILED: "verb Kind name: answer"; LOST: the race, naming the version read;
    #: SKIPPED: what it waits for, and why.
    message: str = ""
    error: Exception | None = None
    #: DONE apply: the object as the server answered, so the report judges what was
    #: written.
    written: Mapping[str, Any] | None = None
    #: LOST create that reads a name found taken, or DONE look: the object of that name
    #: as the server has it (None: nothing), for the next pass to decide on.
    found: Mapping[str, Any] | None = None


@dataclass
class Outcome:
    """What executing a plan came to, action by action, in order."""

    results: list[ActionResult] = field(default_factory=list)

    @property
    def lost(self) -> list[str]:
        return [r.message for r in self.results if r.result is Result.LOST]

    @property
    def failures(self) -> list[Exception]:
        return [r.error for r in self.results if r.result is Result.FAILED and r.error]

    def of(self, actions: Sequence[Action]) -> list[ActionResult]:
        """The results of `actions` (the exports' own), in order."""
        mine = {id(a) for a in actions}
        return [r for r in self.results if id(r.action) in mine]


@record
class Decision:
    """Publish, or withdraw with exactly one reason, or hold: the spec cannot be rendered,
    so its objects are left as they run (never withdrawn for a typo)."""

    publish: bool
    reason: str
    message: str
    hold: bool = False
    #: The pool stays up: published, or held as it runs (its exports kept). A field, not
    #: a property: every part of the plan asks it.
    keeps_pool: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keeps_pool", self.publish or self.hold)


@record
class StatusLine:
    """One line of `status.exports[]`: a Service the pool exports or skips, and why."""

    name: str
    state: str
    reason: str = ""
    message: str = ""
    #: What the MCS implementation wrote on the export ("valid", "ready", "conflict"),
    #: verbatim.
    implementation: Mapping[str, Mapping[str, str]] | None = None
    #: `Withdrawing`: the finalizers that hold the export.
    finalizers: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "state": self.state}
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        if self.finalizers:
            out["finalizers"] = list(self.finalizers)
        if self.implementation:
            for key, value in sorted(self.implementation.items()):
                out[key] = dict(value)
        return out


@record
class ConditionView:
    """The condition the exports add to the relay's status (`Exported`), and when to look
    again without an event."""

    type: ConditionType
    status: Status
    reason: str
    message: str
    recheck_at: datetime | None = None
    #: The object the condition is mostly about, for its Event (an export).
    related: Mapping[str, Any] | None = None


@record
class Report:
    """The exports' part of the status after execution."""

    lines: tuple[StatusLine, ...] = ()
    condition: ConditionView | None = None
    #: Events about lines that moved, recorded once the status is written.
    transitions: tuple[Advisory, ...] = ()


#: Where a `Snapshot` field declares its `Version` (`dataclasses.field` metadata).
VERSION = "version"


class _NeverQuiet:
    """A field's part of the quiet-pass key meaning: no earlier pass can stand for this one."""

    def __repr__(self) -> str:
        return "NEVER_QUIET"


NEVER_QUIET: Final = _NeverQuiet()


@record
class Version:
    """How one snapshot field takes part in the quiet-pass key: `of` maps its value to its
    part (NEVER_QUIET: the pass must run); `covered_by` names the field that versions it."""

    of: Callable[[Any], Hashable]
    why: str
    covered_by: str = ""


def _objects_version(objects: Mapping[str, Mapping[str, Any] | None]) -> Hashable:
    return tuple([(name, object_version(obj)) for name, obj in objects.items()])


def _typed_version(value: Relay | Pool | None) -> Hashable:
    return (None, None) if value is None else (value.uid, value.resource_version)


def _cluster_id_version(cluster: ClusterID) -> Hashable:
    return (object_version(cluster.obj), cluster.checked, cluster.api_version, cluster.unreadable)


def _never_quiet_if_set(value: object) -> Hashable:
    return NEVER_QUIET if value else ()


def _nothing(value: object) -> Hashable:
    return ()


#: Cached objects by name: each one's name, uid and resourceVersion.
OBJECTS = Version(_objects_version, "each cached object's name, uid and resourceVersion")
#: A decoded object (Relay, Pool): the uid and resourceVersion it was decoded from.
DECODED = Version(_typed_version, "the uid and resourceVersion it was decoded from")
#: A plain value (a message, a flag), compared as it is.
AS_IS = Version(lambda value: value, "the value itself")
#: Set: the pass must run whatever an earlier one did (a read failed, ...).
NEVER_QUIET_IF_SET = Version(_never_quiet_if_set, "a pass with it set always runs")


#: The time matters only through a later look (`recheck_at`), which keeps a pass from
#: being quiet: no part of the key.
UNVERSIONED_TIME = Version(_nothing, "the time: a pass that depends on it asks for a later look")


def covered_by(name: str, why: str) -> Version:
    """A field that another field's version already pins down."""
    return Version(_nothing, why, covered_by=name)


#: The cluster's ID property: its version, and whether and how it was read.
CLUSTER_ID = Version(_cluster_id_version, "the property's version and how it was read")
#: The relay's status as shown: the cached relay's own, at its resourceVersion.
SHOWN = covered_by("relay", "the cached relay's status, at its resourceVersion")


_KeyParts = tuple[tuple[str, Callable[[Any], Hashable]], ...]
_KEY_PARTS: dict[type, _KeyParts] = {}


def _key_parts(cls: type) -> _KeyParts:
    """Each field of a snapshot class with its version's `of`, read once per class. A
    field without a `Version` raises here; one always empty (`_nothing`) is left out."""
    parts = _KEY_PARTS.get(cls)
    if parts is None:
        versions = [(f.name, f.metadata[VERSION].of) for f in fields(cls)]
        parts = _KEY_PARTS[cls] = tuple((n, of) for n, of in versions if of is not _nothing)
    return parts


@record
class Snapshot:
    """Everything one pass decides on, read once from the caches. Every field declares
    its `Version`, so the quiet-pass key cannot miss an input a pass reads."""

    relay: Relay = field(metadata={VERSION: DECODED})
    pool: Pool | None = field(metadata={VERSION: DECODED})
    #: The objects named `<D>-pool-relay`, by kind ("Deployment", "Service").
    relay_objects: Mapping[str, Mapping[str, Any] | None] = field(metadata={VERSION: OBJECTS})
    #: The exports that matter (controlled by the relay or named like a wanted one).
    exports: Mapping[str, Mapping[str, Any]] = field(
        metadata={VERSION: OBJECTS}, default_factory=dict
    )
    cluster_id: ClusterID = field(metadata={VERSION: CLUSTER_ID}, default_factory=ClusterID)
    #: Reads that failed (the ClusterProperty cache unreadable): raised after the pass.
    unreadable: tuple[Exception, ...] = field(metadata={VERSION: NEVER_QUIET_IF_SET}, default=())
    #: Why no export can be written now (the ServiceExport API is not served), "" when
    #: they can: read once, so one pass plans and reports the same thing.
    exports_unavailable: str = field(metadata={VERSION: AS_IS}, default="")
    #: The relay's status as the server shows it (after our own last write), read
    #: (`ShownStatus`); a mapping given here is read when the snapshot is made.
    shown_status: ShownStatus | Mapping[str, Any] | None = field(
        metadata={VERSION: SHOWN}, default=None
    )
    #: The status shown is our own last write, which the relay cache does not show yet.
    own_status_unseen: bool = field(metadata={VERSION: NEVER_QUIET_IF_SET}, default=False)
    #: When the caches were read (None: a rule that needs the time holds nothing back).
    read_at: datetime | None = field(metadata={VERSION: UNVERSIONED_TIME}, default=None)
    #: The Services named like a frontend of the pool, and the DCDs they name as
    #: controller, by name: whose each is.
    services: Mapping[str, Mapping[str, Any]] = field(
        metadata={VERSION: OBJECTS}, default_factory=dict
    )
    component_deployments: Mapping[str, Mapping[str, Any]] = field(
        metadata={VERSION: OBJECTS}, default_factory=dict
    )
    #: The relay objects' kinds whose caches may hide one of the name, show none, and
    #: whose name was not read since: a withdrawal reads each once (`Verb.LOOK`).
    hidden_unread: frozenset[str] = field(metadata={VERSION: AS_IS}, default=frozenset())
    #: The relay as cached (not our own later write): what the status write is decided on.
    decided_on: Mapping[str, Any] = field(
        metadata={VERSION: covered_by("relay", "the cached relay")}, default_factory=dict
    )
    #: The DGD exists but cannot be decoded and no readable version is cached: why.
    pool_unreadable: str = field(metadata={VERSION: AS_IS}, default="")
    #: The cached relay Service has the other shape than the relay wants: it can only be
    #: replaced.
    service_reshaped: bool = field(
        init=False,
        metadata={VERSION: covered_by("relay_objects", "derived from the relay's Service")},
    )
    #: `shown_status` read (`ShownStatus`): a field, not a property, as every part of the
    #: report asks it.
    shown: ShownStatus = field(
        init=False,
        repr=False,
        compare=False,
        metadata={VERSION: covered_by("relay", "the status shown, read")},
    )
    #: The conditions `shown_status` shows, read when a pass first asks (a quiet pass
    #: never does).
    _shown_conditions: Mapping[ConditionType, ShownCondition] | None = field(
        init=False,
        default=None,
        repr=False,
        compare=False,
        metadata={VERSION: covered_by("relay", "derived from the status shown")},
    )

    def __post_init__(self) -> None:
        service = self.relay_objects.get("Service")
        reshaped = service is not None and self.relay.reshaped(service)
        object.__setattr__(self, "service_reshaped", reshaped)
        shown = ShownStatus.of(self.shown_status)
        object.__setattr__(self, "shown_status", shown)
        object.__setattr__(self, "shown", shown)

    @property
    def shown_conditions(self) -> Mapping[ConditionType, ShownCondition]:
        """The conditions the relay shows, typed, read once per snapshot."""
        read = self._shown_conditions
        if read is None:
            read = self.shown.by_type()
            object.__setattr__(self, "_shown_conditions", read)
        return read

    def quiet_key(self) -> tuple[Hashable, ...] | None:
        """The pass's inputs as versions: a pass on the key of one that did nothing would
        do nothing again. Beyond the snapshot a pass reads only configuration, or what
        `inputs_changed` covers. None: the pass must run."""
        out: list[Hashable] = []
        for name, of in _key_parts(type(self)):
            part = of(getattr(self, name))
            if part is NEVER_QUIET:
                return None
            out.append(part)
        return tuple(out)

    @property
    def effective_cluster_id(self) -> str | None:
        """What the relay's pods get as DYN_CLUSTER_ID and its status shows: None while
        the cluster's ID cannot be read and no earlier one is known."""
        return self.cluster_id.effective(self.relay.cluster_id, self.shown.cluster_id)

    @property
    def shown_exports(self) -> dict[str, ShownLine]:
        """`status.exports[]` as shown, by name (entries without a name skipped)."""
        return self.shown.lines()


@record
class ExportInputs:
    """What the exports read from their caches for a pass: the snapshot carries each."""

    exports: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    cluster_id: ClusterID = field(default_factory=ClusterID)
    unreadable: tuple[Exception, ...] = ()
    exports_unavailable: str = ""
    services: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    component_deployments: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@record
class Contribution:
    """The exports' part of a plan: their actions, advisories and status lines (as if
    every action succeeds; `report` adjusts)."""

    actions: tuple[Action, ...] = ()
    advisories: tuple[Advisory, ...] = ()
    lines: tuple[StatusLine, ...] = ()
    #: When the plan changes by itself with no event to say so (a hold ends).
    recheck_at: datetime | None = None
    #: What the lines of these names say beside `Exported` (reason, message).
    notes: Mapping[str, tuple[str, str]] = field(default_factory=dict)
