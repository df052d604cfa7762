"""Which ServiceExports a pool should have, and what to do about each. Pure.

Input: the relay and its decision, the pool (DGD), the exports cached in the
relay's namespace, the MCS implementation and the cluster's ID property.
Output: the export feature's part of the plan — one `Action` per export name, the
advisories (Warning Events) to record, and the status lines as they are if every
action succeeds (what the actions came to is `verdict.lines_after`).

Rules, by export name (the rungs of the verb ladder every owned object climbs,
`pool/ladder.py`; drift by `EXPORT_DRIFT`):
- wanted (published, valid, not too long for Karmada):
  absent -> CREATE; being deleted -> WAIT until gone; controlled by this relay ->
  APPLY the DGD label / controller reference if someone changed them, else NONE;
  anyone else's (a user's, another relay's, another kind's, or no controller) ->
  FOREIGN: never adopted, repaired or deleted.
- a frontend name whose Service is someone else's (`foreign_service`): not wanted,
  skipped with a Warning naming the Service's controller, so an export of ours of
  that name is withdrawn. Exporting a Service announces it to every cluster: only the
  DGD's own Services (Dynamo's operator controls them for the DGD) are the pool's to
  announce, whoever may create the DGD and its relay.
- a frontend name whose Service does not exist: not wanted either (Pending
  `ServiceNotFound`, naming it), and an export of ours of that name is withdrawn. An
  export made ahead of its Service would claim the name: whoever creates a Service of
  it later (another team) would have it sit beside our export, and an implementation
  may announce it, until a pass sees whose it is. So the export follows the Service.
- not wanted but controlled by this relay (withdrawn relay, renamed or removed
  frontend, a name Karmada cannot import): WITHDRAW, unless already being deleted.
- the relay Service's export while that Service is replaced by one of the other shape
  (`spec.service.headless`; `relay_export_hold`): withdrawn with the old Service, and
  created again `REEXPORT_AFTER` after the new one exists (Pending `ServiceReplaced`
  meanwhile). An implementation imports a Service as its type (a ClusterSetIP or the
  pod IPs); one that keeps the import's first type while it is imported (Lighthouse)
  calls an export of the other type a conflict until the old import is gone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.conditions import ExportLineReason, ExportState
from dynamo_pool_operator.api.dgd import DCD_KIND, KIND, Pool
from dynamo_pool_operator.api.dgd import GROUP as DGD_GROUP
from dynamo_pool_operator.api.event_reasons import ADVISORY_ACTIONS, EventReason, ExportWarning
from dynamo_pool_operator.api.mcs import (
    CLUSTER_ID_PROPERTY,
    ClusterID,
    Confirmation,
    Implementation,
)
from dynamo_pool_operator.api.relay import Relay
from dynamo_pool_operator.api.shown import ShownLine
from dynamo_pool_operator.pool.ladder import Owned, Part, Rule, Rung, drift, ladder
from dynamo_pool_operator.pool.model import (
    Action,
    Advisory,
    Contribution,
    Decision,
    EventNames,
    Snapshot,
    StatusLine,
    Verb,
)
from dynamo_pool_operator.runtime.objects import (
    SERVICES,
    Meta,
    Resource,
    controller_is,
    controller_of,
    describe_controller,
    is_controlled_by,
    is_map,
    labels_of,
    record,
)

EXPORT_EVENTS = EventNames(
    failed=EventReason.EXPORT_FAILED,
    created=EventReason.EXPORT_CREATED,
    applied=EventReason.EXPORT_REPAIRED,
    withdrawn=EventReason.EXPORT_DELETED,
)

#: The Warning reasons of the export feature (declared with every Event reason).
Warn = ExportWarning


#: How long an export with no condition at all is waited for before it is warned about
#: as unconfirmed (`multiCluster.unconfirmedAfter`; `confirmation: ready` or `valid`).
UNCONFIRMED_AFTER = timedelta(seconds=60)


@record
class ExportRules:
    """The settings the exports are planned and reported with (`PoolExports.rules`)."""

    implementation: Implementation
    #: The ServiceExport resource written; None while the API is not served.
    resource: Resource | None
    #: The About API's "group/version" the cluster's ID property is read at; "" for none.
    about_version: str = ""
    unconfirmed_after: timedelta = UNCONFIRMED_AFTER
    confirmation: Confirmation = Confirmation.VALID
    #: `spec.exportedAnnotations` and `spec.exportedLabels` of every export we own
    #: (`multiCluster.exportedAnnotations`, `exportedLabels`), as pairs.
    exported_annotations: tuple[tuple[str, str], ...] = ()
    exported_labels: tuple[tuple[str, str], ...] = ()

    @property
    def spec(self) -> dict[str, Any]:
        """The `spec` we own on an export: what the implementation carries to its
        imports (empty: none, the export as mcs-api v0.1.0 knew it)."""
        out: dict[str, Any] = {}
        if self.exported_annotations:
            out["exportedAnnotations"] = dict(self.exported_annotations)
        if self.exported_labels:
            out["exportedLabels"] = dict(self.exported_labels)
        return out


#: How long after the new relay Service exists its export is created again: time for
#: the MCS implementation to drop the import of the old shape, which it began when the
#: old export went (seconds in practice: a few watch events and writes to its broker).
REEXPORT_AFTER = timedelta(seconds=5)
REPLACED_MESSAGE = (
    "the relay Service is replaced by one of the other shape (spec.service.headless): "
    "its export was withdrawn with it and is created again "
    f"{REEXPORT_AFTER.total_seconds():.0f}s after the new Service exists, once the MCS "
    "implementation has dropped the import of the old shape"
)


def service_not_found(name: str) -> str:
    """The export line of a frontend whose Service does not exist."""
    return (
        f"Service {name} does not exist: a frontend is exported once its Service exists "
        "and is the DGD's (Dynamo's operator makes it)"
    )


#: The export line of a frontend the Global Router does not find (`undiscoverable`).
UNDISCOVERABLE = (
    "exported, but the Global Router finds a pool's frontends by the name <dgd>-frontend "
    "only: name the frontend component Frontend"
)


@record
class Hold:
    """The relay Service's export is held back while that Service is replaced."""

    #: The Service of the old shape is still there: withdraw the export now.
    withdraw: bool
    #: The hold ends then with no event to say so (None: an event ends it).
    recheck_at: datetime | None = None


