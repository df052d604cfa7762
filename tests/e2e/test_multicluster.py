"""Two clusters, one cluster set, a real MCS implementation: the Global Router finds each
pool where it runs.

The world (localcluster/lighthouse.py, localcluster/kwok.py): a broker and two members, "east"
and "west", each with a kwok Node (relay and frontend pods run and are Ready, their
Services have ready endpoints), its About API cluster ID, the operator with `mcs`, and
a Submariner Lighthouse agent. Nobody here wrote Lighthouse: it validates our exports,
writes their conditions, and creates in every member the aggregated ServiceImport
(listing the exporting clusters) and EndpointSlices of each exporting cluster's
endpoints (for a ClusterIP Service: the Service's ClusterIP, ready while the Service
has a ready pod). `llama` runs in both clusters, `mistral` in west only.

Each test runs once per mcs-api CRD release:

- v0.1.0, what Lighthouse v0.20 targets: its conditions land (Valid=True, Ready=True);
- v0.5.2, our pinned release: `reason` must be non-empty there, so every Lighthouse
  status write with `reason: ""` is refused (422) and the conditions stay stale
  (Ready=False AwaitingExport). Real users with the newest CRDs meet exactly this.

The operator must be right in both: it never reads those conditions, never writes an
export's status or a ServiceImport, and writes nothing when Lighthouse writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from functools import partial
from typing import Any

import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.mcs import serviceexports
from dynamo_pool_operator.config import API_VERSION, KIND, parse_configuration
from dynamo_pool_operator.discover import command as discover_cmd
from dynamo_pool_operator.discover.view import ENDPOINT_SLICES
from dynamo_pool_operator.localcluster import dynamo, kwok, lighthouse
from dynamo_pool_operator.localcluster.assets import pinned_versions, resolve
from dynamo_pool_operator.localcluster.audit import AuditEvent
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, EVENTS, SERVICES, Resource
from tests import endpoints
from tests.e2e.chart_operator import DGDS, RELAYS, dgd, relay
from tests.e2e.observed import at_rest, cached_at, ready_pod_ips
from tests.harness import OPERATOR_AGENT, OperatorUnderTest, eventually
from tests.leaks import surviving

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

CLUSTERS = ("east", "west")
#: Which pools run where: llama in both clusters, mistral in west only.
POOLS = {"east": ["llama"], "west": ["llama", "mistral"]}
#: Both CRD releases serve v1alpha1; Lighthouse v0.20 reads and writes only that.
SERVICE_EXPORTS = serviceexports("v1alpha1")
SERVICE_IMPORTS = lighthouse.service_imports("v1alpha1")
OLD_MCS_API = pinned_versions()["LIGHTHOUSE_MCS_API_VERSION"]
NEW_MCS_API = pinned_versions()["MCS_API_VERSION"]
USER = "dpo-e2e-user"


def exports_of(pool: str) -> list[str]:
    return [names.relay_name(pool), names.component_service_name(pool, "Frontend")]


View = dict[str, tuple[list[str], list[str]]]


def wanted(where: dict[str, list[str]]) -> View:
    """Import name -> (the clusters it lists, the clusters it has ready endpoints from):
    both exactly where the pool runs."""
    out: dict[str, list[str]] = {}
    for cluster, pools in where.items():
        for pool in pools:
            for export in exports_of(pool):
                out.setdefault(export, []).append(cluster)
    return {name: (sorted(c), sorted(c)) for name, c in out.items()}


async def view(client: Client, namespace: str) -> View:
    """The Global Router's view from one cluster: every ServiceImport with the clusters
    it lists, and the clusters Lighthouse's EndpointSlices show a ready endpoint from."""
    imports = {
        i["metadata"]["name"]: sorted(
            c["cluster"] for c in (i.get("status") or {}).get("clusters") or []
        )
        for i in (await client.list(SERVICE_IMPORTS, namespace)).items
    }
    key, value = lighthouse.MANAGED_BY
    slices = await client.list(ENDPOINT_SLICES, namespace, label_selector=f"{key}={value}")
    ready: dict[str, set[str]] = {}
    for s in slices.items:
        meta_labels = s["metadata"].get("labels") or {}
        if endpoints.endpoint_addresses([s], ready=True):
            name = meta_labels.get("multicluster.kubernetes.io/service-name", "")
            ready.setdefault(name, set()).add(meta_labels.get(lighthouse.SOURCE_CLUSTER_LABEL, ""))
    return {name: (clusters, sorted(ready.get(name, ()))) for name, clusters in imports.items()}


