"""`dynamo-pool-operator status`: what the operator decided for each pool, at a glance.

Why a command when `kubectl get dynamopoolrelays` exists: the printer columns cannot
count exports or show why one of them is Pending or Skipped, which is exactly what a
platform team asks when a pool is not reachable from another cluster. This reads the
relays' status (the operator's own report) and prints it; it never writes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.conditions import (
    READY_PARTS,
    ClusterIDMatchedReason,
    ConditionType,
    ExportedReason,
    ExportState,
    PublishedReason,
    ReadyReason,
    RelayAvailableReason,
    Status,
)
from dynamo_pool_operator.api.dgd import DISCOVERY_BACKEND_ANNOTATION
from dynamo_pool_operator.exitcodes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from dynamo_pool_operator.pool.controller import RELAYS
from dynamo_pool_operator.pool.model import StatusLine
from dynamo_pool_operator.runtime import Client, ConfigError, errors, load_config
from dynamo_pool_operator.runtime.objects import Meta

HEADER = ("NAMESPACE", "NAME", "READY", "REASON", "AVAILABLE", "EXPORTED", "EXPORTS")
#: An `Exported` reason of the MCS implementation's own (not one of ours): where to look.
IMPLEMENTATION_FIX = (
    "the MCS implementation's own reason: see its documentation, and the export's status "
    "(`kubectl get serviceexport NAME -n {namespace} -o yaml`)"
)

#: What to do about a condition that is not True, for the reasons where something more
#: can be said than the message already says: what to change and where, naming the
#: relay's objects ({namespace}, {name}, {relay}: the relay objects' name). A reason
#: with nothing to do (it passes by itself, or `Ready` names another part) has none.
HINTS: dict[tuple[str, str], str] = {
    (ConditionType.PUBLISHED, PublishedReason.INVALID_CONFIGURATION): "fix the field the "
    "message names: `kubectl edit dynamopoolrelay {name} -n {namespace}`",
    (ConditionType.PUBLISHED, PublishedReason.DGD_UNREADABLE): "make the DGD readable "
    "(the message says what cannot be decoded): "
    "`kubectl edit dynamographdeployment {name} -n {namespace}`",
    (ConditionType.PUBLISHED, PublishedReason.DGD_NOT_FOUND): "a relay is named after its "
    "DGD: create the DynamoGraphDeployment {namespace}/{name}, or name the relay after one "
    "of `kubectl get dynamographdeployments -n {namespace}`",
    (ConditionType.PUBLISHED, PublishedReason.RELAY_TERMINATING): "a finalizer that is not "
    "the operator's holds the relay: `kubectl get dynamopoolrelay {name} -n {namespace} "
    "-o jsonpath='{{.metadata.finalizers}}'`",
    (ConditionType.PUBLISHED, PublishedReason.KUBERNETES_DISCOVERY_DISABLED): "`kubectl "
    f"annotate dynamographdeployment {{name}} -n {{namespace}} {DISCOVERY_BACKEND_ANNOTATION}"
    "=kubernetes --overwrite`",
    (ConditionType.PUBLISHED, PublishedReason.NO_WORKERS): "add a component of type "
    "`worker`, `prefill` or `decode` to the DynamoGraphDeployment {namespace}/{name}",
    (ConditionType.PUBLISHED, PublishedReason.GLOBAL_DYNAMO_NAMESPACE): "unset "
    "`globalDynamoNamespace` on the components of the DynamoGraphDeployment "
    "{namespace}/{name}",
    (ConditionType.PUBLISHED, PublishedReason.OWNERSHIP_CONFLICT): "the operator never "
    "adopts: delete the object named {relay} that is not this relay's "
    "(`kubectl get deployment,service {relay} -n {namespace} -o yaml` shows whose it is)",
    (ConditionType.RELAY_AVAILABLE, RelayAvailableReason.WRITE_REFUSED): "the message "
    "quotes the API server's refusal; a 403 is the operator's RBAC: `dynamo-pool-operator "
    "check --as <its ServiceAccount>` lists what it lacks",
    (ConditionType.RELAY_AVAILABLE, RelayAvailableReason.SCALED_TO_ZERO): "set the relay's "
    "`spec.replicas` above 0 (or leave it out for `poolRelay.replicas`)",
    (ConditionType.RELAY_AVAILABLE, RelayAvailableReason.UNAVAILABLE): "`kubectl describe "
    "deployment {relay} -n {namespace}` and its pods' events say why no relay pod is "
    "available",
    (ConditionType.RELAY_AVAILABLE, RelayAvailableReason.PROGRESSING): "`kubectl rollout "
    "status deployment/{relay} -n {namespace}` follows the rollout",
    (ConditionType.CLUSTER_ID_MATCHED, ClusterIDMatchedReason.CLUSTER_ID_MISMATCH): "set "
    "the relay's `spec.clusterId` to the cluster's ID (the message names both), or remove "
    "it to take the cluster's",
    (ConditionType.CLUSTER_ID_MATCHED, ClusterIDMatchedReason.CLUSTER_PROPERTY_UNREADABLE): (
        "the operator cannot read clusterproperties.about.k8s.io: bind its ClusterProperty "
        "reader ClusterRole (`dynamo-pool-operator check --as <its ServiceAccount>` lists "
        "what it lacks)"
    ),
    (ConditionType.EXPORTED, ExportedReason.EXPORT_FAILED): "`kubectl get "
    "events.events.k8s.io -n {namespace} --field-selector reason=ExportFailed` has the API "
    "server's answer",
    (ConditionType.EXPORTED, ExportedReason.NOT_CONTROLLED): "the export marked Foreign "
    "below is someone else's and is never adopted: delete it, and the relay creates its own",
    (ConditionType.EXPORTED, ExportedReason.UNCONFIRMED): "is the MCS implementation "
    "running? One that writes no condition on exports wants `multiCluster.confirmation: "
    "none`, one that writes no `Ready` (Antrea) `valid`",
    (ConditionType.EXPORTED, ExportedReason.EXPORT_API_UNAVAILABLE): "install the MCS "
    'ServiceExport CRD again, or set `multiCluster.mcsImplementation: ""`',
    (ConditionType.READY, ReadyReason.NOT_RECONCILED): "is the operator running, and does "
    "it watch this namespace? `dynamo-pool-operator check`",
}
#: The reasons `Exported` has of its own; any other is the MCS implementation's.
_OWN_EXPORTED = frozenset(str(r) for r in ExportedReason)


def what_to_do(type_: str, reason: str, namespace: str = "", name: str = "") -> str:
    """The hint for a condition that is not True, for relay `namespace/name` ("" when
    nothing is said beyond its message)."""
    if type_ == ConditionType.EXPORTED and reason not in _OWN_EXPORTED:
        hint = IMPLEMENTATION_FIX
    else:
        hint = HINTS.get((type_, reason), "")
    return hint.format(namespace=namespace, name=name, relay=names.relay_name(name))


@dataclass(frozen=True, slots=True)
class RelayRow:
    """One relay as the table shows it."""

    namespace: str
    name: str
    ready: str
    reason: str
    message: str
    exports: tuple[StatusLine, ...]
    #: The status describes an older spec: the operator has not caught up (or is down).
    stale: bool = False
    #: Available/desired relay pods ("" before the operator reported them).
    pods: str = ""
    #: The `Exported` condition's status ("" without an MCS implementation).
    exported: str = ""
    #: (type, status, reason, message) of each part of Ready that is not True.
    failing: tuple[tuple[str, str, str, str], ...] = ()

    @property
    def exports_summary(self) -> str:
        if not self.exports:
            return "-"
        done = sum(1 for e in self.exports if e.state == ExportState.EXPORTED)
        return f"{done}/{len(self.exports)} exported"


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def row_of(relay: Mapping[str, Any]) -> RelayRow:
    """A relay object (as listed) to its row; tolerant of a status not written yet."""
    meta = Meta(relay)
    status = relay.get("status") or {}
    ready = meta.condition(ConditionType.READY)
    exports = tuple(
        StatusLine(
            _text(e.get("name")),
            _text(e.get("state")),
            _text(e.get("reason")),
            _text(e.get("message")),
        )
        for e in status.get("exports") or ()
        if isinstance(e, Mapping)
    )
    observed, generation = status.get("observedGeneration"), meta.generation
    failing = tuple(
        (t, _text(c.get("status")), _text(c.get("reason")), _text(c.get("message")))
        for t in READY_PARTS
        if (c := meta.condition(t)) is not None and c.get("status") != Status.TRUE
    )
    exported = meta.condition(ConditionType.EXPORTED)
    return RelayRow(
        namespace=meta.namespace,
        name=meta.name,
        ready=_text(ready.get("status")) if ready else Status.UNKNOWN,
        reason=_text(ready.get("reason")) if ready else ReadyReason.NOT_RECONCILED,
        message=_text(ready.get("message")) if ready else "the operator has not reported yet",
        exports=exports,
        stale=ready is not None and observed is not None and observed != generation,
        pods=_text(status.get("relayPods")),
        exported=_text(exported.get("status")) if exported else "",
        failing=failing,
    )


def format_table(rows: Iterable[RelayRow]) -> str:
    """The table, then one block per relay that has something to explain: why it is not
    ready, and the state of each of its exports."""
    rows = sorted(rows, key=lambda r: (r.namespace, r.name))
    if not rows:
        return "No DynamoPoolRelays found.\n"
    cells = [HEADER] + [
        (
            r.namespace,
            r.name,
            r.ready + (" (stale)" if r.stale else ""),
            r.reason or "-",
            r.pods or "-",
            r.exported or "-",
            r.exports_summary,
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    for r in rows:
        details: list[str] = []
        if r.ready != Status.TRUE and r.message and not r.failing:
            details.append(f"  {r.reason}: {r.message}")
            details += _hint(ConditionType.READY, r.reason, r)
        for i, (type_, value, reason, message) in enumerate(r.failing):
            details.append(f"  {type_} {value} {reason}: {message}")
            if i == 0:  # the part Ready names: the one to fix first
                details += _hint(type_, reason, r)
        width = max((len(e.name) for e in r.exports), default=0)
        for e in r.exports:
            why = ": ".join(p for p in (e.reason, e.message) if p)
            details.append(f"  export {e.name.ljust(width)}  {e.state}{'  ' + why if why else ''}")
        if details:
            lines += ["", f"{r.namespace}/{r.name}:", *details]
    return "\n".join(lines) + "\n"


def _hint(type_: str, reason: str, r: RelayRow) -> list[str]:
    """The one "what to do" line of a relay, when there is something to say."""
    fix = what_to_do(type_, reason, r.namespace, r.name)
    return [f"    what to do: {fix}"] if fix else []


async def list_relays(client: Client, namespace: str | None) -> list[RelayRow]:
    """Every relay of `namespace` (None: all namespaces), as rows."""
    listed = await client.list(RELAYS, namespace)
    return [row_of(item) for item in listed.items]


def _explain(e: errors.ApiError, namespace: str | None) -> str:
    where = f"namespace {namespace!r}" if namespace else "any namespace"
    if isinstance(e, errors.NotFound):
        return (
            f"the {RELAYS.plural}.{RELAYS.group} API is not served: install the CRD "
            "(`dynamo-pool-operator manifests crds | kubectl apply -f -`, or the Helm chart)"
        )
    if isinstance(e, errors.Forbidden):
        return f"not allowed to list DynamoPoolRelays in {where}: {e}"
    if isinstance(e, errors.Unauthorized):
        return f"the cluster did not accept the credentials: {e}"
    return f"cannot list DynamoPoolRelays in {where}: {e}"


async def run(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    namespace: str | None = None,
    all_namespaces: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Print the table; exit 1 (with one line saying why) when the cluster cannot be read,
    2 when no cluster is configured (exitcodes.py).

    The namespace is as kubectl picks it: `--namespace`, else the context's, else
    `default`; `all_namespaces` lists every namespace."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        cluster = load_config(kubeconfig, context)
    except ConfigError as e:
        print(f"error: {e}", file=err)
        return EXIT_USAGE
    ns = None if all_namespaces else (namespace or cluster.namespace or "default")
    async with Client(cluster, user_agent="dynamo-pool-operator-status") as client:
        try:
            rows = await list_relays(client, ns)
        except errors.ConnectionFailed as e:
            print(e, file=err)  # as kubectl says it
            return EXIT_FAILURE
        except errors.ApiError as e:
            print(f"error: {_explain(e, ns)}", file=err)
            return EXIT_FAILURE
    if not rows and ns is not None:
        out.write(f"No DynamoPoolRelays found in namespace {ns}.\n")
    else:
        out.write(format_table(rows))
    return EXIT_OK
