"""Which ServiceExports a pool should have, and what to do about each. Pure (SPEC §4).

Input: the relay and its decision, the pool (DGD), the exports cached in the
relay's namespace, the MCS implementation and the cluster's ID property.
Output: one `Action` per export name, the warnings to record, and the lines of
`status.exports[]`.

Rules, by export name:
- wanted (published, valid, not too long for Karmada):
  absent -> CREATE; being deleted -> WAIT until gone; controlled by this relay ->
  REPAIR the DGD label / controller reference if someone changed them, else
  nothing; anyone else's (a user's, another relay's, another kind's, or no
  controller) -> FOREIGN: never adopted, repaired or deleted.
- not wanted but controlled by this relay (withdrawn relay, renamed or removed
  frontend, a name Karmada cannot import): WITHDRAW, unless already being deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..api import labels, names
from ..api.dgd import Pool
from ..api.relay import Relay
from ..poolrelay.decide import Decision, controlled_by, controller_of
from ..poolrelay.status import ExportStatus

MCS = "mcs"
KARMADA = "karmada"
CLUSTER_ID_PROPERTY = "cluster.clusterset.k8s.io"


class Verb(StrEnum):
    CREATE = "Create"
    REPAIR = "Repair"
    WITHDRAW = "Withdraw"
    WAIT = "Wait"  # being deleted: left alone until gone, then created again
    FOREIGN = "Foreign"  # not ours: never touched
    NONE = "None"  # ours and right


class Warn(StrEnum):
    INVALID_SERVICE_NAME = "InvalidServiceName"
    SERVICE_NAME_TOO_LONG = "ServiceNameTooLong"
    NO_FRONTEND = "NoFrontend"
    CLUSTER_ID_MISMATCH = "ClusterIDMismatch"


@dataclass(frozen=True, slots=True)
class Action:
    verb: Verb
    name: str
    #: The cached export the action was decided on (None for CREATE).
    export: Mapping[str, Any] | None = None
    #: For REPAIR: which fields differ ("label", "controllerReference").
    fields: tuple[str, ...] = ()
    #: False for the exports this relay controls but no longer wants.
    wanted: bool = True


@dataclass(frozen=True, slots=True)
class Warning:
    reason: Warn
    message: str
    #: The object the problem is about (DGD or ClusterProperty), at the version read.
    related: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Plan:
    actions: tuple[Action, ...] = ()
    warnings: tuple[Warning, ...] = ()
    skipped: tuple[ExportStatus, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterID:
    """The cluster ID check's input: the property when the check runs (mcs and the
    About API served), with `checked=False` otherwise."""

    checked: bool = False
    obj: Mapping[str, Any] | None = None
    api_version: str = ""

    @property
    def value(self) -> str:
        spec = (self.obj or {}).get("spec")
        value = spec.get("value") if isinstance(spec, Mapping) else None
        return value if isinstance(value, str) else ""

    def effective(self, spec_cluster_id: str) -> str:
        """The relay's effective cluster ID: its spec.clusterId, else the cluster's own
        (the About API property, where the check runs), else empty."""
        return spec_cluster_id or (self.value if self.checked else "")

    def reference(self) -> dict[str, Any]:
        meta = (self.obj or {}).get("metadata") or {}
        ref = {
            "apiVersion": self.api_version,
            "kind": "ClusterProperty",
            "name": CLUSTER_ID_PROPERTY,
        }
        for key in ("uid", "resourceVersion"):
            if meta.get(key):
                ref[key] = meta[key]
        return ref


@dataclass
class _Wanted:
    names: list[str] = field(default_factory=list)
    skipped: list[ExportStatus] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    too_long: list[str] = field(default_factory=list)


def _wanted(relay: Relay, pool: Pool, implementation: str) -> _Wanted:
    out = _Wanted()
    candidates = [names.relay_name(relay.name), *pool.frontend_service_names()]
    for name in dict.fromkeys(candidates):  # ordered, without duplicates
        problems = names.dns1035_label_errors(name)
        if problems:
            out.invalid.append(name)
            out.skipped.append(
                ExportStatus(name, "Skipped", Warn.INVALID_SERVICE_NAME, "; ".join(problems))
            )
        elif implementation == KARMADA and not names.fits_karmada(name):
            out.too_long.append(name)
            out.skipped.append(
                ExportStatus(
                    name,
                    "Skipped",
                    Warn.SERVICE_NAME_TOO_LONG,
                    f"{len(name)} characters; Karmada imports at most "
                    f"{names.KARMADA_MAX_SERVICE_NAME}",
                )
            )
        else:
            out.names.append(name)
    return out


def repair_fields(export: Mapping[str, Any], relay: Relay) -> tuple[str, ...]:
    """Which of the fields we own differ on an export this relay controls."""
    meta = export.get("metadata") or {}
    out = []
    if (meta.get("labels") or {}).get(labels.DGD_NAME) != relay.name:
        out.append("label")
    ref = controller_of(export)
    if ref is None or any(ref.get(k) != v for k, v in relay.owner_reference().items()):
        out.append("controllerReference")
    return tuple(out)


def _terminating(export: Mapping[str, Any]) -> bool:
    return bool((export.get("metadata") or {}).get("deletionTimestamp"))


def plan(
    relay: Relay,
    decision: Decision,
    pool: Pool | None,
    exports: Mapping[str, Mapping[str, Any]],
    *,
    implementation: str,
    cluster_id: ClusterID,
) -> Plan:
    """`exports`: the cached exports of the relay's namespace that matter, by name —
    every export this relay controls and every export named like a wanted one."""
    wanted = _Wanted()
    warnings: list[Warning] = []
    if decision.publish and pool is not None:
        wanted = _wanted(relay, pool, implementation)
        dgd = pool.reference()
        if wanted.invalid:
            warnings.append(
                Warning(
                    Warn.INVALID_SERVICE_NAME,
                    f"not exported, not a valid Service name: {', '.join(wanted.invalid)}",
                    dgd,
                )
            )
        if wanted.too_long:
            warnings.append(
                Warning(
                    Warn.SERVICE_NAME_TOO_LONG,
                    f"not exported, longer than Karmada's {names.KARMADA_MAX_SERVICE_NAME} "
                    f"characters: {', '.join(wanted.too_long)}",
                    dgd,
                )
            )
        if not pool.frontends:
            warnings.append(
                Warning(
                    Warn.NO_FRONTEND,
                    f"DGD {pool.name!r} has no frontend component; only the relay Service "
                    "is exported",
                    dgd,
                )
            )
        # The cluster ID is an About API notion: the check is standard MCS only. A relay
        # without spec.clusterId takes the cluster's own ID: nothing to disagree with.
        checked = implementation == MCS and cluster_id.checked
        if (
            checked
            and cluster_id.value
            and relay.cluster_id
            and cluster_id.value != relay.cluster_id
        ):
            warnings.append(
                Warning(
                    Warn.CLUSTER_ID_MISMATCH,
                    f"spec.clusterId is {relay.cluster_id!r} but this cluster's ID "
                    f"({CLUSTER_ID_PROPERTY}) is {cluster_id.value!r}; the Global Discovery "
                    "Service matches a pool to its imports only when they are equal",
                    cluster_id.reference(),
                )
            )

    actions: list[Action] = []
    for name in wanted.names:
        export = exports.get(name)
        if export is None:
            actions.append(Action(Verb.CREATE, name))
        elif _terminating(export):
            actions.append(Action(Verb.WAIT, name, export))
        elif controlled_by(export, relay.uid):
            fields = repair_fields(export, relay)
            actions.append(Action(Verb.REPAIR if fields else Verb.NONE, name, export, fields))
        else:
            actions.append(Action(Verb.FOREIGN, name, export))
    keep = set(wanted.names)
    for name, export in sorted(exports.items()):
        if name in keep or not controlled_by(export, relay.uid):
            continue
        verb = Verb.WAIT if _terminating(export) else Verb.WITHDRAW
        actions.append(Action(verb, name, export, wanted=False))
    return Plan(tuple(actions), tuple(warnings), tuple(wanted.skipped))


def relevant_exports(
    relay: Relay,
    pool: Pool | None,
    lookup: Callable[[str], Mapping[str, Any] | None],
    controlled: Iterable[Mapping[str, Any]],
) -> dict[str, Mapping[str, Any]]:
    """The `exports` argument of `plan`: the exports this relay controls (an index
    lookup, filtered to its namespace) and those named like a wanted one (`lookup`
    reads the relay's namespace by name). Nothing else can matter."""
    out = {
        str(e["metadata"]["name"]): e
        for e in controlled
        if e.get("metadata", {}).get("namespace") == relay.namespace
    }
    candidates = [names.relay_name(relay.name)]
    if pool is not None:
        candidates += pool.frontend_service_names()
    for name in candidates:
        found = lookup(name)
        if found is not None:
            out[name] = found
    return out
