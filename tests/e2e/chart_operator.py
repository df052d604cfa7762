"""Running the operator as the chart's ServiceAccount, in process or as its replicas.

The chart e2e and security tests both render the chart, apply everything but its
Deployment, mint a token for the chart's ServiceAccount (as the kubelet would) and run
the real `process.run` with the rendered configuration under that identity. This module
is that procedure once, so the two suites cannot drift apart in how they set it up.
`replicas_running` runs the Deployment's replicas instead: one `dynamo-pool-operator
run` process per pod, each with its own metrics registry and listeners.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamo_pool_operator import process
from dynamo_pool_operator.api.mcs import clusterproperties, serviceexports
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.localcluster import dynamo
from dynamo_pool_operator.localcluster.controlplane import ControlPlane, free_port
from dynamo_pool_operator.pool.controller import RELAYS as RELAYS
from dynamo_pool_operator.pool.controller import dgd_resource
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import EVENTS, LEASES, SERVICES
from tests.e2e.chart_helpers import one, rendered_configuration, template

DGDS = dgd_resource("v1beta1")
SERVICEEXPORTS = serviceexports("v1beta1")
CLUSTER_PROPERTIES = clusterproperties("v1beta1")
CLUSTER_ID_PROPERTY = "cluster.clusterset.k8s.io"

POOL = "llama"
RELAY_SVC = f"{POOL}-pool-relay"
FRONTEND_SVC = f"{POOL}-frontend"


@dataclasses.dataclass(frozen=True)
class Release:
    name: str
    namespace: str


@contextlib.contextmanager
def new_release(cp: ControlPlane, prefix: str) -> Iterator[Release]:
    """A release namespace; afterwards it and the release's cluster-scoped RBAC and
    admission policy go."""
    suffix = uuid.uuid4().hex[:8]
    rel = Release(f"{prefix}-{suffix}", f"dpo-{suffix}")
    cp.create_namespace(rel.namespace)
    try:
        yield rel
    finally:
        cp.delete_namespace(rel.namespace)
        selector = f"labelSelector=app.kubernetes.io/instance%3D{rel.name}"
        for plural in ("clusterroles", "clusterrolebindings"):
            cp.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/{plural}?{selector}")
        for plural in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            cp.request("DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}?{selector}")


@dataclasses.dataclass(frozen=True)
class Installed:
    """The chart applied without its Deployment, and the ServiceAccount's credentials."""

    docs: list[dict[str, Any]]
    kubeconfig: Path
    #: The ServiceAccount's user name, as the audit log records it.
    user: str

    def configuration(self) -> OperatorConfiguration:
        """The rendered configuration, on free loopback ports (a pod binds :8080/:8081)."""
        cfg = rendered_configuration(self.docs)
        server = dataclasses.replace(
            cfg.server, metrics_address="127.0.0.1:0", health_probe_address="127.0.0.1:0"
        )
        return dataclasses.replace(cfg, server=server)


def install_as_service_account(
    cp: ControlPlane, release: Release, values: dict[str, Any]
) -> Installed:
    docs = template(
        values, release=release.name, namespace=release.namespace, include_crds=True, hooks=False
    )
    for doc in docs:
        if doc["kind"] == "CustomResourceDefinition":
            cp.install_crd(doc)
        elif doc["kind"] != "Deployment":
            cp.apply(doc)
    sa_name = one(docs, "ServiceAccount")["metadata"]["name"]
    token = mint_token(cp, release.namespace, sa_name)
    return Installed(
        docs,
        cp.token_kubeconfig(token, user=release.name),
        f"system:serviceaccount:{release.namespace}:{sa_name}",
    )


def mint_token(cp: ControlPlane, namespace: str, service_account: str) -> str:
    """A token for the ServiceAccount from the TokenRequest API, as the kubelet gets one."""
    status, body = cp.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    assert status == 201, f"TokenRequest for {namespace}/{service_account}: {status} {body}"
    token: str = body["status"]["token"]
    return token