def relay_export_hold(
    relay: Relay,
    service: Mapping[str, Any] | None,
    shown: Mapping[str, ShownLine],
    now: datetime | None,
    *,
    reshaped: bool,
) -> Hold | None:
    """Whether the relay Service's export is held back (None: it is not).

    `service` is the cached relay Service, `shown` the status lines the server shows
    by name. A Service of the other shape is being replaced: hold, and withdraw the
    export. After that only the status line remembers the replacement (the old Service
    and export are gone): hold while the new Service is absent or being deleted, and
    until `REEXPORT_AFTER` after its creation. A status that lost that line, a Service
    without a creation time or a pass without the time: nothing held (the export is
    created as on a first publish)."""
    if reshaped:
        return Hold(withdraw=True)
    line = shown.get(relay.object_name)
    if line is None or line.reason != ExportLineReason.SERVICE_REPLACED:
        return None
    if service is None or Meta(service).terminating:
        return Hold(withdraw=False)
    created = Meta(service).created
    if created is None or now is None:
        return None
    ends = created + REEXPORT_AFTER
    return Hold(withdraw=False, recheck_at=ends) if now < ends else None


def _owned_fields(relay: Relay) -> dict[str, Any]:
    """The fields of an export's metadata we own: the DGD label, our controller reference."""
    return {"labels": {names.DGD_NAME: relay.name}, "ownerReferences": [relay.owner_reference()]}


