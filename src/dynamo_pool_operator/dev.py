"""`dynamo-pool-operator dev`: the whole thing on this machine, with no cluster.

Starts the local control plane (the same one the tests use) with a kwok Node, so pods
are scheduled and become Ready; installs every CRD the operator can use, creates a
sample pool (its DGD, the frontend Deployment and Service Dynamo's operator would make,
and its relay), runs the real operator process logic against it, and prints what
happened and how to look: the pool's exports and its relay pods Running.

`--clusters 2` shows the multi-cluster picture instead: "east" and "west", each with a
kwok Node, its cluster ID and the operator, joined through a broker by Submariner
Lighthouse agents (localcluster/lighthouse.py). The sample pool runs in east; the report
ends with the pool as the Global Router in west finds it: `discover`'s table over the
EndpointSlices Lighthouse imported there, printed once the pool is live in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from dynamo_pool_operator import logs, process
from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.conditions import ConditionType, ExportState, Status
from dynamo_pool_operator.api.mcs import (
    Confirmation,
    Implementation,
    clusterproperties,
    serviceexports,
)
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.discover.find import Discovered, Mode
from dynamo_pool_operator.discover.view import discovered, format_table
from dynamo_pool_operator.exitcodes import EXIT_FAILURE
from dynamo_pool_operator.pool import controller as relay_controller
from dynamo_pool_operator.runtime import Client, errors, load_kubeconfig
from dynamo_pool_operator.runtime.objects import DEPLOYMENTS, SERVICES, Resource, find_condition

if TYPE_CHECKING:  # the local control plane is imported only when dev runs
    from dynamo_pool_operator.localcluster.assets import Assets
    from dynamo_pool_operator.localcluster.lighthouse import World

log = logging.getLogger(__name__)

NAMESPACE = "dynamo-demo"
POOL = "llama"
CLUSTER_ID = "dev-cluster"
#: `--clusters 2`: the pool runs in the first, the report shows it from the second.
TWO_CLUSTERS = ("east", "west")

RELAYS = relay_controller.RELAYS
DGDS = relay_controller.dgd_resource("v1beta1")
CLUSTER_PROPERTIES = clusterproperties("v1beta1")
SERVICEEXPORTS = serviceexports("v1beta1")


def sample_objects(cluster_id: str = CLUSTER_ID) -> list[tuple[Resource, dict[str, Any]]]:
    """A pool: a DGD with a frontend and a decode worker, its relay, and the cluster's ID."""
    return [
        (
            CLUSTER_PROPERTIES,
            {
                "apiVersion": CLUSTER_PROPERTIES.api_version,
                "kind": "ClusterProperty",
                "metadata": {"name": "cluster.clusterset.k8s.io"},
                "spec": {"value": cluster_id},
            },
        ),
        (
            DGDS,
            {
                "apiVersion": DGDS.api_version,
                "kind": DGDS.kind,
                "metadata": {"name": POOL, "namespace": NAMESPACE},
                "spec": {
                    "backendFramework": "vllm",
                    "components": [
                        {"name": "Frontend", "type": "frontend", "replicas": 1},
                        {"name": "VllmDecodeWorker", "type": "decode", "replicas": 2},
                    ],
                },
            },
        ),
        (
            RELAYS,
            {
                "apiVersion": RELAYS.api_version,
                "kind": RELAYS.kind,
                "metadata": {"name": POOL, "namespace": NAMESPACE},
                "spec": {"clusterId": cluster_id},
            },
        ),
    ]


async def _create_samples(client: Client, cluster_id: str = CLUSTER_ID) -> None:
    from dynamo_pool_operator.localcluster import dynamo

    for res, body in sample_objects(cluster_id):
        with contextlib.suppress(errors.AlreadyExists):
            created = await client.create(res, body)
            if res == DGDS:
                # What Dynamo's operator would add: the frontend's pods and Service.
                deployment, service = dynamo.frontend(created)
                await client.create(DEPLOYMENTS, deployment)
                await client.create(SERVICES, service)