@pytest.fixture(scope="module", params=[OLD_MCS_API, NEW_MCS_API], ids=lambda v: f"mcs-api-{v}")
def world(request: pytest.FixtureRequest) -> Iterator[lighthouse.World]:
    """Broker + east + west with kwok and Lighthouse, serving one mcs-api CRD release.
    Afterwards no process (by PID) and no directory of it survives."""
    assets = resolve()
    if why := assets.missing_peers() or lighthouse.namespaces_refused():
        pytest.skip(why)
    crd_dir = assets.lighthouse_mcs_crd_dir if request.param == OLD_MCS_API else assets.mcs_crd_dir
    assert crd_dir is not None
    assert crd_dir.name == f"mcs-api-{request.param}", crd_dir
    with lighthouse.world(assets, CLUSTERS, mcs_crd_dir=crd_dir) as w:
        pids, dirs = w.pids, w.dirs
        yield w
    leaked = surviving(pids)
    assert not leaked, f"processes survived the world: {leaked}"
    assert not [d for d in dirs if d.exists()], "control-plane directories survived"


@pytest.fixture
def ns(world: lighthouse.World) -> Iterator[str]:
    """MCS namespace sameness: the same fresh namespace in both clusters. Deleted
    afterwards, and waited for, so the next test's operators never meet it."""
    name = f"inf-{uuid.uuid4().hex[:8]}"
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
async def clients(world: lighthouse.World, user_agent: str) -> AsyncIterator[dict[str, Client]]:
    async with contextlib.AsyncExitStack() as stack:
        out = {}
        for cluster, cp in world.members.items():
            c = Client(load_kubeconfig(cp.kubeconfig), user_agent=user_agent)
            out[cluster] = await stack.enter_async_context(c)
        yield out


@contextlib.asynccontextmanager
async def operators(world: lighthouse.World) -> AsyncIterator[dict[str, OperatorUnderTest]]:
    cfg = parse_configuration(
        {"apiVersion": API_VERSION, "kind": KIND, "multiCluster": {"mcsImplementation": "mcs"}}
    )
    async with contextlib.AsyncExitStack() as stack:
        yield {
            cluster: await stack.enter_async_context(OperatorUnderTest(cp, cfg))
            for cluster, cp in world.members.items()
        }