def export_body(
    resource: Resource, relay: Relay, name: str, spec: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The fields we own on an export: name, the DGD label, our controller reference, and
    the annotations and labels the configuration has it carry (`ExportRules.spec`)."""
    body: dict[str, Any] = {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": name, "namespace": relay.namespace, **_owned_fields(relay)},
    }
    if spec:
        body["spec"] = dict(spec)
    return body


def _spec_map(key: str) -> Callable[[Mapping[str, Any]], Any]:
    def of(obj: Mapping[str, Any]) -> Any:
        spec = obj.get("spec")
        if spec is None or (type(spec) is not dict and not is_map(spec)):
            return {}  # none (a cached export keeps no empty spec), or not a map
        return spec.get(key) or {}

    return of


#: An export is compared by the fields we own on it, each named in the Event note of its
#: repair. Its controller is compared as the controller reference, not as any reference
#: of the relay's uid: that one is what makes the export ours. Annotations and labels for
#: the imports are ours as configured: one another writer added beside them is no drift.
EXPORT_DRIFT = Rule(
    parts=(
        Part("label", labels_of),
        Part("controllerReference", controller_of),
        Part("exportedAnnotations", _spec_map("exportedAnnotations")),
        Part("exportedLabels", _spec_map("exportedLabels")),
    )
)


def foreign_service(
    pool: Pool,
    service: Mapping[str, Any] | None,
    component_deployments: Mapping[str, Mapping[str, Any]],
) -> str | None:
    """Whose a frontend's Service is: None while there is none or it is the DGD's, else
    its controller as messages name it (`controller Kind/name`, `no controller`). (No
    Service is not exported either: `_wanted` says so on its own line.)

    The DGD's: its controller is the DGD (by uid: a DGD of that name deleted and made
    again is another), or a DynamoComponentDeployment whose own controller is the DGD
    (`component_deployments`: the cached DCDs by name; the one named must be the one
    cached, by uid). A Service of that name anyone else made is not the pool's to
    export."""
    if service is None:
        return None
    ref = controller_of(service)
    if controller_is(ref, DGD_GROUP, KIND) and ref is not None and ref.get("uid") == pool.uid:
        return None
    if controller_is(ref, DGD_GROUP, DCD_KIND) and ref is not None:
        dcd = component_deployments.get(str(ref.get("name", "")))
        if (
            dcd is not None
            and bool(ref.get("uid"))
            and Meta(dcd).uid == ref.get("uid")
            and controller_is(controller_of(dcd), DGD_GROUP, KIND)
            and is_controlled_by(dcd, pool.uid)
        ):
            return None
    return describe_controller(service)


@dataclass
class _Wanted:
    names: list[str] = field(default_factory=list)
    #: The lines of the names not exported: skipped, or waiting for their Service.
    lines: list[StatusLine] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    too_long: list[str] = field(default_factory=list)
    #: Frontend Services someone else controls, with that controller.
    foreign: list[tuple[Mapping[str, Any], str]] = field(default_factory=list)
    #: The names exported that the Global Router does not look for (`undiscoverable`).
    hidden: list[str] = field(default_factory=list)


def _wanted(
    relay: Relay,
    pool: Pool,
    implementation: Implementation,
    services: Mapping[str, Mapping[str, Any]],
    component_deployments: Mapping[str, Mapping[str, Any]],
) -> _Wanted:
    out = _Wanted()
    relay_service = relay.object_name
    candidates = [relay_service, *pool.frontend_services]
    for name in dict.fromkeys(candidates):  # ordered, without duplicates
        # The relay Service is the relay's own: the check chain judges it (Published).
        service = services.get(name) if name != relay_service else None
        whose = foreign_service(pool, service, component_deployments)
        if service is not None and whose is not None:
            out.foreign.append((service, whose))
            out.lines.append(
                StatusLine(
                    name,
                    ExportState.SKIPPED,
                    ExportLineReason.FOREIGN_SERVICE,
                    f"Service {name} ({whose}) is not the DGD's: not exported. Dynamo's "
                    "operator makes a DGD's Services controlled by the DGD or by a "
                    "DynamoComponentDeployment of it",
                )
            )
            continue
        problems = names.dns1035_label_errors(name)
        if problems:
            out.invalid.append(name)
            out.lines.append(
                StatusLine(
                    name,
                    ExportState.SKIPPED,
                    ExportLineReason.INVALID_SERVICE_NAME,
                    "; ".join(problems),
                )
            )
        elif implementation is Implementation.KARMADA and not names.fits_karmada(name):
            out.too_long.append(name)
            out.lines.append(
                StatusLine(
                    name,
                    ExportState.SKIPPED,
                    ExportLineReason.SERVICE_NAME_TOO_LONG,
                    f"{len(name)} characters; Karmada imports at most "
                    f"{names.KARMADA_MAX_SERVICE_NAME}",
                )
            )
        elif service is None and name != relay_service:
            out.lines.append(
                StatusLine(
                    name,
                    ExportState.PENDING,
                    ExportLineReason.SERVICE_NOT_FOUND,
                    service_not_found(name),
                )
            )
        else:
            out.names.append(name)
    out.hidden = undiscoverable(relay, pool, out.names)
    return out


def repair_fields(
    export: Mapping[str, Any], relay: Relay, spec: Mapping[str, Any] | None = None
) -> tuple[str, ...]:
    """Which of the fields we own differ on an export this relay controls."""
    body = {"metadata": _owned_fields(relay), "spec": dict(spec or {})}
    return drift(EXPORT_DRIFT, export, body).fields


def undiscoverable(relay: Relay, pool: Pool, exported: list[str]) -> list[str]:
    """The frontends exported under a name the Global Router does not look for: it finds
    a pool's frontends by `<dgd>-frontend` (`names.FRONTEND_SUFFIX`)."""
    found = (relay.object_name, names.frontend_service_name(pool.name))
    return [n for n in exported if n not in found]


