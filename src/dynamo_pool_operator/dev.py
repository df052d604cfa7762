"""`dynamo-pool-operator dev`: the whole thing on this machine, with no cluster.

Starts the local control plane (the same one the tests use), installs every CRD
the operator can use, creates a sample pool, runs the real operator process
logic against it, and prints what happened and how to look.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import sys
import time
from typing import Any

from . import process
from .api.mcs import Implementation, clusterproperties, serviceexports
from .config import OperatorConfiguration
from .poolrelay import controller as relay_controller
from .runtime import errors
from .runtime.auth import load_kubeconfig
from .runtime.client import Client
from .runtime.resources import Resource

log = logging.getLogger(__name__)

NAMESPACE = "dynamo-demo"
POOL = "llama"
CLUSTER_ID = "dev-cluster"

RELAYS = relay_controller.RELAYS
DGDS = relay_controller.dgd_resource("v1beta1")
CLUSTER_PROPERTIES = clusterproperties("v1beta1")
SERVICEEXPORTS = serviceexports("v1beta1")


def sample_objects() -> list[tuple[Resource, dict[str, Any]]]:
    """A pool: a DGD with a frontend and a decode worker, its relay, and the cluster's ID."""
    return [
        (
            CLUSTER_PROPERTIES,
            {
                "apiVersion": CLUSTER_PROPERTIES.api_version,
                "kind": "ClusterProperty",
                "metadata": {"name": "cluster.clusterset.k8s.io"},
                "spec": {"value": CLUSTER_ID},
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
                "spec": {"clusterId": CLUSTER_ID},
            },
        ),
    ]


async def _create_samples(client: Client) -> None:
    for res, body in sample_objects():
        with contextlib.suppress(errors.AlreadyExists):
            await client.create(res, body)


async def _wait_published(client: Client, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        relay = await client.get(RELAYS, POOL, NAMESPACE)
        status = relay.get("status") or {}
        conds = {c["type"]: c for c in status.get("conditions") or []}
        if conds.get("Ready", {}).get("status") == "True":
            return relay
        await asyncio.sleep(0.2)
    raise TimeoutError("the sample pool was not published in time")


def _report(relay: dict[str, Any], exports: list[str], kubeconfig: str, kubectl: str | None) -> str:
    status = relay["status"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    lines = [
        "",
        f"Pool {NAMESPACE}/{POOL}: Ready={ready['status']} ({ready['reason']}) "
        f"relay Service {status.get('serviceName')} clusterId {status.get('clusterId') or '-'}",
    ]
    for e in status.get("exports") or []:
        lines.append(f"  export {e['name']}: {e['state']} {e.get('reason', '')}".rstrip())
    if exports:
        lines.append(f"  ServiceExports in {NAMESPACE}: {', '.join(exports)}")
    k = kubectl or "kubectl"
    lines += [
        "",
        "Look at it:",
        f"  export KUBECONFIG={kubeconfig}",
        f"  {k} get dynamopoolrelays,deployments,services,serviceexports -n {NAMESPACE}",
        f"  {k} describe dynamopoolrelay {POOL} -n {NAMESPACE}",
        f"  {k} get events.events.k8s.io -n {NAMESPACE}",
        "",
    ]
    return "\n".join(lines)


async def run(config: OperatorConfiguration, *, exit_when_ready: bool = False) -> int:
    from .testing.assets import resolve
    from .testing.controlplane import ControlPlane
    from .testing.crds import default_crds

    assets = await asyncio.to_thread(resolve)
    cp = ControlPlane(assets=assets, crds=default_crds(assets.mcs_crd_dir))
    await asyncio.to_thread(cp.start)
    try:
        print(f"control plane up at {cp.url} (kubeconfig {cp.kubeconfig})", file=sys.stderr)
        cp.create_namespace(NAMESPACE)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
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
            exports: list[str] = []
            with contextlib.suppress(errors.ApiError):
                exports = [
                    e["metadata"]["name"] for e in (await c.list(SERVICEEXPORTS, NAMESPACE)).items
                ]
            kubectl = str(assets.kubectl) if assets.kubectl else None
            print(_report(relay, exports, str(cp.kubeconfig), kubectl), flush=True)
        if exit_when_ready:
            stop.set()
        else:
            print("The operator keeps running; Ctrl-C stops it and the control plane.", flush=True)
        return await operator_task
    finally:
        await asyncio.to_thread(cp.stop)


def dev_configuration(config: OperatorConfiguration) -> OperatorConfiguration:
    """With the default configuration (no --config), dev exports through standard MCS,
    so the sample pool shows the whole feature (its control plane serves the MCS and
    About APIs). A configuration file is used as written."""
    if config != OperatorConfiguration():
        return config
    return dataclasses.replace(
        config,
        multi_cluster=dataclasses.replace(
            config.multi_cluster, mcs_implementation=Implementation.MCS.value
        ),
    )


def _without_leader_election(config: OperatorConfiguration) -> OperatorConfiguration:
    le = dataclasses.replace(config.leader_election, enabled=False)
    server = dataclasses.replace(
        config.server, metrics_address="127.0.0.1:0", health_probe_address="127.0.0.1:0"
    )
    return dataclasses.replace(config, leader_election=le, server=server)
