"""The checks of `dynamo-pool-operator check` about the cluster: the API server, the APIs
the operator uses, its RBAC and its leader here (the pool checks are in pools.py; the
command runs both, in the order of `command.CHECKS`).

Each is one function: read what it needs, return one `Result` with a line and, when
it is not ok, what to do. Names of APIs, rules and objects come from the code that
defines them (api/, rbac.py, names.py), so a check cannot disagree with the operator.
"""

from __future__ import annotations

from datetime import UTC, datetime

from dynamo_pool_operator import __version__, rbac
from dynamo_pool_operator.api import crd
from dynamo_pool_operator.api import dgd as dgd_api
from dynamo_pool_operator.api.mcs import (
    CILIUM_SYNC_SLICES,
    IMPORTER_GROUPS,
    MCS_GROUP,
    SERVICEEXPORT_VERSIONS,
    SERVICEEXPORTS,
    Importer,
)
from dynamo_pool_operator.check.framework import Context, Result, Status, human
from dynamo_pool_operator.runtime import discover, errors
from dynamo_pool_operator.runtime.objects import CRDS, LEASES, Resource, seconds_since
from dynamo_pool_operator.served_apis import pick, served_export_spec

INSTALL_CRD = "dynamo-pool-operator manifests crds --apply (or install the Helm chart)"
#: ServiceExport APIs of other groups, which this operator never writes.
OTHER_EXPORT_APIS = {
    "net.gke.io": "GKE's own multi-cluster Services API",
    "multicluster.k8s.aws": "the API of older AWS Cloud Map MCS controller releases",
}