async def create_when_free(client: Client, res: Resource, body: dict[str, Any]) -> None:
    """Create `body`; while the previous object of that name is still being collected
    (its DGD was deleted), wait for it to go."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while True:
        try:
            await client.create(res, body)
            return
        except errors.AlreadyExists:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.2)


async def run_dgd(client: Client, pool: str, namespace: str) -> None:
    """The DGD and what Dynamo's operator makes of it here: the frontend's Deployment and
    Service, owned by the DGD (they go with it)."""
    created = await client.create(DGDS, dgd(pool, namespace))
    deployment, service = dynamo.frontend(created)
    await create_when_free(client, DEPLOYMENTS, deployment)
    await create_when_free(client, SERVICES, service)


async def run_pool(client: Client, pool: str, namespace: str, cluster: str) -> None:
    await run_dgd(client, pool, namespace)
    await client.create(RELAYS, relay(pool, namespace, cluster))


async def sees(client: Client, namespace: str, want: View) -> bool:
    return await view(client, namespace) == want


async def every_cluster_sees(users: dict[str, Client], namespace: str, want: View) -> None:
    for cluster, user in users.items():
        try:
            await eventually(partial(sees, user, namespace, want), timeout=60, interval=0.2)
        except AssertionError:
            pytest.fail(f"{cluster} sees {await view(user, namespace)}, want {want}")


def relay_pods(pool: str) -> str:
    return ",".join(f"{k}={v}" for k, v in names.selector(pool).items())


def agent_status_writes(events: list[AuditEvent], export: str = "") -> list[AuditEvent]:
    return [
        e
        for e in events
        if e.user == lighthouse.AGENT_USER
        and e.resource == "serviceexports"
        and e.subresource == "status"
        and export in ("", e.name)
    ]


def shown(writes: list[AuditEvent]) -> list[tuple[str, str, str, str, int]]:
    return [(w.verb, w.resource, w.subresource, w.name, w.code) for w in writes]


async def test_each_pool_is_imported_from_where_it_runs_with_ready_endpoints_and_withdrawn(
    world: lighthouse.World, ns: str
) -> None:
    members = world.members
    since = {cluster: cp.audit.offset() for cluster, cp in members.items()}
    async with operators(world) as ops, clients(world, USER) as users:
        for cluster, pools in POOLS.items():
            for pool in pools:
                await run_pool(users[cluster], pool, ns, cluster)

        # 1. The Global Router's view, the same from both clusters: each pool imported
        # from exactly the clusters it runs in, with ready endpoints from each of them.
        await every_cluster_sees(users, ns, wanted(POOLS))
        for cluster, pools in POOLS.items():
            for pool in pools:
                assert await kwok.running_pods(users[cluster], ns, relay_pods(pool)), (
                    f"no relay pod of {pool} runs in {cluster}"
                )
                status = (await users[cluster].get(RELAYS, pool, ns))["status"]
                states = {e["name"]: e["state"] for e in status["exports"]}
                assert states == dict.fromkeys(exports_of(pool), "Exported"), status

        # 2. What Lighthouse wrote on our exports, per CRD release.
        await lighthouse_conditions_are_as_the_crds_allow(world, users, ns)

        # 3. Lighthouse writing an export's status makes the operator write nothing:
        # clear the conditions while east's agent is down, start it again (it writes
        # them anew, or tries: v0.5.2 refuses), wait until the operator's cache has the
        # export as it now is, and no write follows; one more reconcile writes nothing.
        for cluster, pools in POOLS.items():
            await lighthouse_writes_and_the_operator_stays_quiet(
                world, ops[cluster], users[cluster], cluster, ns, pools
            )

        # 4. llama withdrawn from east: east drops out of llama's imports and
        # endpoints in both clusters; nothing else moves.
        await users["east"].delete(DGDS, "llama", ns)
        await every_cluster_sees(users, ns, wanted({"east": [], "west": POOLS["west"]}))
        assert (await users["east"].list(SERVICE_EXPORTS, ns)).items == []

        # 5. ... and published again: back in.
        await run_dgd(users["east"], "llama", ns)
        await every_cluster_sees(users, ns, wanted(POOLS))

    # 6. ServiceImports and export status are the implementation's, never ours.
    for cluster, cp in members.items():
        ours = await asyncio.to_thread(
            cp.audit.writes, since[cluster], user_agent_prefix=OPERATOR_AGENT
        )
        theirs = [
            w
            for w in ours
            if w.resource == "serviceimports"
            or (w.resource == "serviceexports" and w.subresource == "status")
        ]
        assert theirs == [], f"{cluster}: the operator wrote {shown(theirs)}"
        assert any(w.resource == "serviceexports" for w in ours), "the check would be vacuous"


async def lighthouse_conditions_are_as_the_crds_allow(
    world: lighthouse.World, users: dict[str, Client], ns: str
) -> None:
    """v0.1.0: Valid=True and Ready=True land on every export. v0.5.2: Lighthouse's
    writes with an empty reason are refused, so Ready=True never lands."""

    async def conditions(cluster: str) -> dict[str, dict[str, tuple[str, str]]]:
        return {
            e["metadata"]["name"]: {
                c["type"]: (c["status"], c.get("reason", ""))
                for c in (e.get("status") or {}).get("conditions") or []
            }
            for e in (await users[cluster].list(SERVICE_EXPORTS, ns)).items
        }

    if world.mcs_api == OLD_MCS_API:
        for cluster in CLUSTERS:

            async def all_ready(cluster: str = cluster) -> bool:
                found = await conditions(cluster)
                return bool(found) and all(
                    c.get("Valid", ("",))[0] == "True" and c.get("Ready", ("",))[0] == "True"
                    for c in found.values()
                )

            try:
                await eventually(all_ready, timeout=60, interval=0.2)
            except AssertionError:
                pytest.fail(f"{cluster}: exports' conditions {await conditions(cluster)}")
        return
    for cluster, cp in world.members.items():
        events = await asyncio.to_thread(cp.audit.writes, 0)
        refused = [e for e in agent_status_writes(events) if e.code == 422]
        assert refused, f"{cluster}: no Lighthouse status write was refused under {world.mcs_api}"
        found = await conditions(cluster)
        assert not [n for n, c in found.items() if c.get("Ready", ("",))[0] == "True"], found


async def lighthouse_writes_and_the_operator_stays_quiet(
    world: lighthouse.World,
    op: OperatorUnderTest,
    user: Client,
    cluster: str,
    ns: str,
    pools: list[str],
) -> None:
    cp = world.members[cluster]
    export = exports_of(pools[0])[1]
    await at_rest(op)
    offset = cp.audit.offset()
    world.lighthouse.stop_agent(cluster)
    cleared = {"status": {"conditions": None}}
    await user.merge_patch(SERVICE_EXPORTS, export, cleared, ns, subresource="status")
    await asyncio.to_thread(world.lighthouse.start_agent, cluster)
    await asyncio.to_thread(world.lighthouse.wait_started, cluster)

    async def lighthouse_wrote() -> bool:
        events = await asyncio.to_thread(cp.audit.writes, offset)
        return bool(agent_status_writes(events, export))

    await eventually(lighthouse_wrote, timeout=60, interval=0.2)
    current = await user.get(SERVICE_EXPORTS, export, ns)
    rv = current["metadata"]["resourceVersion"]
    await eventually(partial(cached_at, op, ns, export, rv), timeout=30)
    await at_rest(op)
    # What Lighthouse says is shown (`Exported`, each export's line): the relay's status
    # may follow it. Nothing else is written: no export, no Deployment, no Service.
    writes = [
        w
        for w in await op.writes_since(offset)
        if w.resource not in ("leases", "events")
        and not (w.resource == "dynamopoolrelays" and w.subresource == "status")
    ]
    assert writes == [], f"{cluster}: the operator wrote {shown(writes)}"
    for pool in pools:
        again = await op.reconcile_again((ns, pool), include_events=True)
        # Lighthouse may still be rewriting another pool's conditions meanwhile; that
        # relay's status (and Event) following it is not this reconcile's write.
        others = [
            w
            for w in again
            if (w.resource == "dynamopoolrelays" and w.subresource == "status" and w.name != pool)
            or (w.resource == "events" and not w.name.startswith(f"{pool}."))
        ]
        again = [w for w in again if w not in others]
        assert again == [], f"{cluster}: reconciling {pool} again wrote {shown(again)}"


async def test_a_relay_scaled_to_zero_is_still_imported_but_with_no_ready_endpoint(
    world: lighthouse.World, ns: str
) -> None:
    async with operators(world), clients(world, USER) as users:
        for cluster in CLUSTERS:
            await run_pool(users[cluster], "llama", ns, cluster)
        both = wanted({c: ["llama"] for c in CLUSTERS})
        await every_cluster_sees(users, ns, both)

        await eventually(partial(condition_is, users["east"], ns, "RelayAvailable", "True"))

        await users["east"].merge_patch(RELAYS, "llama", {"spec": {"replicas": 0}}, ns)
        relay_svc = names.relay_name("llama")
        scaled = dict(both)
        scaled[relay_svc] = (list(CLUSTERS), ["west"])
        await every_cluster_sees(users, ns, scaled)
        assert await kwok.running_pods(users["east"], ns, relay_pods("llama")) == []
        scaled_to_zero = partial(
            condition_is, users["east"], ns, "RelayAvailable", "False", "ScaledToZero"
        )
        await eventually(scaled_to_zero)
        assert await condition_is(users["east"], ns, "Ready", "False", "ScaledToZero")

        await users["east"].merge_patch(RELAYS, "llama", {"spec": {"replicas": None}}, ns)
        await every_cluster_sees(users, ns, both)
        await eventually(partial(condition_is, users["east"], ns, "RelayAvailable", "True"))


async def condition_of(
    client: Client, ns: str, type_: str, pool: str = "llama"
) -> dict[str, Any] | None:
    relay = await client.get(RELAYS, pool, ns)
    status = relay.get("status") or {}
    if status.get("observedGeneration") != relay["metadata"]["generation"]:
        return None
    return next((c for c in status.get("conditions") or [] if c["type"] == type_), None)


async def condition_is(
    client: Client, ns: str, type_: str, status: str, reason: str = "", pool: str = "llama"
) -> bool:
    c = await condition_of(client, ns, type_, pool)
    return bool(c and c["status"] == status and (not reason or c["reason"] == reason))


async def kubectl_wait_ready(world: lighthouse.World, cluster: str, ns: str, timeout: int) -> int:
    """`kubectl wait --for=condition=Ready dynamopoolrelay/llama`, as a user would."""
    kubectl = resolve().kubectl
    assert kubectl is not None, "kubectl is built with the control plane"
    cp = world.members[cluster]
    proc = await asyncio.create_subprocess_exec(
        str(kubectl),
        f"--kubeconfig={cp.kubeconfig}",
        "wait",
        "--for=condition=Ready",
        "dynamopoolrelay/llama",
        f"--namespace={ns}",
        f"--timeout={timeout}s",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    return await proc.wait()


async def test_ready_means_importable_and_exported_shows_the_implementations_word(
    world: lighthouse.World, ns: str
) -> None:
    """`kubectl wait --for=condition=Ready` returns once the pool is importable in the
    other cluster — relay pods running, Lighthouse's Ready=True on its exports — and
    `Exported` shows what Lighthouse says, verbatim: relay Services of different shapes
    across clusters (`ConflictingType`), and under mcs-api v0.5.2 the stale
    `AwaitingExport` Lighthouse cannot update. A frontend whose Service does not exist is
    not exported at all (`Pending`, naming the Service)."""
    async with operators(world), clients(world, USER) as users:
        waiting = asyncio.create_task(kubectl_wait_ready(world, "east", ns, 90))
        await run_pool(users["east"], "llama", ns, "east")
        if world.mcs_api == OLD_MCS_API:
            assert await waiting == 0, "Ready never turned True"
            # Ready once Lighthouse confirmed the exports to the broker; west, which
            # syncs from the broker, follows within a few seconds (it is never seen
            # Ready with an export Lighthouse had not confirmed).
            east_only = wanted({"east": ["llama"]})
            await eventually(partial(sees, users["west"], ns, east_only), timeout=10)
            # Lighthouse may write `AwaitingExport` again for a moment while the broker
            # aggregates (the relay then says Pending, truthfully); it settles on Ready.
            confirmed = partial(
                condition_is, users["east"], ns, "Exported", "True", "ImplementationReady"
            )
            await eventually(confirmed, timeout=30)
            lines = (await users["east"].get(RELAYS, "llama", ns))["status"]["exports"]
            assert all(line["ready"]["status"] == "True" for line in lines), lines
        else:
            # Lighthouse's Valid=True/Ready=True never land (empty reasons are refused):
            # the operator claims nothing it was not told.
            async def stale() -> dict[str, Any] | None:
                c = await condition_of(users["east"], ns, "Exported")
                said = c is not None and "awaiting aggregation" in c["message"]
                return c if said and c["status"] == "Unknown" else None

            exported = await eventually(stale, timeout=60)
            assert exported["reason"] == "Pending"
            assert "(since " in exported["message"], "a stale word is shown with its age"
            assert await condition_is(users["east"], ns, "Ready", "False", "Pending")
            waiting.cancel()

        # The same pool in west with a ClusterIP relay Service where east's is headless:
        # Lighthouse reports the conflict. (Ports that differ are no conflict between
        # headless exports: Lighthouse imports the ports they share.)
        await run_dgd(users["west"], "llama", ns)
        body = relay("llama", ns, "west")
        body["spec"]["service"] = {"headless": False}
        await users["west"].create(RELAYS, body)

        async def conflicting() -> bool:
            for cluster in CLUSTERS:
                c = await condition_of(users[cluster], ns, "Exported")
                if c and c["status"] == "False" and c["reason"] == "ConflictingType":
                    return True
            return False

        await eventually(conflicting, timeout=60, interval=0.2)

        # A pool whose frontend Service nobody made: not exported (an export ahead of its
        # Service would claim the name), and the relay says which Service it waits for.
        await users["east"].create(DGDS, dgd("mistral", ns))
        await users["east"].create(RELAYS, relay("mistral", ns, "east"))
        pending = partial(
            condition_is, users["east"], ns, "Exported", "Unknown", "Pending", "mistral"
        )
        await eventually(pending, timeout=60, interval=0.2)
        c = await condition_of(users["east"], ns, "Exported", "mistral")
        assert c is not None
        assert "mistral-frontend: Service mistral-frontend does not exist" in c["message"], c
        exports = await users["east"].list(SERVICE_EXPORTS, ns)
        assert "mistral-frontend" not in {e["metadata"]["name"] for e in exports.items}


CYCLES = 10


# v0.1.0 only: there Lighthouse's status writes land, so they race the operator's
# deletes most; under v0.5.2 most are refused. Ten cycles take about two minutes.
@pytest.mark.parametrize("world", [OLD_MCS_API], indirect=True, ids=lambda v: f"mcs-api-{v}")
async def test_withdrawing_and_publishing_again_makes_no_conflicting_delete_nor_error_log(
    world: lighthouse.World, ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Lighthouse writes an export's status when its Service goes (`Valid=False
    ServiceUnavailable`), which changes the export's resourceVersion. The operator
    deletes an export with the resourceVersion it read, so a Service deleted before
    its export races those writes: the delete is refused (409).

    - The relay Service is the operator's: withdrawing its export *before* deleting
      it leaves Lighthouse nothing to write, so no delete of a relay export may be
      refused.
    - The frontend Service is Dynamo's: the garbage collector removes it with the DGD
      while the operator withdraws, an order nobody here controls, so a refused
      frontend-export delete can happen. It is a lost race (retried at once, then the
      export is gone, as the views show), logged below error level.

    Ten withdraw/publish cycles with Lighthouse at work, and no error-level log."""
    caplog.set_level(logging.DEBUG, logger="dynamo_pool_operator")
    east = world.members["east"]
    offset = east.audit.offset()
    async with operators(world), clients(world, USER) as users:
        for cluster in CLUSTERS:
            await run_pool(users[cluster], "llama", ns, cluster)
        both = wanted({c: ["llama"] for c in CLUSTERS})
        await every_cluster_sees(users, ns, both)
        for _ in range(CYCLES):
            await users["east"].delete(DGDS, "llama", ns)
            await every_cluster_sees(users, ns, wanted({"east": [], "west": ["llama"]}))
            await run_dgd(users["east"], "llama", ns)
            await every_cluster_sees(users, ns, both)

    ours = await asyncio.to_thread(east.audit.writes, offset, user_agent_prefix=OPERATOR_AGENT)
    deletes = [w for w in ours if w.verb == "delete" and w.resource == "serviceexports"]
    assert len(deletes) >= 2 * CYCLES, f"only {len(deletes)} export deletes: vacuous"
    refused = [w for w in deletes if w.code == 409]
    landed = [
        e
        for e in agent_status_writes(await asyncio.to_thread(east.audit.writes, offset))
        if e.code == 200
    ]
    relay_refused = [w for w in refused if w.name == names.relay_name("llama")]
    assert relay_refused == [], (
        f"{len(relay_refused)} deletes of the relay export were refused with 409 "
        f"({len(landed)} Lighthouse status writes landed meanwhile; all refused deletes: "
        f"{shown(refused)})"
    )
    errors_logged = [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.ERROR and r.name.startswith("dynamo_pool_operator")
    ]
    assert errors_logged == [], (
        f"error-level operator logs ({len(refused)} refused export deletes: "
        f"{shown(refused)}): {errors_logged}"
    )


