"""Two clusters joined by Cilium's ClusterMesh MCS-API: a second real implementation.

The world (tests/e2e/cilium.py, localcluster/kwok.py): two control planes, "east" and
"west", each with a kwok Node, its About API cluster ID, a kvstore etcd and one
cilium-operator (v1.20.2, built from the Go module proxy) whose clustermesh configuration
names the other's kvstore. Nobody here wrote Cilium: it validates ServiceExports and
writes their conditions, and creates in every cluster the ServiceImport, a
`derived-<hash>` Service and EndpointSlices of the other cluster's endpoints (managed
by `endpointslice-mesh-controller.cilium.io`).

What the Global Router needs from it, checked against the real thing:

- the pool's relay Service (headless) exported by the operator in east is imported in
  west as EndpointSlices holding exactly east's Ready relay pod IPs, and withdrawn;
- a ClusterIP Service's import gets no EndpointSlices (Cilium says
  `endpointSliceObjects: Absent`) until its ServiceExport carries
  `spec.exportedAnnotations: {service.cilium.io/global-sync-endpoint-slices: "true"}`,
  which is why the operator's frontend exports are invisible to the router with Cilium
  unless that annotation is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from functools import partial
from typing import Any

import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.mcs import CILIUM_SYNC_SLICES, serviceexports
from dynamo_pool_operator.config import API_VERSION, KIND, parse_configuration
from dynamo_pool_operator.discover.view import ENDPOINT_SLICES
from dynamo_pool_operator.localcluster import dynamo
from dynamo_pool_operator.localcluster.assets import resolve
from dynamo_pool_operator.localcluster.lighthouse import SOURCE_CLUSTER_LABEL, service_imports
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES
from tests import endpoints
from tests.e2e import cilium
from tests.e2e.chart_operator import DGDS, RELAYS, dgd, relay
from tests.e2e.observed import ready_pod_ips
from tests.harness import OPERATOR_AGENT, OperatorUnderTest, eventually
from tests.leaks import surviving

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

CLUSTERS = ("east", "west")
#: Cilium reads and writes the MCS API at v1beta1 only.
SERVICE_EXPORTS = serviceexports("v1beta1")
SERVICE_IMPORTS = service_imports("v1beta1")
USER = "dpo-e2e-user"
#: Cilium batches endpoint changes for 0.5 s before it writes EndpointSlices; an
#: EndpointSlice that has not arrived this long after the ones written with it will not.
QUIET = 5.0


@pytest.fixture(scope="module")
def world() -> Iterator[cilium.World]:
    """east + west with kwok and Cilium. Afterwards no process (by PID) and no directory
    of it survives."""
    assets = resolve()
    if why := assets.missing_peers("kwok", "cilium-operator-generic") or cilium.refused():
        pytest.skip(why)
    with cilium.world(assets, CLUSTERS) as w:
        pids, dirs = w.pids, w.dirs
        yield w
    leaked = surviving(pids)
    assert not leaked, f"processes survived the world: {leaked}"
    assert not [d for d in dirs if d.exists()], "control-plane directories survived"


@pytest.fixture
def ns(world: cilium.World) -> Iterator[str]:
    """MCS namespace sameness: the same fresh namespace in both clusters, deleted (and
    waited for) afterwards."""
    name = f"cil-{uuid.uuid4().hex[:8]}"
    for cp in world.members.values():
        cp.create_namespace(name)
    try:
        yield name
    finally:
        for cp in world.members.values():
            cp.delete_namespace(name)
        deadline = time.monotonic() + 90
        for cp in world.members.values():
            while cp.request("GET", f"/api/v1/namespaces/{name}")[0] != 404:
                assert time.monotonic() < deadline, f"namespace {name} is not deleted"
                time.sleep(0.2)


@contextlib.asynccontextmanager
async def clients(world: cilium.World) -> AsyncIterator[dict[str, Client]]:
    async with contextlib.AsyncExitStack() as stack:
        out = {}
        for cluster, cp in world.members.items():
            c = Client(load_kubeconfig(cp.kubeconfig), user_agent=USER)
            out[cluster] = await stack.enter_async_context(c)
        yield out


async def imported_slices(
    client: Client, ns: str, service: str, managed_by: tuple[str, str] = cilium.MESH_MANAGED_BY
) -> list[dict[str, Any]]:
    """The EndpointSlices Cilium wrote for the import of `service`: by default those of
    its mesh controller (another cluster's endpoints)."""
    key, value = managed_by
    selector = f"{key}={value},multicluster.kubernetes.io/service-name={service}"
    return (await client.list(ENDPOINT_SLICES, ns, label_selector=selector)).items


def from_cluster(slices: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    return [s for s in slices if s["metadata"]["labels"].get(SOURCE_CLUSTER_LABEL) == source]


async def imported_from(client: Client, ns: str, service: str, source: str) -> list[str]:
    """The ready addresses imported for `service` from cluster `source`."""
    slices = from_cluster(await imported_slices(client, ns, service), source)
    return endpoints.endpoint_addresses(slices, ready=True)


async def import_of(client: Client, ns: str, service: str) -> dict[str, Any] | None:
    """The ServiceImport of `service` once Cilium has put its derived Service behind it."""
    found = await client.get(SERVICE_IMPORTS, service, ns)
    derived = (found["metadata"].get("annotations") or {}).get(
        "multicluster.kubernetes.io/derived-service"
    )
    return found if derived else None


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in obj["status"]["conditions"]}


async def test_the_relay_export_is_imported_as_the_relay_pods_and_withdrawn(
    world: cilium.World, ns: str
) -> None:
    """The operator (`mcs`) exports llama's pool in east. In west Cilium imports the relay
    Service (headless) as EndpointSlices holding exactly east's Ready relay pod IPs,
    labelled with the Service's name and east as their source; Cilium's own conditions
    on east's export say Valid and Ready. In east itself Cilium mirrors east's relay
    endpoints onto east's own import and syncs back an empty slice "from west". The
    frontend (a ClusterIP Service) is imported too, but Cilium says it writes no
    EndpointSlices for it. The DGD deleted, the import
    and its slices leave west. ServiceImports and export status are Cilium's writes,
    never the operator's."""
    east_cp = world.members["east"]
    since = east_cp.audit.offset()
    relay_svc = names.relay_name("llama")
    frontend_svc = names.component_service_name("llama", "Frontend")
    cfg = parse_configuration(
        {"apiVersion": API_VERSION, "kind": KIND, "multiCluster": {"mcsImplementation": "mcs"}}
    )
    async with OperatorUnderTest(east_cp, cfg), clients(world) as users:
        east, west = users["east"], users["west"]
        created = await east.create(DGDS, dgd("llama", ns))
        deployment, service = dynamo.frontend(created)
        await east.create(DEPLOYMENTS, deployment)
        await east.create(SERVICES, service)
        await east.create(RELAYS, relay("llama", ns, "east"))

        selector = ",".join(f"{k}={v}" for k, v in names.selector("llama").items())

        async def imported_as_relay_pods() -> bool:
            ips = await ready_pod_ips(east, ns, selector)
            return len(ips) == 2 and await imported_from(west, ns, relay_svc, "east") == ips

        try:
            await eventually(imported_as_relay_pods, timeout=90, interval=0.3)
        except AssertionError:
            pytest.fail(
                f"west imports {await imported_from(west, ns, relay_svc, 'east')}, east's "
                f"relay pods are {await ready_pod_ips(east, ns, selector)}; "
                f"west's cilium-operator:\n{world.mesh.log('west')[-3000:]}"
            )

        imported = await eventually(partial(import_of, west, ns, relay_svc), timeout=30)
        assert imported["spec"]["type"] == "Headless", imported["spec"]
        assert [c["cluster"] for c in imported["status"]["clusters"]] == ["east"]
        assert imported["status"]["endpointSliceObjects"] == "Present"
        derived = imported["metadata"]["annotations"]["multicluster.kubernetes.io/derived-service"]
        for s in await imported_slices(west, ns, relay_svc):
            assert s["metadata"]["labels"]["kubernetes.io/service-name"] == derived, s
        await west.get(SERVICES, derived, ns)

        # In east, what a reader of slices by their MCS labels alone would also find:
        # east's own endpoints mirrored onto east's import (another managed-by), and a
        # slice "from west" with no endpoint at all, though llama does not run there
        # (west's derived Service, synced back). Cilium's facts, for docs/exports.md.
        relay_ips = await ready_pod_ips(east, ns, selector)

        async def mirrored() -> bool:
            local = await imported_slices(east, ns, relay_svc, cilium.LOCAL_MANAGED_BY)
            ips = endpoints.endpoint_addresses(from_cluster(local, "east"), ready=True)
            return ips == relay_ips

        await eventually(mirrored, timeout=30, interval=0.3)

        async def phantom() -> list[dict[str, Any]]:
            return from_cluster(await imported_slices(east, ns, relay_svc), "west")

        from_west = await eventually(phantom, timeout=30, interval=0.3)
        assert [e for s in from_west for e in s.get("endpoints") or []] == [], from_west

        # What Cilium writes on the operator's exports (docs/exports.md).
        for name in (relay_svc, frontend_svc):
            export = await eventually(
                partial(east.get, SERVICE_EXPORTS, name, ns), timeout=30, interval=0.2
            )

            async def confirmed(name: str = name) -> dict[str, tuple[str, str]] | None:
                said = conditions(await east.get(SERVICE_EXPORTS, name, ns))
                return said if said.get("Ready", ("",))[0] == "True" else None

            said = await eventually(confirmed, timeout=30, interval=0.2)
            assert said == {
                "Valid": ("True", "Valid"),
                "Ready": ("True", "Ready"),
                "Conflict": ("False", "NoConflicts"),
            }, export

        # The frontend: imported, and Cilium itself says no EndpointSlice will follow.
        front = await eventually(partial(import_of, west, ns, frontend_svc), timeout=30)
        assert front["spec"]["type"] == "ClusterSetIP", front["spec"]
        assert front["status"]["endpointSliceObjects"] == "Absent", front["status"]
        assert await imported_slices(west, ns, frontend_svc) == []

        # Withdrawn: the import and its slices leave west.
        await east.delete(DGDS, "llama", ns)

        async def gone() -> bool:
            imports = [i["metadata"]["name"] for i in (await west.list(SERVICE_IMPORTS, ns)).items]
            return relay_svc not in imports and not await imported_slices(west, ns, relay_svc)

        await eventually(gone, timeout=60, interval=0.3)

    ours = await asyncio.to_thread(east_cp.audit.writes, since, user_agent_prefix=OPERATOR_AGENT)
    theirs = [
        (w.verb, w.resource, w.subresource, w.name)
        for w in ours
        if w.resource == "serviceimports"
        or (w.resource == "serviceexports" and w.subresource == "status")
    ]
    assert theirs == [], f"the operator wrote {theirs}"
    assert any(w.resource == "serviceexports" for w in ours), "the check would be vacuous"
    everyone = await asyncio.to_thread(east_cp.audit.writes, since)
    assert any(
        w.user == cilium.CILIUM_USER
        and w.resource == "serviceexports"
        and w.subresource == "status"
        for w in everyone
    ), "Cilium's condition writes are not in east's audit log"


async def test_with_ciliums_sync_annotation_configured_the_frontend_reaches_the_router(
    world: cilium.World, ns: str
) -> None:
    """`multiCluster.exportedAnnotations` set as docs/exports.md says for Cilium: every
    export the operator writes carries the annotation, Cilium copies it onto the import,
    and west gets the frontend's (a ClusterIP Service's) EndpointSlices with east's
    frontend pod IPs, as the router reads them."""
    east_cp = world.members["east"]
    frontend_svc = names.component_service_name("llama", "Frontend")
    cfg = parse_configuration(
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "multiCluster": {
                "mcsImplementation": "mcs",
                "exportedAnnotations": {CILIUM_SYNC_SLICES: "true"},
            },
        }
    )
    async with OperatorUnderTest(east_cp, cfg) as op, clients(world) as users:
        east, west = users["east"], users["west"]
        created = await east.create(DGDS, dgd("llama", ns))
        deployment, service = dynamo.frontend(created)
        await east.create(DEPLOYMENTS, deployment)
        await east.create(SERVICES, service)
        await east.create(RELAYS, relay("llama", ns, "east"))
        selector = ",".join(f"{k}={v}" for k, v in service["spec"]["selector"].items())

        async def imported_as_frontend_pods() -> bool:
            ips = await ready_pod_ips(east, ns, selector)
            return bool(ips) and await imported_from(west, ns, frontend_svc, "east") == ips

        try:
            await eventually(imported_as_frontend_pods, timeout=90, interval=0.3)
        except AssertionError:
            pytest.fail(
                f"west imports {await imported_from(west, ns, frontend_svc, 'east')}, east's "
                f"frontend pods are {await ready_pod_ips(east, ns, selector)}; "
                f"west's cilium-operator:\n{world.mesh.log('west')[-3000:]}"
            )
        front = await eventually(partial(import_of, west, ns, frontend_svc), timeout=30)
        assert front["spec"]["type"] == "ClusterSetIP", front["spec"]
        assert front["status"]["endpointSliceObjects"] == "Present", front["status"]
        assert front["metadata"]["annotations"][CILIUM_SYNC_SLICES] == "true"
        export = await east.get(SERVICE_EXPORTS, frontend_svc, ns)
        assert export["spec"]["exportedAnnotations"] == {CILIUM_SYNC_SLICES: "true"}
        assert await op.reconcile_again((ns, "llama")) == []


