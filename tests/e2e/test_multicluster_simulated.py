"""Two clusters with Karmada's exports, and a *stand-in* implementation between them.

The real multi-cluster test is test_multicluster.py (Submariner Lighthouse, kwok pods).
Karmada cannot be built here, so for `karmada` this test keeps a stand-in written by
this project (`mcs_simulator`, test code): it merges the members' ServiceExports into
ServiceImports in both clusters and writes conditions on the exports. It proves only
what the operator does with the `karmada` setting next to *an* implementation; what
an implementation does is proven against Lighthouse.

Two real control planes ("east" and "west", each with its About API cluster ID; a
Karmada member's name is the same string) each run the operator. The test checks:

- a pool that runs in both clusters is imported everywhere from both; a pool in one
  cluster from that one only;
- withdrawing a pool in one cluster (its DGD deleted) removes that cluster from the
  pool's imports, and nothing else; publishing it again brings it back;
- the implementation's status writes on our exports never make the operator write
  (no fight over an object two controllers write to), and one more reconcile of
  every relay writes nothing;
- the operator never writes a ServiceImport or an export's status: those are the
  implementation's.

And, in a world where pods run (kwok) with a third control plane playing Karmada's, on
which the stand-in writes what Karmada writes for the consuming side (Works and
`derived-<service>` EndpointSlices), `discover --karmada` there finds a pool as the
Global Router would: keyed by its member's name, live while its relay pods are Ready,
not live scaled to 0, gone once withdrawn.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.config import API_VERSION, KIND, parse_configuration
from dynamo_pool_operator.discover import command as discover_cmd
from dynamo_pool_operator.localcluster import dynamo
from dynamo_pool_operator.localcluster.assets import resolve
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.crds import default_crds
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES
from tests.e2e.chart_operator import CLUSTER_ID_PROPERTY, DGDS, RELAYS, dgd, relay
from tests.e2e.mcs_simulator import (
    SERVICE_EXPORTS,
    SERVICE_IMPORTS,
    USER_AGENT,
    WORKS,
    ClusterSetSimulator,
    Member,
    work_crd,
)
from tests.e2e.observed import at_rest, cached_at, ready_pod_ips
from tests.harness import OPERATOR_AGENT, OperatorUnderTest, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

#: MCS namespace sameness: the same namespace in every cluster of the set.
NS = "inference"
#: Which pools run where: llama in both clusters, mistral in west only.
POOLS = {"east": ["llama"], "west": ["llama", "mistral"]}
USER = "dpo-e2e-user"


def exports_of(pool: str) -> list[str]:
    return [names.relay_name(pool), names.component_service_name(pool, "Frontend")]


def imports_wanted(where: dict[str, list[str]]) -> dict[str, list[str]]:
    """ServiceImport name -> the clusters it should list, for pools placed as `where`."""
    out: dict[str, list[str]] = {}
    for cluster, pools in where.items():
        for pool in pools:
            for export in exports_of(pool):
                out.setdefault(export, []).append(cluster)
    return {name: sorted(clusters) for name, clusters in out.items()}


@pytest.fixture(scope="module")
def implementation() -> str:
    """Karmada (member cluster names): `mcs` is tested with Lighthouse instead."""
    return "karmada"


@pytest.fixture
def clusterset(implementation: str) -> Iterator[dict[str, ControlPlane]]:
    """Two fresh control planes, each with every API the operator uses and its cluster
    ID (a Karmada member's name is the same string). Gone after its test, so it never
    runs next to the Karmada world."""
    assets = resolve()
    planes = {
        cluster: ControlPlane(
            assets=assets, crds=default_crds(assets.mcs_crd_dir), garbage_collector=False
        )
        for cluster in POOLS
    }
    started: list[ControlPlane] = []
    try:
        for cluster, cp in planes.items():
            cp.start()
            started.append(cp)
            cp.apply(
                {
                    "apiVersion": "about.k8s.io/v1beta1",
                    "kind": "ClusterProperty",
                    "metadata": {"name": CLUSTER_ID_PROPERTY},
                    "spec": {"value": cluster},
                }
            )
            cp.create_namespace(NS)
        yield planes
    finally:
        for cp in started:
            cp.stop()


async def run_pool(client: Client, pool: str, cluster: str) -> None:
    """What a user and Dynamo's operator do: the DGD, its frontend Service, and the
    pool's relay."""
    await run_dgd(client, pool)
    await client.create(RELAYS, relay(pool, NS, cluster))


async def run_dgd(client: Client, pool: str) -> None:
    """The DGD and its frontend Service: Dynamo's operator makes it, controlled by the
    DGD (there is none here), so it goes with the DGD."""
    made = await client.create(DGDS, dgd(pool, NS))
    owner = {
        "apiVersion": made["apiVersion"],
        "kind": made["kind"],
        "name": pool,
        "uid": made["metadata"]["uid"],
        "controller": True,
    }
    frontend = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": names.component_service_name(pool, "Frontend"),
            "namespace": NS,
            "ownerReferences": [owner],
        },
        "spec": {"ports": [{"name": "http", "port": 8000, "protocol": "TCP"}]},
    }
    await client.create(SERVICES, frontend)


