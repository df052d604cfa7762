"""The checks of `dynamo-pool-operator check` about pools: the relays, their DGDs and
their exports (the cluster ID, Karmada's name limit, stuck and foreign exports, Ready,
the pod fields the admission policy guards), and the reads they share, made once per
round.

Ownership and conditions are read as the operator reads them (runtime/objects/meta.py,
runtime/objects/meta.py), so the check and the operator cannot disagree about whose an
export is or whether a relay is Ready.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from dynamo_pool_operator import admission
from dynamo_pool_operator.api import crd, names
from dynamo_pool_operator.api import dgd as dgd_api
from dynamo_pool_operator.api.conditions import ConditionType, ReadyReason, Status
from dynamo_pool_operator.api.mcs import (
    ABOUT_GROUP,
    ABOUT_VERSIONS,
    CLUSTER_ID_PROPERTY,
    CLUSTERPROPERTIES,
    MCS_GROUP,
    SERVICEEXPORT_VERSIONS,
    SERVICEEXPORTS,
    Confirmation,
    ExportCondition,
    Implementation,
)
from dynamo_pool_operator.check.framework import Context, Result, human
from dynamo_pool_operator.check.framework import Status as CheckStatus
from dynamo_pool_operator.pool.exports.verdict import Judgement, verdict
from dynamo_pool_operator.runtime import errors
from dynamo_pool_operator.runtime.objects import (
    Meta,
    Resource,
    controller_of,
    is_controlled_by,
    seconds_since,
)
from dynamo_pool_operator.served_apis import pick


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = Meta(obj)
    return meta.namespace, meta.name


def _ref(obj: Mapping[str, Any]) -> str:
    return "/".join(_key(obj))


# ---------------------------------------------------------------- shared reads
async def relays(ctx: Context) -> list[dict[str, Any]]:
    async def read() -> list[dict[str, Any]]:
        return (await ctx.client.list(crd.RELAYS, ctx.scope)).items

    return await ctx.once("relays", read)  # type: ignore[no-any-return]


async def pools(ctx: Context) -> dict[tuple[str, str], dgd_api.Pool]:
    """The DGDs of the relays, as the operator reads them (at the version it would)."""

    async def read() -> dict[tuple[str, str], dgd_api.Pool]:
        version = pick(ctx.served(dgd_api.GROUP, dgd_api.PLURAL), dgd_api.SUPPORTED_VERSIONS)
        if version is None:
            return {}
        res = Resource(dgd_api.GROUP, version, dgd_api.PLURAL, dgd_api.KIND)
        found = (await ctx.client.list(res, ctx.scope)).items
        return {(p.namespace, p.name): p for p in map(dgd_api.pool_from_object, found)}

    return await ctx.once("pools", read)  # type: ignore[no-any-return]


def export_resource(ctx: Context) -> Resource | None:
    """The ServiceExport API at the version the operator would use; None if not served."""
    version = pick(ctx.served(MCS_GROUP, SERVICEEXPORTS), SERVICEEXPORT_VERSIONS)
    return Resource(MCS_GROUP, version, SERVICEEXPORTS, "ServiceExport") if version else None


async def exports(ctx: Context) -> list[dict[str, Any]] | None:
    """The ServiceExports in scope, or None when the API is not served."""
    res = export_resource(ctx)
    if res is None:
        return None

    async def read() -> list[dict[str, Any]]:
        return (await ctx.client.list(res, ctx.scope)).items

    return await ctx.once("exports", read)  # type: ignore[no-any-return]


def wanted_exports(relay: Mapping[str, Any], pool: dgd_api.Pool | None) -> list[str]:
    """The Service names a published relay exports: its relay Service and frontends."""
    name = Meta(relay).name
    frontends = pool.frontend_services if pool else ()
    return [names.relay_name(name), *frontends]


async def cluster_id(ctx: Context) -> Result:
    name = "cluster-id"
    if ctx.implementation != "mcs":
        return Result(name, CheckStatus.SKIP, "the cluster ID check is for mcsImplementation mcs")
    version = pick(ctx.served(ABOUT_GROUP, CLUSTERPROPERTIES), ABOUT_VERSIONS)
    if version is None:
        line = f"{CLUSTERPROPERTIES}.{ABOUT_GROUP} is not served: relays' clusterId is not checked"
        fix = (
            "install the About API CRD (sigs.k8s.io/about-api): a running operator takes it "
            "up within multiCluster.apiDiscoveryInterval, no restart"
        )
        return Result(name, CheckStatus.WARN, line, fix)
    res = Resource(ABOUT_GROUP, version, CLUSTERPROPERTIES, "ClusterProperty", False)
    try:
        prop = await ctx.client.get(res, CLUSTER_ID_PROPERTY)
    except errors.NotFound:
        line = f"no ClusterProperty {CLUSTER_ID_PROPERTY}: relays' clusterId is not checked"
        fix = "your MCS implementation's ClusterSet setup creates it (the cluster's ID)"
        return Result(name, CheckStatus.WARN, line, fix)
    value = str((prop.get("spec") or {}).get("value") or "")
    if not value:
        return Result(
            name, CheckStatus.WARN, f"{CLUSTER_ID_PROPERTY} has no value", "set spec.value"
        )
    wrong = [
        f"{_ref(r)}: clusterId {r['spec']['clusterId']!r}"
        for r in await relays(ctx)
        if (r.get("spec") or {}).get("clusterId") not in (None, "", value)
    ]
    if wrong:
        line = f"{CLUSTER_ID_PROPERTY} is {value!r}; {len(wrong)} relay(s) disagree"
        return Result(
            name, CheckStatus.FAIL, line, f"set their spec.clusterId to {value!r}", tuple(wrong)
        )
    return Result(name, CheckStatus.OK, f"{CLUSTER_ID_PROPERTY} is {value!r}; every relay agrees")


async def karmada_names(ctx: Context) -> Result:
    name = "karmada-names"
    if ctx.implementation != "karmada":
        return Result(
            name, CheckStatus.SKIP, "Karmada's name limit applies to mcsImplementation karmada"
        )
    by_pool = await pools(ctx)
    long = [
        f"{_ref(r)}: {svc} ({len(svc)} characters)"
        for r in await relays(ctx)
        for svc in wanted_exports(r, by_pool.get(_key(r)))
        if not names.fits_karmada(svc)
    ]
    limit = names.KARMADA_MAX_SERVICE_NAME
    if long:
        line = f"{len(long)} exported name(s) over {limit} characters are not exported"
        fix = "shorten the DGD or component names (Karmada labels slices derived-<name>, 63 max)"
        return Result(name, CheckStatus.FAIL, line, fix, tuple(long))
    return Result(name, CheckStatus.OK, f"every exported name fits Karmada's {limit} characters")


def karmada_propagated(export: Mapping[str, Any]) -> str | None:
    """The member a ServiceExport was propagated to by Karmada (its Work's execution
    namespace `karmada-es-<member>`), or None when Karmada did not apply it here."""
    meta = Meta(export)
    space = str(meta.annotations.get(names.KARMADA_WORK_NAMESPACE, ""))
    if meta.labels.get(names.KARMADA_MANAGED) != "true":
        return None
    if not space.startswith(names.KARMADA_EXECUTION_SPACE_PREFIX):
        return None
    return space[len(names.KARMADA_EXECUTION_SPACE_PREFIX) :] or None


async def karmada_collection(ctx: Context) -> Result:
    """Karmada collects a member's ServiceExports (and their EndpointSlices) only while it
    has itself propagated a ServiceExport to that member: its ServiceExport controller
    starts a member's informers on an applied Work holding one. In a member without one,
    no export the operator makes is ever collected, and nothing on the export says so."""
    name = "karmada-collection"
    if ctx.implementation != "karmada":
        return Result(name, CheckStatus.SKIP, "Karmada's collection applies to karmada")
    found, res = await exports(ctx), export_resource(ctx)
    if found is None or res is None:
        return Result(name, CheckStatus.SKIP, "no ServiceExport API")
    members = {m: _ref(e) for e in found if (m := karmada_propagated(e)) is not None}
    where = f"in {ctx.scope}" if ctx.scope else "in any namespace"
    if not members and ctx.scope:
        # Karmada's informer watches the whole member: one propagated anywhere will do.
        try:
            wider = await ctx.client.list(res, label_selector=f"{names.KARMADA_MANAGED}=true")
        except errors.Forbidden:
            wider = None
        if wider is not None:
            where = "in any namespace"
            members = {m: _ref(e) for e in wider.items if (m := karmada_propagated(e))}
    if members:
        member, export = sorted(members.items())[0]
        line = (
            f"Karmada propagated ServiceExport {export} here (member {member!r}): it "
            "collects this member's exports"
        )
        return Result(name, CheckStatus.OK, line)
    line = (
        f"no ServiceExport {where} was propagated here by Karmada: Karmada collects a "
        "member's exports only while it has propagated one there, so no pool exported "
        "here reaches the router"
    )
    fix = (
        "on the Karmada control plane, create a ServiceExport (one relay Service's, say) "
        "and a PropagationPolicy placing it on this member (docs/exports.md, Karmada)"
    )
    return Result(name, CheckStatus.FAIL, line, fix)


async def exports_terminating(ctx: Context) -> Result:
    name = "exports-terminating"
    found = await exports(ctx)
    if found is None:
        return Result(name, CheckStatus.SKIP, "no ServiceExport API")
    now = datetime.now(UTC)
    stuck = []
    for e in found:
        meta = e.get("metadata") or {}
        deleting = seconds_since(meta.get("deletionTimestamp"), now)
        if (
            deleting is not None
            and names.DGD_NAME in Meta(e).labels
            and deleting > ctx.terminating_grace
        ):
            finalizers = ", ".join(meta.get("finalizers") or ()) or "none"
            stuck.append(f"{_ref(e)}: deleting for {human(deleting)}, finalizers {finalizers}")
    if stuck:
        line = f"{len(stuck)} pool export(s) stuck deleting; their pools cannot be exported again"
        fix = (
            "the finalizer's owner (your MCS implementation) is not finishing: check it; "
            "remove the finalizer only if it is uninstalled"
        )
        return Result(name, CheckStatus.FAIL, line, fix, tuple(stuck))
    return Result(name, CheckStatus.OK, "no pool export is stuck deleting")


def unconfirmed(
    found: Sequence[Mapping[str, Any]],
    level: Confirmation,
    unconfirmed_after: timedelta,
    now: datetime,
) -> Result:
    """Whether the pool exports that have waited `unconfirmed_after` satisfy the
    confirmation `level`, judged as the operator judges them (`verdict`): an export the
    implementation accepted (`Valid=True`) but never made `Ready` under `ready` is one
    the level cannot be met for (Antrea writes no `Ready`), one with nothing written
    under `ready` or `valid` one whose implementation writes nothing or is not running."""
    name = "confirmation"
    if level is Confirmation.NONE:
        return Result(name, CheckStatus.OK, "confirmation none: an export that exists counts")
    valid_only, silent = [], []
    for e in found:
        meta = Meta(e)
        if meta.terminating or names.DGD_NAME not in meta.labels:
            continue
        v = verdict(e, now=now, unconfirmed_after=unconfirmed_after, confirmation=level)
        if v.judgement is not Judgement.UNCONFIRMED:
            continue
        valid = meta.condition(ExportCondition.VALID)
        if valid is not None and valid.get("status") == Status.TRUE:
            valid_only.append(
                f"{_ref(e)}: Valid=True ({valid.get('reason') or 'no reason'}), no Ready"
            )
        else:
            silent.append(f"{_ref(e)}: no condition written")
    after = human(unconfirmed_after.total_seconds())
    if valid_only:
        line = (
            f"{len(valid_only)} pool export(s) older than unconfirmedAfter ({after}) have "
            f"Valid but no Ready: confirmation {level} cannot be met for them"
        )
        fix = (
            "set multiCluster.confirmation: valid (the implementation writes Valid and never "
            "Ready, as Antrea's does)"
        )
        return Result(name, CheckStatus.FAIL, line, fix, tuple(valid_only + silent))
    if silent:
        line = (
            f"{len(silent)} pool export(s) older than unconfirmedAfter ({after}) have no "
            f"condition: confirmation {level} is not met for them"
        )
        fix = (
            "is the MCS implementation running? One that writes no condition (Karmada, AWS "
            "Cloud Map, Clusternet) wants multiCluster.confirmation: none"
        )
        return Result(name, CheckStatus.FAIL, line, fix, tuple(silent))
    return Result(name, CheckStatus.OK, f"every pool export meets confirmation {level}")


async def confirmation(ctx: Context) -> Result:
    name = "confirmation"
    if not ctx.implementation:
        return Result(name, CheckStatus.SKIP, "exports are off")
    found = await exports(ctx)
    if found is None:
        return Result(name, CheckStatus.SKIP, "no ServiceExport API")
    mc = ctx.config.multi_cluster
    level = Implementation(ctx.implementation).confirmation(mc.confirmation)
    return unconfirmed(found, level, timedelta(seconds=mc.unconfirmed_after), datetime.now(UTC))


async def foreign_exports(ctx: Context) -> Result:
    name = "foreign-exports"
    if not ctx.implementation:
        return Result(name, CheckStatus.SKIP, "exports are off")
    found = await exports(ctx)
    if found is None:
        return Result(name, CheckStatus.SKIP, "no ServiceExport API")
    by_name = {_ref(e): e for e in found}
    by_pool = await pools(ctx)
    foreign = []
    for r in await relays(ctx):
        ns, relay_name = _key(r)
        uid = Meta(r).uid
        for svc in wanted_exports(r, by_pool.get((ns, relay_name))):
            export = by_name.get(f"{ns}/{svc}")
            if export is None or is_controlled_by(export, uid):
                continue
            controller = controller_of(export)
            whose = (
                f"controlled by {controller.get('uid')}"
                if controller is not None
                else "without a controller (a user's)"
            )
            foreign.append(f"{ns}/{svc}: wanted by relay {relay_name}, {whose}")
    if foreign:
        line = f"{len(foreign)} export(s) of pools are someone else's and left alone"
        fix = (
            "delete each (`kubectl delete serviceexport -n NS NAME`) to let its relay "
            "export its own"
        )
        return Result(name, CheckStatus.WARN, line, fix, tuple(foreign))
    return Result(name, CheckStatus.OK, "no export a pool wants is someone else's")


async def relays_ready(ctx: Context) -> Result:
    name = "relays-ready"
    found = await relays(ctx)
    if not found:
        return Result(name, CheckStatus.OK, "no DynamoPoolRelays yet")
    bad, stale = [], []
    for r in found:
        ready = Meta(r).condition(ConditionType.READY)
        if ready is None:
            bad.append(
                f"{_ref(r)}: {ReadyReason.NOT_RECONCILED}: the operator has not reported yet"
            )
        elif ready.get("status") != Status.TRUE:
            bad.append(f"{_ref(r)}: {ready.get('reason')}: {ready.get('message')}")
        observed = (r.get("status") or {}).get("observedGeneration")
        if ready is not None and observed != Meta(r).generation:
            stale.append(f"{_ref(r)}: status is of generation {observed}, not the current one")
    if bad:
        line = f"{len(bad)} of {len(found)} relay(s) not Ready"
        fix = "the reason says why: docs/troubleshooting.md; `dynamo-pool-operator status -A`"
        return Result(name, CheckStatus.FAIL, line, fix, tuple(bad + stale))
    if stale:
        line = f"all {len(found)} relay(s) Ready, {len(stale)} not reconciled since they changed"
        return Result(
            name, CheckStatus.WARN, line, "is the operator running and leading?", tuple(stale)
        )
    return Result(name, CheckStatus.OK, f"all {len(found)} relay(s) Ready")


def _field_managers(relay: Mapping[str, Any], field: str) -> list[str]:
    """Who set `spec.<field>` of `relay`, as the API server recorded it: each field
    manager of `metadata.managedFields` whose field set holds it, with how and when
    (`kubectl-edit (Update 2026-12-01T10:00:00Z)`). The status' entries are not the spec's."""
    meta = relay.get("metadata")
    entries = meta.get("managedFields") if isinstance(meta, Mapping) else None
    out = []
    for e in entries if isinstance(entries, list) else ():
        if not isinstance(e, Mapping) or e.get("subresource"):
            continue
        fields = e.get("fieldsV1")
        spec = fields.get("f:spec") if isinstance(fields, Mapping) else None
        if isinstance(spec, Mapping) and f"f:{field}" in spec:
            how = " ".join(str(e[k]) for k in ("operation", "time") if e.get(k))
            manager = str(e.get("manager") or "a manager without a name")
            out.append(f"{manager} ({how})" if how else manager)
    return out


def guarded_pod_fields(found: Sequence[Mapping[str, Any]]) -> Result:
    """The relays that set a pod field the admission policy guards (`admission.GUARDED`:
    image, ServiceAccount, labels, annotations, nodes, tolerations, resources), each
    field with the field managers that set it. The policy judges writes as they are
    made; a relay written before it was installed (an upgrade from a release without
    it, or with `admissionPolicy.enabled=false`) was never judged, and its fields run
    in the relay pods. Nothing here tells an admin's field from anyone else's: a list
    to review, not a failure."""
    name = "relay-pod-fields"
    listed = []
    for r in found:
        fields = admission.set_fields(r.get("spec"))
        if not fields:
            continue
        said = [
            f"spec.{f} by {', '.join(_field_managers(r, f)) or 'no manager recorded'}"
            for f in fields
        ]
        listed.append(f"{_ref(r)}: {'; '.join(said)}")
    if listed:
        line = (
            f"{len(listed)} relay(s) set pod fields the admission policy guards: review who "
            "set each"
        )
        fix = (
            "a field set before the policy was installed was never judged: keep it if its "
            "setter may create Deployments in the relay's namespace, else remove it "
            "(kubectl patch dpr -n NS NAME --type=json "
            '-p \'[{"op":"remove","path":"/spec/FIELD"}]\')'
        )
        return Result(name, CheckStatus.WARN, line, fix, tuple(listed))
    return Result(name, CheckStatus.OK, "no relay sets a pod field the admission policy guards")


async def relay_pod_fields(ctx: Context) -> Result:
    return guarded_pod_fields(await relays(ctx))