def web(ns: str, name: str, *, headless: bool) -> dict[str, Any]:
    """A Service over the `web` pods, headless or with a ClusterIP."""
    spec: dict[str, Any] = {
        "selector": {"app": "web"},
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }
    if headless:
        spec["clusterIP"] = "None"
    meta = {"name": name, "namespace": ns}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def web_pods(ns: str) -> dict[str, Any]:
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "web:stand-in",
                            "ports": [{"name": "http", "containerPort": 8080}],
                            "securityContext": dynamo.RESTRICTED_CONTAINER,
                        }
                    ]
                },
            },
        },
    }


def export(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": SERVICE_EXPORTS.api_version,
        "kind": SERVICE_EXPORTS.kind,
        "metadata": {"name": name, "namespace": ns},
    }


async def test_a_clusterip_import_has_endpointslices_only_with_cilium_sync_annotation(
    world: cilium.World, ns: str
) -> None:
    """A ClusterIP Service `web` and a headless `web-headless` over the same two pods,
    both exported from east by ServiceExports this test makes. In west, the headless
    import's EndpointSlices arrive with the pod IPs; the ClusterIP import exists, says
    `endpointSliceObjects: Absent`, and gets no EndpointSlice. Once `web`'s export
    carries `spec.exportedAnnotations` with `service.cilium.io/global-sync-endpoint-slices:
    "true"`, Cilium puts the annotation on west's import, and its EndpointSlices arrive
    with the pod IPs (not the ClusterIP: Cilium syncs endpoints, not the Service)."""
    async with clients(world) as users:
        east, west = users["east"], users["west"]
        await east.create(DEPLOYMENTS, web_pods(ns))
        await east.create(SERVICES, web(ns, "web", headless=False))
        await east.create(SERVICES, web(ns, "web-headless", headless=True))
        for name in ("web", "web-headless"):
            await east.create(SERVICE_EXPORTS, export(ns, name))

        async def headless_imported() -> list[str] | None:
            ips = await ready_pod_ips(east, ns, "app=web")
            got = await imported_from(west, ns, "web-headless", "east")
            return ips if len(ips) == 2 and got == ips else None

        pod_ips = await eventually(headless_imported, timeout=90, interval=0.3)
        imported = await eventually(partial(import_of, west, ns, "web"), timeout=30)
        assert imported["spec"]["type"] == "ClusterSetIP", imported["spec"]
        assert cilium.SYNC_ENDPOINT_SLICES not in imported["metadata"]["annotations"]
        assert imported["status"]["endpointSliceObjects"] == "Absent", imported["status"]
        await asyncio.sleep(QUIET)
        assert await imported_slices(west, ns, "web") == [], "slices without the annotation"

        patch = {"spec": {"exportedAnnotations": {cilium.SYNC_ENDPOINT_SLICES: "true"}}}
        await east.merge_patch(SERVICE_EXPORTS, "web", patch, ns)

        async def synced() -> bool:
            found = await west.get(SERVICE_IMPORTS, "web", ns)
            said = found["metadata"].get("annotations") or {}
            return (
                said.get(cilium.SYNC_ENDPOINT_SLICES) == "true"
                and found["status"].get("endpointSliceObjects") == "Present"
                and await imported_from(west, ns, "web", "east") == pod_ips
            )

        try:
            await eventually(synced, timeout=60, interval=0.3)
        except AssertionError:
            found = await west.get(SERVICE_IMPORTS, "web", ns)
            pytest.fail(
                f"west's import {found['metadata'].get('annotations')} {found.get('status')}, "
                f"slices {await imported_slices(west, ns, 'web')}"
            )