async def imported(client: Client) -> dict[str, list[str]]:
    """The Global Router's view from one cluster: import name -> exporting clusters."""
    return {
        i["metadata"]["name"]: [c["cluster"] for c in (i.get("status") or {}).get("clusters") or []]
        for i in (await client.list(SERVICE_IMPORTS, NS)).items
    }


@contextlib.asynccontextmanager
async def clients(
    planes: dict[str, ControlPlane], user_agent: str
) -> AsyncIterator[dict[str, Client]]:
    async with contextlib.AsyncExitStack() as stack:
        out = {}
        for cluster, cp in planes.items():
            c = Client(load_kubeconfig(cp.kubeconfig), user_agent=user_agent)
            out[cluster] = await stack.enter_async_context(c)
        yield out


async def test_each_pool_is_imported_from_the_clusters_it_runs_in_and_withdrawn_from_one(
    clusterset: dict[str, ControlPlane], implementation: str
) -> None:
    cfg = parse_configuration(
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "multiCluster": {"mcsImplementation": implementation},
        }
    )
    since = {cluster: cp.audit.offset() for cluster, cp in clusterset.items()}
    async with contextlib.AsyncExitStack() as stack:
        ops = {
            cluster: await stack.enter_async_context(OperatorUnderTest(cp, cfg))
            for cluster, cp in clusterset.items()
        }
        users = await stack.enter_async_context(clients(clusterset, USER))
        sim_clients = await stack.enter_async_context(clients(clusterset, USER_AGENT))
        sim = ClusterSetSimulator([Member(c, sim_clients[c]) for c in clusterset], NS)
        await stack.enter_async_context(sim.running())

        for cluster, pools in POOLS.items():
            for pool in pools:
                await run_pool(users[cluster], pool, cluster)

        async def every_cluster_sees(want: dict[str, list[str]]) -> None:
            for cluster, user in users.items():
                try:
                    await eventually(partial(imports_are, user, want), timeout=30)
                except AssertionError:
                    got = await imported(user)
                    pytest.fail(f"{cluster} imports {got}, want {want}")

        # 1. The Global Router's view, the same from both clusters.
        await every_cluster_sees(imports_wanted(POOLS))

        # 2. The implementation reported on every export; the relays say Exported.
        for cluster, pools in POOLS.items():
            for pool in pools:
                for export in exports_of(pool):
                    await eventually(partial(_reported, users[cluster], export), timeout=30)
                status = (await users[cluster].get(RELAYS, pool, NS))["status"]
                assert {e["name"]: e["state"] for e in status["exports"]} == dict.fromkeys(
                    exports_of(pool), "Exported"
                ), status

        # 3. The implementation's status writes on our exports are read, never answered:
        # when it withdraws its conditions and writes them again, the relay's status
        # follows (Exported Pending, then True again), and the operator writes nothing
        # else: no export, Service or Deployment. (No Node runs relay pods here, so the
        # relays are not Ready: RelayAvailable=False.)
        for cluster, pools in POOLS.items():
            op, user = ops[cluster], users[cluster]
            await at_rest(op)
            offset = clusterset[cluster].audit.offset()
            export = exports_of(pools[0])[1]
            cleared = {"status": {"conditions": None}}  # the simulator writes them again
            await user.merge_patch(SERVICE_EXPORTS, export, cleared, NS, subresource="status")
            reported = await eventually(partial(_reported, user, export), timeout=30)
            seen = partial(cached_at, op, NS, export, reported["metadata"]["resourceVersion"])
            await eventually(seen, timeout=15)
            await at_rest(op)
            writes = [w for w in await op.writes_since(offset) if w.resource != "leases"]
            assert {(w.resource, w.subresource) for w in writes} <= {
                ("dynamopoolrelays", "status"),
                ("events", ""),
            }, [(w.verb, w.resource, w.name) for w in writes]
            status = (await user.get(RELAYS, pools[0], NS))["status"]
            exported = next(c for c in status["conditions"] if c["type"] == "Exported")
            assert exported["status"] == "True", status
            for pool in pools:
                again = await op.reconcile_again((NS, pool), include_events=True)
                assert again == [], [(w.verb, w.resource, w.name) for w in again]

        # 4. llama withdrawn from east: east drops out of its imports, nothing else moves.
        await users["east"].delete(DGDS, "llama", NS)
        # Its frontend Service goes with it (the garbage collector's part: this control
        # plane runs none); one left controlled by the deleted DGD is not the new one's.
        await users["east"].delete(SERVICES, names.component_service_name("llama", "Frontend"), NS)
        await every_cluster_sees(imports_wanted({"east": [], "west": POOLS["west"]}))
        assert [
            e["metadata"]["name"] for e in (await users["east"].list(SERVICE_EXPORTS, NS)).items
        ] == []

        # 5. ... and published again: back in.
        await run_dgd(users["east"], "llama")
        await every_cluster_sees(imports_wanted(POOLS))
        assert sim.passes > 0

    # 6. ServiceImports and export status are the implementation's, never ours.
    for cluster, cp in clusterset.items():
        ours = await asyncio.to_thread(
            cp.audit.writes, since[cluster], user_agent_prefix=OPERATOR_AGENT
        )
        theirs = [
            (w.verb, w.resource, w.subresource, w.name)
            for w in ours
            if w.resource == "serviceimports"
            or (w.resource == "serviceexports" and w.subresource == "status")
        ]
        assert theirs == [], f"{cluster}: the operator wrote {theirs}"
        assert any(w.resource == "serviceexports" for w in ours), "the check would be vacuous"