async def imported_endpoints(client: Client, ns: str, name: str, source: str) -> list[str]:
    """The ready addresses Lighthouse imported for export `name` from cluster `source`."""
    key, value = lighthouse.MANAGED_BY
    selector = (
        f"{key}={value},multicluster.kubernetes.io/service-name={name},"
        f"{lighthouse.SOURCE_CLUSTER_LABEL}={source}"
    )
    slices = await client.list(ENDPOINT_SLICES, ns, label_selector=selector)
    return endpoints.endpoint_addresses(slices.items, ready=True)


async def relay_pod_ips(client: Client, ns: str, pool: str) -> list[str]:
    pods = (await client.list(kwok.PODS, ns, label_selector=relay_pods(pool))).items
    return sorted(p["status"]["podIP"] for p in pods if kwok.running(p))


async def test_the_pool_is_imported_as_its_relay_pods_and_follows_a_change_of_shape(
    world: lighthouse.World, ns: str
) -> None:
    """The relay Service is headless by default, so west imports east's relay as the
    relay pods' IPs (one endpoint per relay, as the Global Router identifies them);
    switched to a ClusterIP Service, the import follows to the ClusterIP, and back.
    Each switch withdraws the export and creates it again once Lighthouse has dropped
    the import of the old shape: kept in place, Lighthouse would call the new shape a
    conflict with its own earlier aggregate (`ConflictingType`)."""
    relay_svc = names.relay_name("llama")
    async with operators(world), clients(world, USER) as users:
        east, west = users["east"], users["west"]
        await run_pool(east, "llama", ns, "east")

        async def imported_as_pods() -> bool:
            ips = await relay_pod_ips(east, ns, "llama")
            got = await imported_endpoints(west, ns, relay_svc, "east")
            return len(ips) == 2 and got == ips

        await eventually(imported_as_pods, timeout=120, interval=0.3)

        await east.merge_patch(RELAYS, "llama", {"spec": {"service": {"headless": False}}}, ns)

        async def imported_as_cluster_ip() -> bool:
            svc = await east.get(SERVICES, relay_svc, ns)
            ip = svc["spec"].get("clusterIP")
            return ip not in (None, "None") and await imported_endpoints(
                west, ns, relay_svc, "east"
            ) == [ip]

        await eventually(imported_as_cluster_ip, timeout=120, interval=0.3)

        await east.merge_patch(RELAYS, "llama", {"spec": {"service": None}}, ns)
        try:
            await eventually(imported_as_pods, timeout=120, interval=0.3)
        except AssertionError:
            export = await east.get(SERVICE_EXPORTS, relay_svc, ns)
            imported = await west.get(SERVICE_IMPORTS, relay_svc, ns)
            pytest.fail(
                f"west imports {await imported_endpoints(west, ns, relay_svc, 'east')}, "
                f"relay pods {await relay_pod_ips(east, ns, 'llama')}; export status "
                f"{export.get('status')}; import {imported.get('spec')} {imported.get('status')}"
            )


