"""What the bench creates: pools (a DGD with two frontends and a worker, the frontends'
Services Dynamo's operator would make, and its DynamoPoolRelay), the ClusterProperty,
and where they live."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.mcs import clusterproperties, serviceexports
from dynamo_pool_operator.localcluster import dynamo
from dynamo_pool_operator.pool.controller import RELAYS as RELAYS
from dynamo_pool_operator.pool.controller import dgd_resource
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, NAMESPACES, SERVICES

DGDS = dgd_resource("v1beta1")
EXPORTS = serviceexports("v1beta1")
CLUSTER_PROPERTIES = clusterproperties("v1beta1")
CLUSTER_ID_PROPERTY = "cluster.clusterset.k8s.io"
CLUSTER_ID = "bench-east"
WATCHED = (RELAYS, EXPORTS, DEPLOYMENTS, SERVICES)

#: Pools per namespace: many pools per namespace, as in a real fleet.
POOLS_PER_NAMESPACE = 100
WORKER = {"name": "decode", "type": "decode", "replicas": 1}


def components(chat: str = "Chat") -> list[dict[str, Any]]:
    return [
        {"name": "Frontend", "type": "frontend", "replicas": 1},
        {"name": chat, "type": "frontend", "replicas": 1},
        WORKER,
    ]


def frontend_services(dgd: dict[str, Any]) -> list[dict[str, Any]]:
    """The Services Dynamo's operator makes for the frontends of `dgd` as the API server
    returned it, controlled by it: a frontend is exported only once its Service exists
    and is the DGD's."""
    return [
        dynamo.frontend(dgd, c["name"])[1]
        for c in dgd["spec"]["components"]
        if c["type"] == "frontend"
    ]


async def create_dgd(client: Client, ns: str, name: str) -> None:
    """The DGD and what Dynamo's operator makes of it that the operator reads: its
    frontends' Services."""
    made = await client.create(DGDS, dgd_body(ns, name))
    for service in frontend_services(made):
        await client.create(SERVICES, service)


async def rename_chat(client: Client, ns: str, pool: str, chat: str) -> list[float]:
    """The DGD's second frontend becomes `chat`, and Dynamo's operator makes its Service
    (a frontend is exported once its Service exists): the operator's work starts there.
    Each write's round trip, in ms: what one write takes at the server meanwhile."""
    sent = time.perf_counter()
    dgd = await client.merge_patch(DGDS, pool, {"spec": {"components": components(chat)}}, ns)
    patched = time.perf_counter()
    await client.create(SERVICES, dynamo.frontend(dgd, chat)[1])
    made = time.perf_counter()
    return [round((patched - sent) * 1000, 2), round((made - patched) * 1000, 2)]


async def delete_dgd(client: Client, ns: str, name: str) -> None:
    """The DGD, and its frontends' Services as the garbage collector would remove them
    (the bench's control plane runs none)."""
    await client.delete(DGDS, name, ns)
    for c in components():
        if c["type"] == "frontend":
            with contextlib.suppress(errors.NotFound):
                await client.delete(SERVICES, names.component_service_name(name, c["name"]), ns)


def pool_names(n: int, prefix: str) -> list[tuple[str, str]]:
    """(namespace, pool) for n pools, POOLS_PER_NAMESPACE to a namespace."""
    return [(f"{prefix}-{i // POOLS_PER_NAMESPACE:03d}", f"p{i:05d}") for i in range(n)]


def dgd_body(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": DGDS.api_version,
        "kind": DGDS.kind,
        "metadata": {"name": name, "namespace": ns},
        "spec": {"components": components()},
    }


def relay_body(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": RELAYS.api_version,
        "kind": RELAYS.kind,
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterId": CLUSTER_ID},
    }


async def bounded(jobs: Iterable[Callable[[], Awaitable[Any]]], concurrency: int) -> list[Any]:
    """Run the jobs with at most `concurrency` in flight; results in order."""
    sem = asyncio.Semaphore(concurrency)

    async def one(job: Callable[[], Awaitable[Any]]) -> Any:
        async with sem:
            return await job()

    return list(await asyncio.gather(*(one(j) for j in jobs)))


async def create_namespaces(client: Client, names: Iterable[str]) -> None:
    for ns in sorted(set(names)):
        await client.create(NAMESPACES, {"metadata": {"name": ns}})


async def set_cluster_id(client: Client, value: str = CLUSTER_ID) -> None:
    await client.apply(
        CLUSTER_PROPERTIES,
        {
            "apiVersion": CLUSTER_PROPERTIES.api_version,
            "kind": "ClusterProperty",
            "metadata": {"name": CLUSTER_ID_PROPERTY},
            "spec": {"value": value},
        },
        field_manager="dpo-bench",
        force=True,
    )


async def create_pools(
    client: Client, pools: list[tuple[str, str]], *, dgd: bool = True, concurrency: int = 32
) -> dict[tuple[str, str], str]:
    """Create the pools (DGD + relay, or relay only); returns each relay's uid."""
    await create_namespaces(client, (ns for ns, _ in pools))

    async def make(ns: str, name: str) -> tuple[tuple[str, str], str]:
        if dgd:
            await create_dgd(client, ns, name)
        relay = await client.create(RELAYS, relay_body(ns, name))
        return (ns, name), str(relay["metadata"]["uid"])

    pairs = await bounded([functools.partial(make, ns, n) for ns, n in pools], concurrency)
    return dict(pairs)


#: Unrelated Deployments per namespace (`--unrelated-deployments`).
UNRELATED_PER_NAMESPACE = 1000


def unrelated_deployment(ns: str, name: str) -> dict[str, Any]:
    """Another team's workload: a Deployment of no pool, with a pod template of the size
    real ones have (two containers, env values, probes, resources; ~3 kB of JSON). No
    pods: 0 replicas (the bench control plane has no nodes)."""
    app = {"app": name, "team": ns}
    env = [{"name": f"SETTING_{i}", "value": f"value-{name}-{i}-" + "x" * 24} for i in range(20)]
    env.append({"name": "API_TOKEN", "value": f"not-a-real-secret-{name}"})
    container = {
        "image": "registry.example.com/team/app:1.2.3",
        "env": env,
        "ports": [{"name": "http", "containerPort": 8080}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}},
        "livenessProbe": {"httpGet": {"path": "/live", "port": "http"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": app},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": app},
            "template": {
                "metadata": {"labels": app},
                "spec": {
                    "containers": [
                        {**container, "name": "app"},
                        {**container, "name": "sidecar", "env": env[:5]},
                    ]
                },
            },
        },
    }


async def create_unrelated_deployments(client: Client, n: int, concurrency: int = 32) -> None:
    """`n` Deployments of no pool, `UNRELATED_PER_NAMESPACE` to a namespace."""
    where = [
        (f"bench-unrelated-{i // UNRELATED_PER_NAMESPACE:02d}", f"app-{i:05d}") for i in range(n)
    ]
    await create_namespaces(client, (ns for ns, _ in where))

    async def make(ns: str, name: str) -> None:
        await client.create(DEPLOYMENTS, unrelated_deployment(ns, name))

    await bounded([functools.partial(make, ns, name) for ns, name in where], concurrency)