@dataclasses.dataclass
class ReplicaProcess:
    """One pod of the chart's Deployment: a `dynamo-pool-operator run` process."""

    name: str
    popen: subprocess.Popen[bytes]
    metrics_port: int
    health_port: int
    log: Path

    def stop(self) -> int:
        """SIGTERM, as the kubelet stops a pod (the grace period is 30 s), by its PID."""
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        return self.popen.returncode

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


@contextlib.contextmanager
def replicas_running(
    installed: Installed, release: Release, directory: Path, count: int = 2
) -> Iterator[list[ReplicaProcess]]:
    """`count` replicas of the chart's Deployment, each as its pod runs it: the rendered
    config.yaml (its listeners moved to free loopback ports), the ServiceAccount's
    token, POD_NAMESPACE set to the release namespace. Stopped afterwards by PID."""
    config = yaml.safe_load(one(installed.docs, "ConfigMap")["data"]["config.yaml"])
    started: list[ReplicaProcess] = []
    try:
        for i in range(count):
            name = f"{release.name}-{i}"
            metrics_port, health_port = free_port(), free_port()
            config["server"]["metricsAddress"] = f"127.0.0.1:{metrics_port}"
            config["server"]["healthProbeAddress"] = f"127.0.0.1:{health_port}"
            path = directory / f"{name}.yaml"
            path.write_text(yaml.safe_dump(config))
            log = directory / f"{name}.log"
            with log.open("wb") as out:
                popen = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "dynamo_pool_operator.cli",
                        "run",
                        "--config",
                        str(path),
                        "--kubeconfig",
                        str(installed.kubeconfig),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, "POD_NAMESPACE": release.namespace},
                )
            started.append(ReplicaProcess(name, popen, metrics_port, health_port, log))
        yield started
    finally:
        for replica in started:
            replica.stop()


@contextlib.contextmanager
def cluster_id(cp: ControlPlane) -> Iterator[str]:
    """The cluster's ID (ClusterProperty); created for the block if it is missing."""
    path = f"/apis/about.k8s.io/v1beta1/clusterproperties/{CLUSTER_ID_PROPERTY}"
    status, body = cp.request("GET", path)
    if status == 200:
        yield str(body["spec"]["value"])
        return
    cp.apply(
        {
            "apiVersion": "about.k8s.io/v1beta1",
            "kind": "ClusterProperty",
            "metadata": {"name": CLUSTER_ID_PROPERTY},
            "spec": {"value": "chart-e2e"},
        }
    )
    try:
        yield "chart-e2e"
    finally:
        cp.request("DELETE", path)


@contextlib.asynccontextmanager
async def operator_running(
    installed: Installed, cfg: OperatorConfiguration, admin: Client, namespace: str
) -> AsyncIterator[Run]:
    """`process.run` as the ServiceAccount for the block; it must then stop cleanly.
    A wait that times out shows the pool's objects in `namespace`, read by `admin`."""
    stop = asyncio.Event()
    task = asyncio.create_task(process.run(cfg, kubeconfig=str(installed.kubeconfig), stop=stop))
    try:
        yield Run(task, partial(scene, admin, namespace, cfg.leader_election.name))
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 30)
    assert code == process.EXIT_OK