def _advisories(
    relay: Relay,
    pool: Pool,
    wanted: _Wanted,
    implementation: Implementation,
    cluster_id: ClusterID,
) -> list[Advisory]:
    out: list[Advisory] = []

    def warn(reason: Warn, message: str, related: Mapping[str, Any]) -> None:
        out.append(Advisory(reason, ADVISORY_ACTIONS.get(reason, "Export"), message, related))

    # The DGD as the Warnings about it name it: made only for a Warning (a settled
    # pool's pass warns of nothing).
    if wanted.invalid:
        warn(
            Warn.INVALID_SERVICE_NAME,
            f"not exported, not a valid Service name: {', '.join(wanted.invalid)}",
            pool.reference(),
        )
    if wanted.too_long:
        warn(
            Warn.SERVICE_NAME_TOO_LONG,
            f"not exported, longer than Karmada's {names.KARMADA_MAX_SERVICE_NAME} "
            f"characters: {', '.join(wanted.too_long)}",
            pool.reference(),
        )
    for service, whose in wanted.foreign:
        name = Meta(service).name
        warn(
            Warn.FOREIGN_SERVICE,
            f"not exported: Service {name} ({whose}) is controlled neither by DGD "
            f"{pool.name!r} nor by a DynamoComponentDeployment of it; rename the frontend "
            "(its Service is <dgd>-<component>), or have that Service's owner rename it",
            SERVICES.reference(dict(service)),
        )
    if not pool.frontends:
        warn(
            Warn.NO_FRONTEND,
            f"DGD {pool.name!r} has no frontend component; only the relay Service is exported",
            pool.reference(),
        )
    # The export lines say which frontends the router passes by; the Warning is for a
    # pool whose frontends it finds none of (one other beside `Frontend` hides nothing).
    hidden = wanted.hidden
    if hidden and names.frontend_service_name(pool.name) not in wanted.names:
        warn(
            Warn.FRONTEND_NOT_DISCOVERABLE,
            f"{', '.join(hidden)} {'is' if len(hidden) == 1 else 'are'} exported, but the "
            f"Global Router finds a pool's frontends by the name "
            f"{names.frontend_service_name(pool.name)!r} only: name the frontend component "
            "Frontend",
            pool.reference(),
        )
    # The cluster ID is an About API notion: the check is standard MCS only. A relay
    # without spec.clusterId takes the cluster's own ID: nothing to disagree with.
    checked = implementation.checks_cluster_id and cluster_id.checked
    if checked and cluster_id.value and relay.cluster_id and cluster_id.value != relay.cluster_id:
        warn(
            Warn.CLUSTER_ID_MISMATCH,
            f"spec.clusterId is {relay.cluster_id!r} but this cluster's ID "
            f"({CLUSTER_ID_PROPERTY}) is {cluster_id.value!r}; the Global Discovery "
            "Service matches a pool to its imports only when they are equal",
            cluster_id.reference(),
        )
    return out


