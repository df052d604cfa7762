"""API discovery at startup: which versions of the APIs we use does this cluster serve?

Resolved once, from discovery, before any informer starts; every later list,
watch and write uses the resolved version. A missing API that the
configuration requires fails startup with a message naming the API and the
setting that requires it; an optional one (the About API) turns its feature
off with one log line saying why.

A group version discovery could not read (an aggregated API whose server is down)
matters only if it could hold an API we use, at a version we would prefer to the one
chosen: then startup fails, naming it and its APIService, since the choice could be
wrong. Any other is skipped with one warning, as client-go's partial discovery does.

While the operator runs, discovery is read again (`rediscover_served_apis`, every
`multiCluster.apiDiscoveryInterval`): the ServiceExport, About and DGD APIs follow the
cluster, so installing, deleting or re-versioning their CRDs needs no restart; ours
keeps the version resolved at start (docs/decisions/0004).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl

from dynamo_pool_operator.api import crd
from dynamo_pool_operator.api import dgd as dgd_api
from dynamo_pool_operator.api.mcs import (
    ABOUT_GROUP,
    ABOUT_VERSIONS,
    CLUSTERPROPERTIES,
    MCS_GROUP,
    SERVICEEXPORT_VERSIONS,
    SERVICEEXPORTS,
    Implementation,
)
from dynamo_pool_operator.api.mcs import SERVICEEXPORT_KIND as KIND
from dynamo_pool_operator.config import MultiClusterConfig
from dynamo_pool_operator.runtime import Client, ServedResource, discover, errors

_NOTHING: Mapping[str, str] = {}

log = logging.getLogger(__name__)


class StartupError(Exception):
    """The cluster lacks an API the configuration needs; the message says what to do."""


@dataclass(frozen=True, slots=True)
class ServedApis:
    """The API versions the cluster serves, as resolved for this configuration; None
    means "not served" (the feature is off)."""

    dgd_version: str
    #: `multiClusterExport`: the ServiceExport version, or None with no implementation set.
    serviceexport_version: str | None
    #: The About API version for the cluster ID check (mcs only), or None.
    about_version: str | None
    #: The ServiceExport version the cluster serves, whatever the configuration (for the
    #: feature-off cleanup pass), or None.
    serviceexport_served: str | None = None
    #: Every supported version served, preferred first: a cache of a version still in
    #: this list can stay in effect while the cache of the preferred one is made.
    dgd_versions: tuple[str, ...] = ()
    serviceexport_versions: tuple[str, ...] = ()
    #: The About API's (only when the cluster ID check applies).
    about_versions: tuple[str, ...] = ()
    #: Only in the value in effect: the DGDs read are the last content listed at
    #: `dgd_version`, which is no longer served (readiness fails meanwhile).
    dgd_stale: bool = False
    #: The DynamoComponentDeployment version (Dynamo installs it with the DGD), followed
    #: like the others; None when not served: no Service is then controlled by one of
    #: the pool. Only read with an MCS implementation set (whose frontends they own).
    dcd_version: str | None = None
    dcd_versions: tuple[str, ...] = ()

    def describe(self) -> str:
        return (
            f"dynamographdeployments.nvidia.com={self.dgd_version} "
            f"multiClusterExport={self.serviceexport_version or 'off'} "
            f"clusterIDCheck={self.about_version or 'off'}"
        )


def pick(served: Sequence[str], preferred: Sequence[str]) -> str | None:
    """The first of `preferred` that is served."""
    return next((v for v in preferred if v in served), None)


@dataclass(frozen=True, slots=True)
class _Found:
    """One API as a discovery snapshot shows it."""

    #: The supported versions served, preferred first, and the first of them.
    versions: tuple[str, ...]
    chosen: str | None
    #: The unavailable group versions that might change the choice: those preferred to
    #: `chosen` (all of them when nothing was chosen).
    doubt: list[str]


def _find(
    resources: Sequence[ServedResource],
    unavailable: Mapping[str, str],
    group: str,
    plural: str,
    preferred: Sequence[str],
) -> _Found:
    served = {r.version for r in resources if r.group == group and r.plural == plural}
    versions = tuple(v for v in preferred if v in served)
    chosen = versions[0] if versions else None
    cut = preferred.index(chosen) if chosen in preferred else len(preferred)
    doubt = [f"{group}/{v}" for v in preferred[:cut] if f"{group}/{v}" in unavailable]
    return _Found(versions, chosen, doubt)


def _unavailable(api: str, gvs: list[str], unavailable: Mapping[str, str], need: str) -> str:
    """One line: what is unavailable, why, who needs it, which APIService to look at."""
    why = "; ".join(f"{gv} is unavailable ({unavailable[gv]})" for gv in gvs)
    services = ", ".join(".".join(reversed(gv.split("/"))) for gv in gvs)
    return (
        f"the {api} API cannot be discovered: {why}; {need}: fix the APIService "
        f"(`kubectl get apiservice {services}`) and restart"
    )


def resolve_served_apis(
    resources: Sequence[ServedResource],
    mcs_implementation: str,
    unavailable: Mapping[str, str] = _NOTHING,
) -> ServedApis:
    """Pure: decide the served APIs from a discovery snapshot (the resources it read and the
    group versions it could not) and the configured implementation."""
    if (gv := f"{crd.GROUP}/{crd.VERSION}") in unavailable:
        raise StartupError(_unavailable(_RELAY_API, [gv], unavailable, _NEEDED))
    if not any(r.group == crd.GROUP and r.plural == crd.PLURAL for r in resources):
        raise StartupError(
            f"the {_RELAY_API} API is not served: install the DynamoPoolRelay CRD "
            "(`dynamo-pool-operator manifests crds | kubectl apply -f -`, or the Helm chart)"
        )
    dgd = _find(resources, unavailable, dgd_api.GROUP, dgd_api.PLURAL, dgd_api.SUPPORTED_VERSIONS)
    if dgd.doubt:
        raise StartupError(_unavailable(_DGD_API, dgd.doubt, unavailable, _NEEDED))
    if dgd.chosen is None:
        raise StartupError(
            f"the {_DGD_API} API (v1beta1 or v1alpha1) is not served: "
            "install NVIDIA Dynamo's operator (its CRDs) before this operator"
        )
    exports = _find(resources, unavailable, MCS_GROUP, SERVICEEXPORTS, SERVICEEXPORT_VERSIONS)
    about_version = None
    about_versions: tuple[str, ...] = ()
    if mcs_implementation:
        if exports.doubt:
            need = f"multiCluster.mcsImplementation is {mcs_implementation!r} and needs it"
            raise StartupError(_unavailable(_EXPORTS_API, exports.doubt, unavailable, need))
        if exports.chosen is None:
            raise StartupError(
                f"multiCluster.mcsImplementation is {mcs_implementation!r}, but the cluster "
                f"serves no {_EXPORTS_API} API (v1alpha1 or v1beta1): install "
                "the Multi-Cluster Services API CRDs (your MCS implementation or Karmada ships "
                'them), or set multiCluster.mcsImplementation to "" to export nothing'
            )
        if Implementation(mcs_implementation).checks_cluster_id:
            about = _find(resources, unavailable, ABOUT_GROUP, CLUSTERPROPERTIES, ABOUT_VERSIONS)
            # Optional: in doubt, the check is off (discover_served_apis says why).
            if not about.doubt:
                about_version, about_versions = about.chosen, about.versions
    dcd = _find(resources, unavailable, dgd_api.GROUP, dgd_api.DCD_PLURAL, dgd_api.DCD_VERSIONS)
    return ServedApis(
        dgd.chosen,
        exports.chosen if mcs_implementation else None,
        about_version,
        exports.chosen,
        dgd_versions=dgd.versions,
        serviceexport_versions=exports.versions,
        about_versions=about_versions,
        dcd_version=dcd.chosen,
        dcd_versions=dcd.versions,
    )


def follow_served_apis(
    current: ServedApis,
    resources: Sequence[ServedResource],
    mcs_implementation: str,
    unavailable: Mapping[str, str] = _NOTHING,
) -> ServedApis:
    """Pure: the served APIs after a later discovery, from those in effect (`current`).
    Each API but ours follows the cluster to its preferred served version; an export API
    gone is None (the relays say so: failing would stop every pool's updates). A DGD API
    no longer served keeps `dgd_version` with no `dgd_versions` (readiness fails). A part
    whose discovery failed in doubt keeps its value: unreadable is not "gone"."""
    exports = _find(resources, unavailable, MCS_GROUP, SERVICEEXPORTS, SERVICEEXPORT_VERSIONS)
    served, export_versions = exports.chosen, exports.versions
    if exports.doubt:
        served, export_versions = current.serviceexport_served, current.serviceexport_versions
    about_version = None
    about_versions: tuple[str, ...] = ()
    if mcs_implementation and Implementation(mcs_implementation).checks_cluster_id:
        about = _find(resources, unavailable, ABOUT_GROUP, CLUSTERPROPERTIES, ABOUT_VERSIONS)
        about_version, about_versions = about.chosen, about.versions
        if about.doubt:
            about_version, about_versions = current.about_version, current.about_versions
    dgd = _find(resources, unavailable, dgd_api.GROUP, dgd_api.PLURAL, dgd_api.SUPPORTED_VERSIONS)
    dgd_version, dgd_versions = dgd.chosen or current.dgd_version, dgd.versions
    if dgd.doubt:
        dgd_version, dgd_versions = current.dgd_version, current.dgd_versions
    dcd = _find(resources, unavailable, dgd_api.GROUP, dgd_api.DCD_PLURAL, dgd_api.DCD_VERSIONS)
    dcd_version, dcd_versions = dcd.chosen, dcd.versions
    if dcd.doubt:
        dcd_version, dcd_versions = current.dcd_version, current.dcd_versions
    return ServedApis(
        dgd_version,
        served if mcs_implementation else None,
        about_version,
        served,
        dgd_versions=dgd_versions,
        serviceexport_versions=export_versions,
        about_versions=about_versions,
        dcd_version=dcd_version,
        dcd_versions=dcd_versions,
    )


_RELAY_API = f"{crd.PLURAL}.{crd.GROUP}"
_NEEDED = "the operator needs it"
_EXPORTS_API = f"{SERVICEEXPORTS}.{MCS_GROUP}"
_ABOUT_API = f"{CLUSTERPROPERTIES}.{ABOUT_GROUP}"
_DGD_API = f"{dgd_api.PLURAL}.{dgd_api.GROUP}"
_DCD_API = f"{dgd_api.DCD_PLURAL}.{dgd_api.GROUP}"


def transitions(before: ServedApis, after: ServedApis, mcs_implementation: str) -> list[str]:
    """Pure: one log line per API whose version in effect changed, saying what the
    operator does now. Both are values in effect (a served version not yet synced is not
    in effect, so an export API not yet listed is not called "no longer served")."""
    out = []
    if mcs_implementation:
        old, new = before.serviceexport_version, after.serviceexport_version
        if old != new and (new or not after.serviceexport_served):
            if new is None:
                doing = (
                    "no export can be written; every relay says so (Exported=False "
                    "ExportAPIUnavailable) until the API is served again"
                )
            elif old is None:
                doing = "exports are created and kept again"
            else:
                doing = f"exports are read and written at {new} from now on"
            out.append(f"the ServiceExport API ({_EXPORTS_API}) {_change(old, new)}: {doing}")
    else:
        old, new = before.serviceexport_served, after.serviceexport_served
        if old != new:
            doing = (
                "multi-cluster export is off: the exports this operator made earlier are withdrawn"
                if new
                else "multi-cluster export is off: nothing to withdraw"
            )
            out.append(f"the ServiceExport API ({_EXPORTS_API}) {_change(old, new)}: {doing}")
    old, new = before.about_version, after.about_version
    if old != new:
        doing = "on" if new else "off, as when it was never served"
        out.append(
            f"the About API ({_ABOUT_API}) {_change(old, new)}: the cluster ID check "
            f"(ClusterIDMismatch) is {doing}"
        )
    if mcs_implementation and before.dcd_version != after.dcd_version:
        old, new = before.dcd_version, after.dcd_version
        doing = (
            f"a frontend's Service a DCD controls is read at {new} from now on"
            if new
            else "no frontend's Service is taken to be a DCD's"
        )
        out.append(f"the DynamoComponentDeployment API ({_DCD_API}) {_change(old, new)}: {doing}")
    if before.dgd_version != after.dgd_version:
        out.append(
            f"the DGD API ({_DGD_API}) {_change(before.dgd_version, after.dgd_version)}: "
            f"every DGD is read at {after.dgd_version} from now on"
        )
    return out


def _change(old: str | None, new: str | None) -> str:
    if old is None:
        return f"is served now at {new}"
    if new is None:
        return "is no longer served"
    return f"is served now at {new} (was {old})"


async def rediscover_served_apis(
    client: Client, current: ServedApis, mcs_implementation: str
) -> ServedApis:
    """Read discovery again and resolve it against `current` (`follow_served_apis`)."""
    found = await discover(client)
    return follow_served_apis(current, found.resources, mcs_implementation, found.unavailable)


#: The ServiceExport's `spec` fields the operator writes, by the setting that asks for each.
EXPORT_SPEC_SETTINGS = {
    "exportedAnnotations": "multiCluster.exportedAnnotations",
    "exportedLabels": "multiCluster.exportedLabels",
}


#: How long the OpenAPI v3 index may lag behind discovery: the API server publishes a
#: CRD's schema a few seconds after it serves the CRD.
OPENAPI_LAG = 15.0


async def served_export_spec(
    client: Client, version: str, *, lag: float = OPENAPI_LAG
) -> frozenset[str] | None:
    """The `spec` fields the served ServiceExport schema declares at `version`, from the
    API server's OpenAPI v3 documents (every authenticated user may read them); None when
    they cannot be read (the check is then left to the writes)."""
    group_version = f"apis/{MCS_GROUP}/{version}"
    deadline = asyncio.get_running_loop().time() + lag
    try:
        while True:
            index = await client.request("GET", "/openapi/v3")
            entry = (index.get("paths") or {}).get(group_version)
            if entry is not None or asyncio.get_running_loop().time() >= deadline:
                break
            await asyncio.sleep(0.5)  # served, not yet published: the index lags
        if entry is None:
            raise KeyError(f"{group_version} is not in the OpenAPI v3 index after {lag:g}s")
        url = str(entry["serverRelativeURL"])
        path, _, query = url.partition("?")
        doc = await client.request("GET", path, params=dict(parse_qsl(query)))
        schemas = doc["components"]["schemas"].values()
    except (errors.ApiError, KeyError, TypeError, AttributeError) as e:
        log.warning("cannot read the ServiceExport schema (OpenAPI v3): %s", e)
        return None
    for schema in schemas:
        gvks = schema.get("x-kubernetes-group-version-kind") or []
        if any(
            g.get("group") == MCS_GROUP and g.get("version") == version and g.get("kind") == KIND
            for g in gvks
        ):
            spec = (schema.get("properties") or {}).get("spec") or {}
            return frozenset(spec.get("properties") or {})
    return frozenset()


async def check_export_spec(client: Client, served: ServedApis, fields: Sequence[str]) -> None:
    """Refuse to start when the configuration has every export carry a `spec` field the
    served ServiceExport CRD does not declare (mcs-api before v0.5.1: the API server
    would refuse every apply, or drop the field)."""
    version = served.serviceexport_version
    if version is None or not fields:
        return
    declared = await served_export_spec(client, version)
    if declared is None:
        return
    for field in fields:
        if field not in declared:
            setting = EXPORT_SPEC_SETTINGS[field]
            raise StartupError(
                f"{setting} is set, but the cluster's ServiceExport CRD "
                f"({SERVICEEXPORTS}.{MCS_GROUP} {version}) has no spec.{field}: install the "
                "Multi-Cluster Services API CRDs of mcs-api v0.5.1 or later (an MCS "
                f"implementation may ship older ones), or leave {setting} empty"
            )


async def discover_served_apis(client: Client, multi_cluster: MultiClusterConfig) -> ServedApis:
    """Resolve the served APIs against the cluster and log them (and why a check is off).
    The ServiceExport `spec` fields the configuration has every export carry must be
    declared by the served CRD."""
    mcs_implementation = multi_cluster.mcs_implementation
    found = await discover(client)
    served = resolve_served_apis(found.resources, mcs_implementation, found.unavailable)
    wanted = {
        "exportedAnnotations": multi_cluster.exported_annotations,
        "exportedLabels": multi_cluster.exported_labels,
    }
    await check_export_spec(client, served, [field for field, value in wanted.items() if value])
    if found.unavailable:
        log.warning(
            "discovery skipped API group versions that are unavailable (their APIService "
            "is not answering), none of which startup needs: %s",
            "; ".join(f"{gv}: {why}" for gv, why in sorted(found.unavailable.items())),
        )
    about = _find(
        found.resources, found.unavailable, ABOUT_GROUP, CLUSTERPROPERTIES, ABOUT_VERSIONS
    )
    about_doubt = about.doubt
    checks = Implementation(mcs_implementation).checks_cluster_id
    if checks and served.about_version is None and about_doubt:
        log.warning(
            "the About API (%s) is unavailable: the cluster ID check (ClusterIDMismatch) "
            "is off until its APIService answers (discovery is read again every "
            "multiCluster.apiDiscoveryInterval)",
            ", ".join(about_doubt),
        )
    elif checks and served.about_version is None:
        log.warning(
            "the About API (%s.%s) is not served: the cluster ID check "
            "(ClusterIDMismatch) is off until it is; installing its CRD turns it on, no "
            "restart needed",
            CLUSTERPROPERTIES,
            ABOUT_GROUP,
        )
    log.info("APIs served: %s", served.describe())
    return served
