"""The DGD API while the operator runs: followed, or readiness fails loudly.

Every reconcile reads the DGD cache. When the version it was listed at stops being
served, that cache goes stale: its watch fails and nothing it shows changes again. The
operator must then switch to a version still served (making the new cache before
dropping the old, as for the optional APIs), or, with none served, fail `/readyz` and
say so in the log, rather than run on with green probes. Each test changes the DGD CRD
of a private control plane through the real API server.

The DGD stand-in CRD serves its versions without a conversion webhook, so the DGDs here
carry both shapes (`components` and `services`): read at either version they are the
same pool, as Dynamo's own conversion makes them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from dynamo_pool_operator import process
from dynamo_pool_operator.localcluster.controlplane import ControlPlane, free_port
from dynamo_pool_operator.localcluster.crds import dgd_crd
from dynamo_pool_operator.pool.controller import dgd_resource
from dynamo_pool_operator.runtime.client.rest import Client
from tests.harness import eventually
from tests.integration.support.api_fixtures import fast, lines, namespace, plane
from tests.integration.support.export_fixtures import exports_become
from tests.integration.support.relay_fixtures import (
    FRONTEND,
    RELAYS,
    WORKER,
    decided,
    dynamos_services,
    relay_body,
)
from tests.integration.support.under_test import admin, running
from tests.integration.support.waiting import eventually_or

pytestmark = pytest.mark.timeout(120)

DGD_API = "dynamographdeployments.nvidia.com"
#: The pool of FRONTEND and WORKER in the v1alpha1 shape.
SERVICES = {
    "Frontend": {"componentType": "frontend"},
    "decode": {"componentType": "worker", "subComponentType": "decode"},
}


def dgd_versions(*, beta: bool = True, alpha: bool = True) -> dict[str, Any]:
    """The DGD CRD with both versions, each served or not (the storage version is a
    served one, v1beta1 if it is)."""
    doc = dgd_crd("v1beta1")
    beta_version = doc["spec"]["versions"][0]
    alpha_version = dgd_crd("v1alpha1")["spec"]["versions"][0]
    beta_version["served"], alpha_version["served"] = beta, alpha
    beta_version["storage"], alpha_version["storage"] = beta or not alpha, alpha and not beta
    doc["spec"]["versions"] = [beta_version, alpha_version]
    return doc


def dgd_unserved() -> dict[str, Any]:
    """The v1beta1-only DGD CRD, no longer serving it (its objects stay in etcd)."""
    doc = dgd_crd("v1beta1")
    doc["spec"]["versions"][0]["served"] = False
    return doc


@pytest.fixture
def both_dgd_versions() -> Iterator[ControlPlane]:
    yield from plane(about=False, mcs=("v1beta1",), dgd=[dgd_versions()])


@pytest.fixture
def one_dgd_version() -> Iterator[ControlPlane]:
    yield from plane(about=False, mcs=None)


async def make_pool(client: Client, ns: str, name: str) -> None:
    """A DGD of both shapes, its frontend's Service (`dynamos_services`) and its relay."""
    dgds = dgd_resource("v1beta1")
    dgd = await client.create(
        dgds,
        {
            "apiVersion": dgds.api_version,
            "kind": dgds.kind,
            "metadata": {"name": name, "namespace": ns},
            "spec": {"components": [FRONTEND, WORKER], "services": SERVICES},
        },
    )
    await dynamos_services(client, dgd)
    await client.create(RELAYS, relay_body(name, ns))


async def test_a_dgd_version_no_longer_served_is_followed_to_one_that_is(
    both_dgd_versions: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    async with running(both_dgd_versions, fast("mcs"), caplog) as (client, op, ns):
        assert op.running.served.dgd_version == "v1beta1"
        await make_pool(client, ns, "p1")
        await make_pool(client, ns, "p2")
        await exports_become(
            client, ns, {f"p{i}-{s}" for i in (1, 2) for s in ("pool-relay", "frontend")}
        )
        await asyncio.to_thread(both_dgd_versions.install_crd, dgd_versions(beta=False))

        async def switched() -> bool:
            return op.running.served.dgd_version == "v1alpha1"

        await eventually_or(
            switched,
            lambda: f"the DGDs are read at {op.running.served.dgd_version}, no longer served",
        )
        assert op.running.dgd_api_served()
        assert op.running.caches_synced()
        said = lines(caplog, f"the DGD API ({DGD_API}) is served now at v1alpha1 (was v1beta1)")
        assert len(said) == 1, said
        # The new cache is the live one: a DGD deleted now withdraws its pool, and its
        # exports with it; the other pool is untouched.
        await client.delete(dgd_resource("v1alpha1"), "p1", ns)
        await decided(client, ns, "p1", "DGDNotFound")
        await exports_become(client, ns, {"p2-pool-relay", "p2-frontend"})
        await decided(client, ns, "p2", "Published")


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        return resp.status, await resp.text()


async def test_no_served_dgd_version_fails_readiness_loudly_until_one_is_served_again(
    one_dgd_version: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    cp = one_dgd_version
    ns = namespace(cp)
    caplog.set_level(logging.INFO)
    health = free_port()
    cfg = fast(
        "",
        leaderElection={"enabled": False},
        server={"healthProbeAddress": f"127.0.0.1:{health}", "metricsAddress": "0"},
    )
    stop = asyncio.Event()
    task = asyncio.create_task(process.run(cfg, kubeconfig=str(cp.kubeconfig), stop=stop))
    readyz = f"http://127.0.0.1:{health}/readyz"

    async def readiness(ready: bool) -> str | None:
        if task.done():
            raise AssertionError(f"the operator exited with {task.result()}")
        try:
            status, body = await _get(readyz)
        except aiohttp.ClientConnectionError:
            return None  # not listening yet
        return body if (status == 200) == ready else None

    try:
        async with admin(cp) as client:
            await eventually(lambda: readiness(True), timeout=45)
            await make_pool(client, ns, "p1")
            await decided(client, ns, "p1", "Published")
            await asyncio.to_thread(cp.apply, dgd_unserved())

            async def still_ready() -> str:
                return f"/readyz still passes with no DGD version served: {await _get(readyz)}"

            body = await eventually_or(lambda: readiness(False), still_ready)
            assert "[-]dgdAPI" in body, body
            loud = lines(caplog, f"the DGD API ({DGD_API}) is no longer served", logging.ERROR)
            assert len(loud) == 1, loud
            assert "/readyz fails" in loud[0], loud
            # The pool is left as it was: its DGD is not gone, only unreadable.
            await decided(client, ns, "p1", "Published")
            # Served again: ready again, and the new cache is live.
            await asyncio.to_thread(cp.install_crd, dgd_crd("v1beta1"))
            await eventually(lambda: readiness(True), timeout=30)
            await client.delete(dgd_resource("v1beta1"), "p1", ns)
            await decided(client, ns, "p1", "DGDNotFound")
            assert len(lines(caplog, "is no longer served", logging.ERROR)) == 1
    finally:
        stop.set()
        code = await asyncio.wait_for(task, 30)
    assert code == process.EXIT_OK