def plan(
    relay: Relay,
    decision: Decision,
    pool: Pool | None,
    exports: Mapping[str, Mapping[str, Any]],
    *,
    implementation: Implementation,
    cluster_id: ClusterID,
    resource: Resource,
    hold: Hold | None = None,
    services: Mapping[str, Mapping[str, Any]] | None = None,
    component_deployments: Mapping[str, Mapping[str, Any]] | None = None,
    spec: Mapping[str, Any] | None = None,
) -> Contribution:
    """`exports`: the cached exports of the relay's namespace that matter, by name —
    every export this relay controls and every export named like a wanted one.
    `hold`: the relay Service's export is held back (`relay_export_hold`).
    `services`: the cached Services named like a frontend, by name (a frontend without
    one is not exported);
    `component_deployments`: the cached DCDs those Services name as controller, by
    name (`foreign_service`); `spec`: what every export carries for its imports
    (`ExportRules.spec`)."""
    wanted = _Wanted()
    advisories: list[Advisory] = []
    if decision.keeps_pool and pool is not None:
        wanted = _wanted(relay, pool, implementation, services or {}, component_deployments or {})
        advisories = _advisories(relay, pool, wanted, implementation, cluster_id)

    relay_service = relay.object_name

    # Every export name with what it should be, then each through the one ladder.
    owned: list[tuple[str, Owned]] = []
    for name in wanted.names:
        # While the relay Service is replaced its export is not created, and ours is
        # withdrawn if the hold says so (waited for while being deleted); anyone else's
        # is left alone, and ours once the Service is right is kept.
        held_back = hold is not None and name == relay_service
        body = export_body(resource, relay, name, spec)
        owned.append(
            (
                name,
                Owned(
                    exports.get(name),
                    body,
                    relay.uid,
                    EXPORT_DRIFT,
                    replace=held_back and hold is not None and hold.withdraw,
                    create=not held_back,
                ),
            )
        )
    keep = set(wanted.names)
    owned += [
        (name, Owned(export, None, relay.uid, EXPORT_DRIFT, wanted=False))
        for name, export in sorted(exports.items())
        if name not in keep
    ]
    steps = [ladder(o) for _, o in owned]

    actions: list[Action] = []
    held: list[StatusLine] = []
    for (name, o), step in zip(owned, steps, strict=True):
        if step.rung in (Rung.DEFERRED, Rung.REPLACED):
            held.append(
                StatusLine(
                    name, ExportState.PENDING, ExportLineReason.SERVICE_REPLACED, REPLACED_MESSAGE
                )
            )
        if step.verb is None:
            continue
        writes = step.verb in (Verb.CREATE, Verb.APPLY)
        # The relay Service's export points at the relay's own Service (a frontend's at
        # a Service of Dynamo's): the plan orders and guards the two writes together.
        points_at = (SERVICES.kind, name) if name == relay_service else None
        replaced = step.rung is Rung.REPLACED
        actions.append(
            Action(
                step.verb,
                resource,
                relay.namespace,
                name,
                EXPORT_EVENTS,
                live=o.live,
                body=o.body if writes else None,
                points_at=points_at,
                wanted=o.wanted and not replaced,
                fields=() if replaced or not o.wanted else step.drift.fields,
            )
        )
    notes = dict.fromkeys(
        wanted.hidden, (ExportLineReason.FRONTEND_NOT_DISCOVERABLE, UNDISCOVERABLE)
    )
    return Contribution(
        tuple(actions),
        tuple(advisories),
        tuple(wanted.lines + held),
        hold.recheck_at if hold is not None else None,
        notes,
    )


def plan_exports(snapshot: Snapshot, decision: Decision, rules: ExportRules) -> Contribution:
    """The exports' part of the pass's plan; none while the API is not served."""
    if snapshot.exports_unavailable or rules.resource is None:
        return Contribution()
    relay = snapshot.relay
    hold = relay_export_hold(
        relay,
        snapshot.relay_objects.get("Service"),
        snapshot.shown_exports,
        snapshot.read_at,
        reshaped=snapshot.service_reshaped,
    )
    out = plan(
        relay,
        decision,
        snapshot.pool,
        snapshot.exports,
        implementation=rules.implementation,
        cluster_id=snapshot.cluster_id,
        resource=rules.resource,
        hold=hold,
        services=snapshot.services,
        component_deployments=snapshot.component_deployments,
        spec=rules.spec,
    )
    if decision.keeps_pool and snapshot.unreadable:
        related = ClusterID(api_version=rules.about_version).reference()
        unreadable = tuple(
            Advisory(Warn.EXPORT_FAILED, "ReadClusterID", str(e), related)
            for e in snapshot.unreadable
        )
        out = dataclasses.replace(out, advisories=unreadable + out.advisories)
    return out