async def imports_are(client: Client, want: dict[str, list[str]]) -> bool:
    return await imported(client) == want


async def _reported(client: Client, export: str) -> dict[str, Any] | None:
    """The export, once the implementation reported it `Ready` (`Exported`)."""
    obj = await client.get(SERVICE_EXPORTS, export, NS)
    conditions = (obj.get("status") or {}).get("conditions") or []
    if any(c.get("type") == "Ready" and c.get("reason") == "Exported" for c in conditions):
        return obj
    return None


# ------------------------------------------------------------------ discover --karmada


def set_cluster_id(cp: ControlPlane, cluster: str) -> None:
    cp.apply(
        {
            "apiVersion": "about.k8s.io/v1beta1",
            "kind": "ClusterProperty",
            "metadata": {"name": CLUSTER_ID_PROPERTY},
            "spec": {"value": cluster},
        }
    )


@pytest.fixture
def karmada_world() -> Iterator[tuple[ControlPlane, dict[str, ControlPlane]]]:
    """The Karmada control plane (serving Works, with each member's execution namespace)
    and two members where pods run (kwok), each with its cluster ID, its member name."""
    assets = resolve()
    if why := assets.missing_peers("kwok"):
        pytest.skip(why)
    plane = ControlPlane(assets=assets, garbage_collector=False)
    members = {
        cluster: ControlPlane(assets=assets, crds=default_crds(assets.mcs_crd_dir), nodes=1)
        for cluster in POOLS
    }
    planes = [plane, *members.values()]
    try:
        with ThreadPoolExecutor(len(planes)) as pool:
            for done in [pool.submit(cp.start) for cp in planes]:
                done.result()
        if plane.request("GET", f"/apis/{WORKS.group}/{WORKS.version}")[0] != 200:
            plane.install_crd(work_crd())
        plane.create_namespace(NS)
        for cluster, cp in members.items():
            plane.create_namespace(f"{names.KARMADA_EXECUTION_SPACE_PREFIX}{cluster}")
            set_cluster_id(cp, cluster)
            cp.create_namespace(NS)
        yield plane, members
    finally:
        for cp in planes:
            cp.stop()


async def run_pool_with_pods(client: Client, pool: str, cluster: str) -> None:
    """The DGD, what Dynamo's operator makes of it (the frontend's Deployment and
    Service, owned by the DGD), and the pool's relay."""
    created = await client.create(DGDS, dgd(pool, NS))
    deployment, service = dynamo.frontend(created)
    await client.create(DEPLOYMENTS, deployment)
    await client.create(SERVICES, service)
    await client.create(RELAYS, relay(pool, NS, cluster))