# v0.1.0 only: under v0.5.2 Lighthouse's status writes with an empty reason are refused,
# so its Ready=True never lands next to the conflict.
@pytest.mark.parametrize("world", [OLD_MCS_API], indirect=True, ids=lambda v: f"mcs-api-{v}")
async def test_a_conflict_next_to_ready_is_still_imported_and_warned_about(
    world: lighthouse.World, ns: str
) -> None:
    """The same pool in both clusters, ClusterIP relay Services with ports that differ:
    Lighthouse marks an export `Conflict=True ConflictingPorts` and keeps it `Ready=True`
    (KEP-1645: the oldest export's ports win and the import goes on). That pool is still
    importable, so its relay says `Exported=True ReadyWithConflict` quoting Lighthouse,
    is Ready, and records a Warning; a refusal it is not. (Headless relay Services with
    different ports draw no conflict from Lighthouse v0.20.)"""
    async with operators(world), clients(world, USER) as users:
        await run_dgd(users["east"], "llama", ns)
        body = relay("llama", ns, "east")
        body["spec"]["service"] = {"headless": False}
        await users["east"].create(RELAYS, body)
        await run_dgd(users["west"], "llama", ns)
        body = relay("llama", ns, "west")
        body["spec"]["service"] = {"headless": False}
        body["spec"]["port"] = 9000
        await users["west"].create(RELAYS, body)

        seen: dict[str, Any] = {}

        async def conflicted() -> tuple[str, dict[str, Any]] | None:
            for cluster in CLUSTERS:
                export = await users[cluster].get(SERVICE_EXPORTS, names.relay_name("llama"), ns)
                said = {c["type"]: c for c in (export.get("status") or {}).get("conditions", [])}
                seen[cluster] = said
                conflict, ready = said.get("Conflict"), said.get("Ready")
                if (
                    conflict
                    and conflict["status"] == "True"
                    and ready
                    and ready["status"] == "True"
                ):
                    return cluster, conflict
            return None

        try:
            cluster, conflict = await eventually(conflicted, timeout=90, interval=0.2)
        except AssertionError as e:
            raise AssertionError(f"Lighthouse wrote: {seen}") from e
        assert conflict["reason"] == "ConflictingPorts", conflict
        exported = partial(
            condition_is, users[cluster], ns, "Exported", "True", "ReadyWithConflict"
        )
        await eventually(exported, timeout=30, interval=0.2)
        c = await condition_of(users[cluster], ns, "Exported")
        assert c is not None
        assert "ConflictingPorts" in c["message"], c
        assert await condition_is(users[cluster], ns, "Ready", "True", "Ready")

        async def warned() -> bool:
            events = (await users[cluster].list(EVENTS, ns)).items
            return any(
                e["reason"] == "ReadyWithConflict" and e["type"] == "Warning" for e in events
            )

        await eventually(warned, timeout=30)