async def _until(probe: Callable[[], Awaitable[Any]], what: str, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(errors.NotFound):
            found = await probe()
            if found:
                return found
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{what}: not within {timeout:.0f}s")


async def _wait_published(client: Client, timeout: float = 60) -> dict[str, Any]:
    async def published() -> dict[str, Any] | None:
        """Ready, and every export the status lists is made (with an implementation set)."""
        relay = await client.get(RELAYS, POOL, NAMESPACE)
        status = relay.get("status") or {}
        ready = find_condition(status.get("conditions"), ConditionType.READY) or {}
        if ready.get("status") != Status.TRUE:
            return None
        if any(e.get("state") != ExportState.EXPORTED for e in status.get("exports") or []):
            return None
        return relay

    found: dict[str, Any] = await _until(published, "the sample pool was not published", timeout)
    return found


async def _relay_pods(client: Client) -> list[str]:
    """The relay's pods, once as many run as its Deployment wants."""
    from dynamo_pool_operator.localcluster import kwok

    selector = ",".join(f"{k}={v}" for k, v in names.selector(POOL).items())

    async def running() -> list[str] | None:
        deployment = await client.get(DEPLOYMENTS, names.relay_name(POOL), NAMESPACE)
        pods = await kwok.running_pods(client, NAMESPACE, selector)
        return pods if pods and len(pods) >= deployment["spec"].get("replicas", 1) else None

    found: list[str] = await _until(running, "the relay pods were not Running")
    return found


def _report(
    relay: dict[str, Any],
    exports: list[str],
    pods: list[str] | None,
    kubeconfig: str,
    kubectl: str | None,
    where: str = "",
) -> list[str]:
    status = relay["status"]
    ready = find_condition(status["conditions"], ConditionType.READY)
    assert ready is not None  # the pool was waited for until Ready
    # A Ready pool needs no reason; one that is not says which part is not and why.
    why = (
        ""
        if ready["status"] == Status.TRUE
        else f" ({ready['reason']}: {ready.get('message', '')})"
    )
    lines = [
        "",
        f"Pool {NAMESPACE}/{POOL}{where}: Ready={ready['status']}{why} "
        f"relay Service {status.get('serviceName')} clusterId {status.get('clusterId') or '-'}",
    ]
    for e in status.get("exports") or []:
        lines.append(f"  export {e['name']}: {e['state']} {e.get('reason', '')}".rstrip())
    if exports:
        lines.append(f"  ServiceExports in {NAMESPACE}: {', '.join(exports)}")
    if pods is not None:
        lines.append(
            f"  relay pods Running: {', '.join(pods)} "
            "(on a kwok Node: scheduled and Ready, no container runs)"
        )
    k = kubectl or "kubectl"
    lines += [
        "",
        "Look at it:",
        f"  export KUBECONFIG={kubeconfig}",
        f"  {k} get dynamopoolrelays,deployments,pods,services,serviceexports -n {NAMESPACE}",
        f"  {k} describe dynamopoolrelay {POOL} -n {NAMESPACE}",
        f"  {k} get events.events.k8s.io -n {NAMESPACE}",
    ]
    return lines


async def _export_names(client: Client) -> list[str]:
    with contextlib.suppress(errors.ApiError):
        return [e["metadata"]["name"] for e in (await client.list(SERVICEEXPORTS, NAMESPACE)).items]
    return []


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


async def run(
    config: OperatorConfiguration, *, exit_when_ready: bool = False, clusters: int = 1
) -> int:
    if clusters == 2:
        return await _run_two(config, exit_when_ready=exit_when_ready)
    if clusters != 1:
        raise ValueError("dev runs one cluster or two")
    from dynamo_pool_operator.localcluster.assets import resolve
    from dynamo_pool_operator.localcluster.controlplane import ControlPlane
    from dynamo_pool_operator.localcluster.crds import default_crds

    assets = await asyncio.to_thread(resolve)
    nodes = 1 if assets.kwok is not None and assets.kube_controller_manager is not None else 0
    if not nodes:
        print(f"no pods: {assets.missing_peers('kwok')}", file=sys.stderr)
    cp = ControlPlane(assets=assets, crds=default_crds(assets.mcs_crd_dir), nodes=nodes)
    await asyncio.to_thread(cp.start)
    try:
        print(f"control plane up at {cp.url} (kubeconfig {cp.kubeconfig})", file=sys.stderr)
        cp.create_namespace(NAMESPACE)
        stop = asyncio.Event()
        _stop_on_signals(stop)
        # One replica on a private control plane: no Lease needed.
        cfg = _without_leader_election(dev_configuration(config))
        operator_task = asyncio.create_task(
            process.run(cfg, kubeconfig=str(cp.kubeconfig), stop=stop)
        )
        async with Client(
            load_kubeconfig(cp.kubeconfig), user_agent="dynamo-pool-operator-dev"
        ) as c:
            await _create_samples(c)
            relay = await _wait_published(c)
            pods = await _relay_pods(c) if nodes else None
            kubectl = str(assets.kubectl) if assets.kubectl else None
            lines = _report(relay, await _export_names(c), pods, str(cp.kubeconfig), kubectl)
            print("\n".join([*lines, ""]), flush=True)
        if exit_when_ready:
            stop.set()
        else:
            print("The operator keeps running; Ctrl-C stops it and the control plane.", flush=True)
        return await operator_task
    finally:
        await asyncio.to_thread(cp.stop)


async def _run_two(config: OperatorConfiguration, *, exit_when_ready: bool) -> int:
    from dynamo_pool_operator.localcluster import lighthouse
    from dynamo_pool_operator.localcluster.assets import resolve

    assets = await asyncio.to_thread(resolve)
    why = assets.missing_peers() or lighthouse.namespaces_refused()
    if why or assets.lighthouse_mcs_crd_dir is None:
        print(f"dev --clusters 2 needs kwok and Lighthouse: {why}", file=sys.stderr)
        return EXIT_FAILURE
    # The mcs-api release Lighthouse targets, so its conditions land (under the newer
    # release the tests pin they are refused: docs/testing.md).
    started = lighthouse.world(assets, TWO_CLUSTERS, mcs_crd_dir=assets.lighthouse_mcs_crd_dir)
    stack = contextlib.ExitStack()
    world = await asyncio.to_thread(stack.enter_context, started)
    try:
        return await _two_clusters(world, config, assets, exit_when_ready=exit_when_ready)
    finally:
        await asyncio.to_thread(stack.close)


async def _two_clusters(
    world: World, config: OperatorConfiguration, assets: Assets, *, exit_when_ready: bool
) -> int:
    for cluster, cp in world.members.items():
        cp.create_namespace(NAMESPACE)
        print(f"{cluster} up at {cp.url} (kubeconfig {cp.kubeconfig})", file=sys.stderr)
    stop = asyncio.Event()
    _stop_on_signals(stop)
    cfg = _without_leader_election(dev_configuration(config, implementation_runs=True))
    tasks = [  # each operator's every log line says cluster=<its cluster>
        asyncio.create_task(
            process.run(cfg, kubeconfig=str(cp.kubeconfig), stop=stop),
            context=logs.context(cluster=cluster),
        )
        for cluster, cp in world.members.items()
    ]
    try:
        print("\n".join(await _as_west_sees_it(world, assets)), flush=True)
    except BaseException:
        stop.set()  # the operators first: the clusters go next
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    if exit_when_ready:
        stop.set()
    else:
        print("The operators keep running; Ctrl-C stops them and the clusters.", flush=True)
    return max(await asyncio.gather(*tasks))


async def _as_west_sees_it(world: World, assets: Assets) -> list[str]:
    """The sample pool in east, then the report: east's view, and the pool as the router
    in west finds it, once live there with every relay pod and its frontend."""
    east, west = TWO_CLUSTERS
    agent = "dynamo-pool-operator-dev"
    async with (
        Client(load_kubeconfig(world.members[east].kubeconfig), user_agent=agent) as ec,
        Client(load_kubeconfig(world.members[west].kubeconfig), user_agent=agent) as wc,
    ):
        await _create_samples(ec, east)
        relay = await _wait_published(ec)
        pods = await _relay_pods(ec)
        exports = [e["name"] for e in relay["status"].get("exports") or []]
        if not exports:
            raise RuntimeError("the configuration exports nothing: see multiCluster")
        key = f"{relay['status'].get('clusterId') or east}/{NAMESPACE}/{POOL}"
        found = await _until(
            lambda: _live(wc, key, len(pods)), f"the router in {west} does not find {key} live"
        )
    kubectl = str(assets.kubectl) if assets.kubectl else "kubectl"
    lines = _report(
        relay, exports, pods, str(world.members[east].kubeconfig), kubectl, f" in {east}"
    )
    lines += ["", *as_seen_from(found, west)]
    lines += [
        "",
        f"  (Lighthouse imports a headless Service, as the relay's is, as {east}'s Ready "
        "pod IPs, and a ClusterIP Service as its ClusterIP)",
        f"  export KUBECONFIG={world.members[west].kubeconfig}",
        f"  dynamo-pool-operator discover -n {NAMESPACE}",
        f"  {kubectl} get serviceimports,endpointslices -n {NAMESPACE}",
        "",
    ]
    return lines


def as_seen_from(found: Discovered, cluster: str) -> list[str]:
    """`discover -n NAMESPACE`'s table, as read in `cluster`, under its heading."""
    heading = (
        f"As {cluster} sees it (the Global Router's view: "
        f"dynamo-pool-operator discover -n {NAMESPACE}):"
    )
    return [heading, *(f"  {line}" if line else "" for line in format_table(found).splitlines())]


async def _live(client: Client, key: str, relay_pods: int) -> Discovered | None:
    """What the router finds, once pool `key` is live with a ready endpoint for each
    relay pod and nothing wrong (its frontend imported and ready)."""
    found = await discovered(client, Mode.MCS, NAMESPACE)
    pool = found.pool(key)
    if pool is None or not pool.live or pool.problems or len(pool.relay.ready) < relay_pods:
        return None
    return found


def dev_configuration(
    config: OperatorConfiguration, *, implementation_runs: bool = False
) -> OperatorConfiguration:
    """With the default configuration (no --config), dev exports through standard MCS,
    so the sample pool shows the whole feature (its control plane serves the MCS and
    About APIs). With one cluster no MCS implementation runs, so nothing will ever write
    a condition on the exports: `confirmation: none` (as for Karmada or AWS Cloud Map).
    With two, Submariner Lighthouse writes them: `valid`, the default for `mcs` (as
    for Cilium and Antrea). A configuration file is used as written."""
    if config != OperatorConfiguration():
        return config
    multi_cluster = dataclasses.replace(config.multi_cluster, mcs_implementation=Implementation.MCS)
    if not implementation_runs:
        multi_cluster = dataclasses.replace(multi_cluster, confirmation=Confirmation.NONE)
    return dataclasses.replace(config, multi_cluster=multi_cluster)


def _without_leader_election(config: OperatorConfiguration) -> OperatorConfiguration:
    le = dataclasses.replace(config.leader_election, enabled=False)
    server = dataclasses.replace(
        config.server, metrics_address="127.0.0.1:0", health_probe_address="127.0.0.1:0"
    )
    return dataclasses.replace(config, leader_election=le, server=server)