async def discovered_on(plane: ControlPlane, key: str | None = None) -> tuple[int, dict[str, Any]]:
    """`discover --karmada -n NS [--pool KEY] -o json` against the Karmada control plane."""
    out, err = io.StringIO(), io.StringIO()
    opts = discover_cmd.Options(
        kubeconfig=str(plane.kubeconfig), karmada=True, namespace=NS, output="json", pool=key
    )
    code = await discover_cmd.run(opts, out=out, err=err)
    assert code in (0, 1), err.getvalue()
    assert "note:" not in err.getvalue(), "the Works were not read"
    return code, json.loads(out.getvalue())


async def ready_relay_ips(client: Client, pool: str) -> list[str]:
    selector = ",".join(f"{k}={v}" for k, v in names.selector(pool).items())
    return await ready_pod_ips(client, NS, selector)


@pytest.mark.timeout(420)
async def test_discover_on_the_karmada_plane_finds_the_pool_by_its_member(
    karmada_world: tuple[ControlPlane, dict[str, ControlPlane]],
) -> None:
    """Read from the `derived-<service>` slices on the Karmada control plane (and the
    Works, to explain): the east pool keyed by the member name, which is the east relay's
    cluster ID, live while its relay pods are Ready, not live scaled to 0, gone once
    withdrawn."""
    plane, members = karmada_world
    cfg = parse_configuration(
        {"apiVersion": API_VERSION, "kind": KIND, "multiCluster": {"mcsImplementation": "karmada"}}
    )
    async with contextlib.AsyncExitStack() as stack:
        for cp in members.values():
            await stack.enter_async_context(OperatorUnderTest(cp, cfg))
        users = await stack.enter_async_context(clients(members, USER))
        sim_clients = await stack.enter_async_context(clients(members, USER_AGENT))
        karmada = await stack.enter_async_context(
            Client(load_kubeconfig(plane.kubeconfig), user_agent=USER_AGENT)
        )
        sim = ClusterSetSimulator([Member(c, sim_clients[c]) for c in members], NS, karmada=karmada)
        await stack.enter_async_context(sim.running())
        east = users["east"]
        await run_pool_with_pods(east, "llama", "east")

        async def cluster_id() -> str:
            status = (await east.get(RELAYS, "llama", NS)).get("status") or {}
            return str(status.get("clusterId") or "")

        assert await eventually(cluster_id, timeout=60, interval=0.2) == "east"
        key = f"east/{NS}/llama"
        seen: list[Any] = []

        async def live_with_the_relay_pods() -> bool:
            """Live, with its frontend and nothing wrong (its Works are there), its ready
            relay endpoints exactly east's Ready relay pods."""
            pods = await ready_relay_ips(east, "llama")
            code, doc = await discovered_on(plane, key)
            seen[:] = [code, doc, pods]
            if code != 0 or not pods:
                return False
            (pool,) = doc["pools"]
            addresses = sorted(e["address"] for e in pool["relay"]["endpoints"] if e["ready"])
            return (
                pool["live"] is True
                and addresses == pods
                and [f["service"] for f in pool["frontends"]] == ["llama-frontend"]
                and pool["problems"] == []
            )

        try:
            await eventually(live_with_the_relay_pods, timeout=90, interval=0.5)
        except AssertionError:
            pytest.fail(f"the Karmada plane does not show {key} live with its relay pods: {seen}")
        code, doc = await discovered_on(plane)
        assert code == 0, doc
        assert [(p["cluster"], p["namespace"], p["name"]) for p in doc["pools"]] == [
            ("east", NS, "llama")
        ], doc
        assert doc["skipped"] == [], doc

        async def not_live() -> bool:
            code, doc = await discovered_on(plane, key)
            seen[:] = [code, doc]
            return code == 1 and all(not p["live"] for p in doc["pools"])

        await east.merge_patch(RELAYS, "llama", {"spec": {"replicas": 0}}, NS)
        try:
            await eventually(not_live, timeout=60, interval=0.5)
        except AssertionError:
            pytest.fail(f"{key} stays live with its relay scaled to 0: {seen}")

        await east.merge_patch(RELAYS, "llama", {"spec": {"replicas": None}}, NS)
        try:
            await eventually(live_with_the_relay_pods, timeout=90, interval=0.5)
        except AssertionError:
            pytest.fail(f"{key} is not live again with its relay pods: {seen}")

        async def gone() -> bool:
            code, doc = await discovered_on(plane, key)
            seen[:] = [code, doc]
            return code == 1 and doc["pools"] == []

        await east.delete(DGDS, "llama", NS)
        try:
            await eventually(gone, timeout=60, interval=0.5)
        except AssertionError:
            pytest.fail(f"{key} stays after its withdrawal: {seen}")
        assert (await karmada.list(WORKS, None)).items == [], "the withdrawn pool's Works stay"