@dataclasses.dataclass(frozen=True)
class Run:
    task: asyncio.Task[int]
    #: On a timeout, what the cluster looks like (for the failure message).
    explain: Callable[[], Awaitable[str]] | None = None

    async def until(
        self, probe: Callable[[], Awaitable[Any]], what: str, timeout: float = 60
    ) -> Any:
        """Poll `probe` until truthy; fail at once (with the exit code) if the operator
        exits, since waiting out the timeout would hide why."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last: Any = None
        while loop.time() < deadline:
            if self.task.done():
                pytest.fail(
                    f"the operator exited with {self.task.result()} while waiting for {what}"
                )
            try:
                last = await probe()
            except errors.ApiError as e:
                last = e
            else:
                if last:
                    return last
            await asyncio.sleep(0.1)
        scene = await self.explain() if self.explain is not None else ""
        pytest.fail(f"{what}: not within {timeout}s; last {last!r}\n{scene}")


async def scene(admin: Client, namespace: str, lease: str) -> str:
    """The relay's status, the exports, the pool's Events and every Lease of that name,
    for a failure message: enough to tell "never led" from "led but stuck"."""
    out: list[str] = []

    async def show(what: str, read: Callable[[], Awaitable[Any]]) -> None:
        try:
            out.append(f"{what}: {await read()}")
        except errors.ApiError as e:
            out.append(f"{what}: {e}")

    async def relay_status() -> Any:
        relay = await admin.get(RELAYS, POOL, namespace)
        return {"generation": relay["metadata"].get("generation"), **(relay.get("status") or {})}

    async def exports() -> Any:
        return sorted(
            e["metadata"]["name"] for e in (await admin.list(SERVICEEXPORTS, namespace)).items
        )

    async def events() -> Any:
        found = (await admin.list(EVENTS, namespace)).items
        return [(e.get("type"), e.get("reason"), e.get("note")) for e in found]

    async def leases() -> Any:
        found = (await admin.list(LEASES)).items
        return [
            (
                m["metadata"]["namespace"],
                m["spec"].get("holderIdentity"),
                m["spec"].get("renewTime"),
            )
            for m in found
            if m["metadata"]["name"] == lease
        ]

    await show("relay status", relay_status)
    await show("exports", exports)
    await show("events", events)
    await show(f"leases {lease}", leases)
    return "\n".join(out)


def dgd(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": DGDS.api_version,
        "kind": DGDS.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "components": [
                {"name": "Frontend", "type": "frontend", "replicas": 1},
                {"name": "decode", "type": "decode", "replicas": 1},
            ]
        },
    }


def relay(name: str, namespace: str, cluster: str) -> dict[str, Any]:
    return {
        "apiVersion": RELAYS.api_version,
        "kind": RELAYS.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterId": cluster},
    }


@contextlib.asynccontextmanager
async def exporting(
    cp: ControlPlane,
    installed: Installed,
    cfg: OperatorConfiguration,
    client: Client,
    namespace: str,
    what: str = "the pool exported",
) -> AsyncIterator[tuple[Run, str, dict[str, Any]]]:
    """`operator_running` with the pool published (under the cluster's ID) and exported:
    (the run, the cluster's ID, the relay's status)."""
    with cluster_id(cp) as cluster:
        async with operator_running(installed, cfg, client, namespace) as run:
            await publish_pool(client, namespace, cluster)
            status = await run.until(lambda: exported_status(client, namespace), what)
            yield run, cluster, status


async def publish_pool(client: Client, namespace: str, cluster: str) -> None:
    """The pool `POOL`: a DGD with one frontend, the frontend's Service Dynamo's operator
    makes (a frontend is exported once it exists), and its relay."""
    made = await client.create(DGDS, dgd(POOL, namespace))
    _, service = dynamo.frontend(made)
    await client.create(SERVICES, service)
    await client.create(RELAYS, relay(POOL, namespace, cluster))


async def exported_status(client: Client, namespace: str) -> dict[str, Any] | None:
    """The relay's status once it is current and both exports are Exported."""
    relay = await client.get(RELAYS, POOL, namespace)
    status = relay.get("status") or {}
    if status.get("observedGeneration") != relay["metadata"]["generation"]:
        return None
    states = {e["name"]: e["state"] for e in status.get("exports") or []}
    if states != {RELAY_SVC: "Exported", FRONTEND_SVC: "Exported"}:
        return None
    return dict(status)


async def relay_ready(client: Client, namespace: str) -> bool:
    """The relay's `Ready` condition is True for its current generation."""
    relay = await client.get(RELAYS, POOL, namespace)
    status = relay.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    return (
        status.get("observedGeneration") == relay["metadata"]["generation"]
        and ready.get("status") == "True"
    )
