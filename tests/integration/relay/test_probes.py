"""The process's probes against the real API server: what gates `/readyz`, what does not.

Readiness waits for the caches the operator cannot work without. An optional cache (the
ClusterProperty of the cluster ID check) must not gate it: an operator whose RBAC lacks
that read would stay NotReady forever, and `helm --wait` and every rollout would stall.
It reports the check as degraded instead, in one log line and a gauge.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import aiohttp
import pytest

from dynamo_pool_operator import process
from dynamo_pool_operator.localcluster.controlplane import ControlPlane, free_port
from dynamo_pool_operator.runtime.client.rest import Client
from tests.harness import eventually
from tests.integration.support.export_fixtures import config, set_cluster_id, wait_event
from tests.integration.support.race_fixtures import (
    CLUSTER_PROPERTY_RULES,
    OPERATOR_RULES,
    Grants,
    make_pool,
)

pytestmark = pytest.mark.timeout(120)

DEGRADED = 'dynamo_pool_operator_check_degraded{check="clusterID"}'


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        return resp.status, await resp.text()


def _gauge(metrics: str, series: str) -> float | None:
    for line in metrics.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


async def test_unreadable_cluster_property_degrades_the_check_but_not_readiness(
    client: Client,
    namespace: str,
    control_plane: ControlPlane,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As a user without the ClusterProperty read: ready anyway, the check reported
    degraded (log + gauge), each relay's ExportFailed kept; once the read is granted the
    gauge clears."""
    caplog.set_level(logging.INFO)
    user = f"dpo-noprops-{uuid.uuid4().hex[:8]}"
    grants = Grants(control_plane, user)
    await grants.grant(user, OPERATOR_RULES)
    await set_cluster_id(client, "east")
    health, metrics = free_port(), free_port()
    cfg = config(
        "mcs",
        namespace={"restricted": namespace},
        leaderElection={"enabled": False},
        server={
            "healthProbeAddress": f"127.0.0.1:{health}",
            "metricsAddress": f"127.0.0.1:{metrics}",
        },
    )
    stop = asyncio.Event()
    kubeconfig = control_plane.user_kubeconfig(user)
    task = asyncio.create_task(process.run(cfg, kubeconfig=str(kubeconfig), stop=stop))
    readyz = f"http://127.0.0.1:{health}/readyz"
    scrape = f"http://127.0.0.1:{metrics}/metrics"

    async def ready() -> bool:
        if task.done():
            raise AssertionError(f"the operator exited with {task.result()}")
        try:
            return (await _get(readyz))[0] == 200
        except aiohttp.ClientConnectionError:
            return False  # not listening yet

    async def degraded(value: float) -> bool:
        return _gauge((await _get(scrape))[1], DEGRADED) == value

    try:
        await eventually(ready, timeout=45)
        await eventually(lambda: degraded(1.0), timeout=45)
        warnings = [
            r.getMessage()
            for r in caplog.records
            if r.levelno == logging.WARNING and "check clusterID is degraded" in r.getMessage()
        ]
        assert len(warnings) == 1, warnings
        assert "clusterproperties.about.k8s.io" in warnings[0]
        assert (await _get(readyz))[0] == 200
        # Each relay still says why its cluster ID is unchecked.
        await make_pool(client, namespace, clusterId="east")
        event = await wait_event(client, namespace, "ExportFailed", kind="ClusterProperty")
        assert event["type"] == "Warning"

        await grants.grant(f"{user}-clusterproperties", CLUSTER_PROPERTY_RULES)
        await eventually(lambda: degraded(0.0), timeout=45)
        assert any("check clusterID recovered" in r.getMessage() for r in caplog.records)
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 30)
        await grants.revoke_all()
    assert code == process.EXIT_OK


def _listeners(port: int) -> set[str]:
    """The IPv4 addresses a socket listens on at `port`, as the kernel shows them."""
    found = set()
    for line in open("/proc/net/tcp").read().splitlines()[1:]:  # noqa: SIM115
        local, state = line.split()[1], line.split()[3]
        host, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
            found.add(".".join(str(int(host[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


async def test_plain_metrics_listen_on_loopback_unless_a_host_is_named(
    control_plane: ControlPlane,
) -> None:
    """Plain `/metrics` names every tenant's relays: `:port` without `metricsSecure`
    listens on 127.0.0.1 only, so nobody beyond the pod reads them."""
    health, metrics = free_port(), free_port()
    cfg = config(
        "",
        leaderElection={"enabled": False},
        server={"healthProbeAddress": f"127.0.0.1:{health}", "metricsAddress": f":{metrics}"},
    )
    stop = asyncio.Event()
    task = asyncio.create_task(
        process.run(cfg, kubeconfig=str(control_plane.kubeconfig), stop=stop)
    )

    async def serving() -> bool:
        if task.done():
            raise AssertionError(f"the operator exited with {task.result()}")
        try:
            return (await _get(f"http://127.0.0.1:{metrics}/metrics"))[0] == 200
        except aiohttp.ClientConnectionError:
            return False

    try:
        await eventually(serving, timeout=45)
        assert _listeners(metrics) == {"127.0.0.1"}
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 30)
    assert code == process.EXIT_OK