# ---------------------------------------------------------------- the checks
async def api_server(ctx: Context) -> Result:
    name = "api-server"
    server = ctx.client.config.server
    try:
        version = await ctx.client.request("GET", "/version")
        ctx.discovery = await discover(ctx.client)
    except errors.ApiError as e:
        fix = "check the kubeconfig (server, context, credentials); `kubectl cluster-info`"
        return Result(name, Status.FAIL, f"{server} cannot be used: {e}", fix)
    who = ""
    try:
        review = await ctx.client.create(
            Resource("authentication.k8s.io", "v1", "selfsubjectreviews", "", False),
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
        who = f", authenticated as {review['status']['userInfo'].get('username')}"
    except (errors.ApiError, KeyError, TypeError):
        pass  # older servers lack the API; reaching discovery proved the credentials
    line = f"{server} answers (Kubernetes {version.get('gitVersion', '?')}){who}"
    if ctx.discovery.unavailable:
        gvs = ", ".join(sorted(ctx.discovery.unavailable))
        return Result(
            name,
            Status.WARN,
            f"{line}; discovery skipped unavailable group versions: {gvs}",
            "`kubectl get apiservices` shows which aggregated API servers are down",
        )
    return Result(name, Status.OK, line)


async def relay_crd(ctx: Context) -> Result:
    name, api = "relay-crd", f"{crd.PLURAL}.{crd.GROUP}"
    served = ctx.served(crd.GROUP, crd.PLURAL)
    if not served:
        return Result(name, Status.FAIL, f"{api} is not served", INSTALL_CRD)
    if crd.VERSION not in served:
        line = f"{api} is served at {', '.join(served)}, not {crd.VERSION} (this binary's)"
        return Result(name, Status.FAIL, line, INSTALL_CRD)
    try:
        stored = await ctx.client.get(CRDS, api)
    except errors.Forbidden:
        line = f"{api} is served at {crd.VERSION}; not allowed to read the CRD to compare it"
        return Result(name, Status.WARN, line, "run `check` as someone who may get CRDs")
    want = {v["name"]: v for v in crd.crd()["spec"]["versions"]}
    have = {v.get("name"): v for v in (stored.get("spec") or {}).get("versions") or ()}
    differs = [
        part
        for part, key in (("schema", "schema"), ("printer columns", "additionalPrinterColumns"))
        if have.get(crd.VERSION, {}).get(key) != want[crd.VERSION].get(key)
    ]
    if set(have) != set(want):
        differs.append(f"versions {sorted(have)}")
    if differs:
        line = (
            f"{api} differs from the one this binary ({__version__}) serves: {', '.join(differs)}"
        )
        return Result(name, Status.FAIL, line, "upgrade it: " + INSTALL_CRD)
    return Result(name, Status.OK, f"{api} is served at {crd.VERSION}, as this binary's")


async def dgd_crd(ctx: Context) -> Result:
    name, api = "dgd-crd", f"{dgd_api.PLURAL}.{dgd_api.GROUP}"
    served = ctx.served(dgd_api.GROUP, dgd_api.PLURAL)
    chosen = pick(served, dgd_api.SUPPORTED_VERSIONS)
    if chosen is None:
        line = f"{api} is not served (at {' or '.join(dgd_api.SUPPORTED_VERSIONS)})"
        fix = "install NVIDIA Dynamo's operator (its CRDs) first"
        return Result(name, Status.FAIL, line, fix)
    also = sorted(set(served) - {chosen})
    extra = f" (also {', '.join(also)})" if also else ""
    return Result(
        name, Status.OK, f"{api} is served at {chosen}{extra}; the operator reads {chosen}"
    )


async def serviceexport_api(ctx: Context) -> Result:
    name = "serviceexport-api"
    api = f"{SERVICEEXPORTS}.{MCS_GROUP}"
    chosen = pick(ctx.served(MCS_GROUP, SERVICEEXPORTS), SERVICEEXPORT_VERSIONS)
    found = ctx.discovery.resources if ctx.discovery else []
    others = sorted(
        {f"{r.group}/{r.version}" for r in found if r.plural == SERVICEEXPORTS}
        - {f"{MCS_GROUP}/{v}" for v in SERVICEEXPORT_VERSIONS}
    )
    notes = tuple(
        f"{gv} is served too: {OTHER_EXPORT_APIS.get(gv.split('/')[0], 'another API')}; "
        "this operator does not write it"
        for gv in others
    )
    impl = ctx.implementation
    if chosen is not None:
        use = f"exports are written there ({impl})" if impl else "exports are off"
        return Result(name, Status.OK, f"{api} is served at {chosen}; {use}", details=notes)
    if not impl:
        line = f'{api} is not served; not needed: multiCluster.mcsImplementation is ""'
        return Result(name, Status.WARN if others else Status.OK, line, details=notes)
    fix = (
        "install the SIG Multicluster ServiceExport CRD (your MCS implementation or Karmada "
        'ships it), or set multiCluster.mcsImplementation to ""'
    )
    line = f"{api} is not served, and multiCluster.mcsImplementation is {impl!r}"
    return Result(name, Status.FAIL, line, fix, notes)


async def export_spec(ctx: Context) -> Result:
    """What the exports carry for their imports: the served CRD declares the fields the
    configuration writes, and a Cilium cluster has the annotation its ClusterMesh needs
    to give a router a ClusterIP frontend's EndpointSlices."""
    name = "export-spec"
    version = pick(ctx.served(MCS_GROUP, SERVICEEXPORTS), SERVICEEXPORT_VERSIONS)
    if not ctx.implementation or version is None:
        return Result(name, Status.OK, "no exports are written: nothing to carry")
    mc = ctx.config.multi_cluster
    wanted = {"exportedAnnotations": mc.exported_annotations, "exportedLabels": mc.exported_labels}
    fields = [field for field, value in wanted.items() if value]
    declared = await served_export_spec(ctx.client, version) if fields else frozenset()
    missing = [f for f in fields if declared is not None and f not in declared]
    if missing:
        settings = " and ".join(f"multiCluster.{f}" for f in missing)
        line = f"{settings} set, but the ServiceExport CRD ({version}) has no spec.{missing[0]}"
        fix = f"install the mcs-api v0.5.1 or later CRDs, or leave {settings} empty"
        return Result(name, Status.FAIL, line, fix)
    found = ctx.discovery.resources if ctx.discovery else []
    cilium = any(r.group == IMPORTER_GROUPS[Importer.CILIUM] for r in found)
    if cilium and dict(mc.exported_annotations).get(CILIUM_SYNC_SLICES) != "true":
        line = (
            "Cilium runs here, and its ClusterMesh syncs a ClusterIP Service's EndpointSlices "
            f'only for an import annotated {CILIUM_SYNC_SLICES}: "true": no router finds '
            "a pool's frontends"
        )
        fix = (
            f'set multiCluster.exportedAnnotations {{"{CILIUM_SYNC_SLICES}": "true"}} '
            "(chart value multiCluster.exportedAnnotations)"
        )
        return Result(name, Status.WARN, line, fix)
    carried = ", ".join(f"spec.{f}" for f in fields) or "nothing beyond the export"
    return Result(name, Status.OK, f"exports carry {carried} for their imports")


async def rbac_check(ctx: Context) -> Result:
    """The operator's permissions, asked as it (rbac.py: the same review `run` makes at
    its start); what it lacks grouped by resource, and how to grant it, by name."""
    name = "rbac"
    if not ctx.as_user and not ctx.in_cluster:
        return Result(
            name,
            Status.WARN,
            "not checked: pass --as system:serviceaccount:NAMESPACE:NAME (the operator's "
            "ServiceAccount), or run `check` in the operator's pod",
            "rerun with --as",
        )
    wanted = rbac.needs(ctx.config, lease_namespace(ctx))
    try:
        missing = await rbac.lacking(ctx.reviewer, wanted)
    except errors.Forbidden as e:
        line = f"cannot ask as {ctx.as_user}: {e}"
        fix = "the caller needs `impersonate` on that ServiceAccount (cluster admins have it)"
        return Result(name, Status.FAIL, line, fix)
    who = ctx.as_user or await rbac.username(ctx.reviewer) or "this pod's ServiceAccount"
    if missing:
        line = f"{who} lacks {len(missing)} of {len(wanted)} permissions the operator needs"
        return Result(name, Status.FAIL, line, grant_fix(who, ctx), tuple(rbac.grouped(missing)))
    return Result(name, Status.OK, f"{who} has all {len(wanted)} permissions the operator needs")


def grant_fix(who: str, ctx: Context) -> str:
    """How to grant `who` the operator's RBAC: the chart's, or `manifests rbac` bound to
    that very ServiceAccount (in the configuration's mode)."""
    prefix = "system:serviceaccount:"
    if not who.startswith(prefix) or who.count(":") != 3:
        return (
            f"bind the operator's roles to {who} (the chart binds them to its ServiceAccount; "
            "`dynamo-pool-operator manifests rbac` renders them)"
        )
    ns, sa = who.removeprefix(prefix).split(":")
    restricted = f" --restricted {ctx.scope}" if ctx.scope else ""
    return (
        f"grant them to {who}: install the chart's RBAC, or `dynamo-pool-operator manifests "
        f"rbac --namespace {ns} --service-account {sa}{restricted} | kubectl apply -f -`"
    )


def lease_namespace(ctx: Context) -> str:
    le = ctx.config.leader_election
    return le.namespace or ctx.config.namespace.restricted or ctx.operator_namespace


async def leader(ctx: Context) -> Result:
    name = "leader"
    le = ctx.config.leader_election
    if not le.enabled:
        return Result(name, Status.SKIP, "leader election is off (leaderElection.enabled)")
    ns = lease_namespace(ctx)
    try:
        lease = await ctx.client.get(LEASES, le.name, ns)
    except errors.NotFound:
        line = f"no Lease {ns}/{le.name}: no replica has ever led"
        fix = (
            "is the operator running? (`kubectl get pods`); --operator-namespace if it "
            "runs elsewhere"
        )
        return Result(name, Status.FAIL, line, fix)
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    now = datetime.now(UTC)
    renewed = seconds_since(spec.get("renewTime"), now)
    duration = float(spec.get("leaseDurationSeconds") or le.lease_duration)
    if not holder:
        return Result(
            name,
            Status.FAIL,
            f"Lease {ns}/{le.name} is released: no leader",
            "check the operator's pods",
        )
    if renewed is None or renewed > duration:
        ago = "never renewed" if renewed is None else f"last renewed {human(renewed)} ago"
        line = f"{holder} holds {ns}/{le.name} but {ago} (lease {duration:.0f}s): no leader"
        return Result(name, Status.FAIL, line, f"check the pod {holder} and its logs")
    held = seconds_since(spec.get("acquireTime"), now)
    tenure = f", leading for {human(held)}" if held is not None else ""
    return Result(
        name, Status.OK, f"{holder} holds {ns}/{le.name}, renewed {human(renewed)} ago{tenure}"
    )