async def discovered_from(
    world: lighthouse.World, cluster: str, ns: str, key: str | None = None
) -> tuple[int, dict[str, Any]]:
    """`discover -n NS [--pool KEY] -o json` run against `cluster`, as a user runs it."""
    out, err = io.StringIO(), io.StringIO()
    opts = discover_cmd.Options(
        kubeconfig=str(world.members[cluster].kubeconfig), namespace=ns, output="json", pool=key
    )
    code = await discover_cmd.run(opts, out=out, err=err)
    assert code in (0, 1), err.getvalue()
    return code, json.loads(out.getvalue())


async def test_discover_in_west_finds_the_east_pool_as_the_router_would(
    world: lighthouse.World, ns: str
) -> None:
    """Read from west's imported EndpointSlices, written by the real Lighthouse agent: the
    east pool keyed by the east relay's cluster ID, live while its relay pods are Ready,
    not live scaled to 0, and gone once withdrawn."""
    async with operators(world), clients(world, USER) as users:
        east = users["east"]
        await run_pool(east, "llama", ns, "east")

        async def cluster_id() -> str:
            return str(
                ((await east.get(RELAYS, "llama", ns)).get("status") or {}).get("clusterId") or ""
            )

        key = f"{await eventually(cluster_id, timeout=60, interval=0.2)}/{ns}/llama"
        seen: list[Any] = []

        async def live_with_the_relay_pods() -> bool:
            """Live, its ready relay endpoints exactly east's Ready relay pods (read anew:
            a rollout replaces them)."""
            pods = await ready_pod_ips(east, ns, relay_pods("llama"))
            code, doc = await discovered_from(world, "west", ns, key)
            seen[:] = [code, doc, pods]
            if code != 0 or not pods:
                return False
            (pool,) = doc["pools"]
            addresses = sorted(e["address"] for e in pool["relay"]["endpoints"] if e["ready"])
            return bool(pool["live"]) and addresses == pods

        try:
            await eventually(live_with_the_relay_pods, timeout=60, interval=0.5)
        except AssertionError:
            pytest.fail(f"west does not find {key} live with its relay pods: {seen}")

        async def with_its_frontend() -> bool:
            """Every pool west finds is east's, keyed by the east relay's cluster ID, with
            its frontend and nothing wrong."""
            code, doc = await discovered_from(world, "west", ns)
            seen[:] = [code, doc]
            keys = ["/".join((p["cluster"], p["namespace"], p["name"])) for p in doc["pools"]]
            if code != 0 or keys != [key]:
                return False
            (pool,) = doc["pools"]
            return [f["service"] for f in pool["frontends"]] == ["llama-frontend"] and (
                pool["problems"] == []
            )

        try:
            await eventually(with_its_frontend, timeout=60, interval=0.5)
        except AssertionError:
            pytest.fail(f"west does not find {key} alone with its frontend: {seen}")

        async def not_live() -> bool:
            code, doc = await discovered_from(world, "west", ns, key)
            return code == 1 and all(not p["live"] for p in doc["pools"])

        await east.merge_patch(RELAYS, "llama", {"spec": {"replicas": 0}}, ns)
        await eventually(not_live, timeout=60, interval=0.5)

        await east.merge_patch(RELAYS, "llama", {"spec": {"replicas": None}}, ns)
        try:
            await eventually(live_with_the_relay_pods, timeout=60, interval=0.5)
        except AssertionError:
            pytest.fail(f"west does not find {key} live again with its relay pods: {seen}")

        async def gone() -> bool:
            code, doc = await discovered_from(world, "west", ns, key)
            return code == 1 and doc["pools"] == []

        await east.delete(DGDS, "llama", ns)
        await eventually(gone, timeout=60, interval=0.5)
