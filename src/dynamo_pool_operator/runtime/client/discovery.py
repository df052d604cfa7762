"""API discovery: which group/version/resources the server serves, and which it cannot say.

Apart from the REST verbs (`rest.py`) because it is a walk over several documents
with its own answer types, not one request: aggregated discovery (`/api` and
`/apis` in one request each) or, on an older server, the legacy per-group
endpoints. A group version whose server is down is named, not fatal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import Resource

AGGREGATED_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
)


@dataclass(frozen=True, slots=True)
class ServedResource:
    """One resource as discovery reports it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    def resource(self) -> Resource:
        return Resource(self.group, self.version, self.plural, self.kind, self.namespaced)


@dataclass(frozen=True, slots=True)
class Discovery:
    """What discovery found, and the group versions it could not read.

    An aggregated API whose server is down (metrics-server, say) answers 503 for its
    group version, or is marked Stale in aggregated discovery. As client-go's partial
    discovery does, its resources are left out and the rest is returned: the caller
    decides whether a group it needs is among `unavailable`.
    """

    resources: list[ServedResource]
    #: "group/version" (core: "v1") -> why it could not be read.
    unavailable: dict[str, str]


async def discover(client: Client) -> Discovery:
    """Every served group/version/resource (subresources left out), from aggregated
    discovery (one request) or, on an older server, the legacy per-group endpoints;
    an unavailable group version is skipped and named in `unavailable`."""
    out: list[ServedResource] = []
    unavailable: dict[str, str] = {}
    for root in ("/api", "/apis"):
        doc = await client.request("GET", root, accept=AGGREGATED_DISCOVERY)
        if doc.get("kind") == "APIGroupDiscoveryList":
            for group in doc.get("items") or []:
                gname = group.get("metadata", {}).get("name", "")
                for ver in group.get("versions") or []:
                    if ver.get("freshness") == "Stale":
                        gv = f"{gname}/{ver['version']}" if gname else ver["version"]
                        unavailable[gv] = "stale in aggregated discovery: its server did not answer"
                        continue
                    for r in ver.get("resources") or []:
                        out.append(
                            ServedResource(
                                gname,
                                ver["version"],
                                r["resource"],
                                (r.get("responseKind") or {}).get("kind", ""),
                                r.get("scope") == "Namespaced",
                            )
                        )
        else:
            out.extend(await _legacy_discovery(client, root, doc, unavailable))
    return Discovery(out, unavailable)


async def _legacy_discovery(
    client: Client, root: str, doc: dict[str, Any], unavailable: dict[str, str]
) -> list[ServedResource]:
    gvs: list[tuple[str, str]] = []
    if root == "/api":
        gvs = [("", v) for v in doc.get("versions") or []]
    else:
        for g in doc.get("groups") or []:
            gvs += [(g["name"], v["version"]) for v in g.get("versions") or []]
    out: list[ServedResource] = []
    for group, version in gvs:
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            rl = await client.request("GET", path)
        except errors.NotFound:
            continue  # removed since the group list: not served
        except errors.ApiError as e:
            unavailable[f"{group}/{version}" if group else version] = str(e)
            continue
        for r in rl.get("resources") or []:
            if "/" not in r["name"]:
                out.append(ServedResource(group, version, r["name"], r["kind"], r["namespaced"]))
    return out


async def server_resources(client: Client) -> list[ServedResource]:
    """Every served group/version/resource (subresources left out) that discovery
    could read; see `discover` for the group versions it could not."""
    return (await discover(client)).resources


async def served_versions(client: Client, group: str, plural: str) -> list[str]:
    """Versions at which `plural.group` is served, in discovery's preference order."""
    return [
        r.version for r in await server_resources(client) if r.group == group and r.plural == plural
    ]
