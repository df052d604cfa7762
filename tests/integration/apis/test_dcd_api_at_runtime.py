"""The DynamoComponentDeployment API while the operator runs: followed like the DGD API.

A frontend's Service that a DCD controls is the pool's while the DGD controls that DCD
(`pool/exports/plan.foreign_service`), so whether it is exported depends on reading the
DCDs. Their API is a CRD of Dynamo's that may move to another version, or be installed
after the operator started: a DCD cache left at a version no longer served (or never
made) reads every DCD-controlled frontend as someone else's, and its export is
withdrawn. Each test changes the DCD CRD of a private control plane through the real
API server and checks, from the audit log, that no export was withdrawn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from dynamo_pool_operator.api.dgd import DCD_KIND, DCD_PLURAL
from dynamo_pool_operator.api.dgd import GROUP as DGD_GROUP
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.crds import dcd_crd, dgd_crd
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import SERVICES, Resource
from tests.harness import OperatorUnderTest
from tests.integration.support.api_fixtures import fast, plane
from tests.integration.support.export_fixtures import exports_become, states_become
from tests.integration.support.objects import controller_ref
from tests.integration.support.relay_fixtures import (
    DGDS,
    FRONTEND,
    RELAYS,
    WORKER,
    dgd_body,
    relay_body,
)
from tests.integration.support.under_test import running
from tests.integration.support.waiting import eventually_or

pytestmark = pytest.mark.timeout(120)

BOTH = ("v1alpha1", "v1beta1")


@pytest.fixture
def both_dcd_versions() -> Iterator[ControlPlane]:
    yield from plane(about=False, mcs=("v1beta1",), dgd=[dgd_crd("v1beta1"), dcd_crd(BOTH)])


@pytest.fixture
def no_dcd_api() -> Iterator[ControlPlane]:
    yield from plane(about=False, mcs=("v1beta1",))


def dcd_unserved_beta() -> dict[str, Any]:
    """The DCD CRD with v1beta1 no longer served (nor stored): only v1alpha1 is."""
    doc = dcd_crd(BOTH)
    for version in doc["spec"]["versions"]:
        version["served"] = version["storage"] = version["name"] == "v1alpha1"
    return doc


def dcds(version: str) -> Resource:
    return Resource(DGD_GROUP, version, DCD_PLURAL, DCD_KIND)


async def dcd_pool(client: Client, ns: str, name: str, version: str) -> None:
    """A pool off Dynamo's Grove path: the DGD controls the frontend's DCD (made at
    `version`), which controls the frontend's Service."""
    dgd = await client.create(DGDS, dgd_body(name, ns, [FRONTEND, WORKER]))
    service_name = f"{name}-frontend"
    res = dcds(version)
    dcd = await client.create(
        res,
        {
            "apiVersion": res.api_version,
            "kind": DCD_KIND,
            "metadata": {
                "name": service_name,
                "namespace": ns,
                "ownerReferences": [controller_ref(dgd)],
            },
            "spec": {},
        },
    )
    await client.create(
        SERVICES,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": service_name,
                "namespace": ns,
                "ownerReferences": [controller_ref(dcd)],
            },
            "spec": {"selector": {"app": service_name}, "ports": [{"port": 8000}]},
        },
    )
    await client.create(RELAYS, relay_body(name, ns))


async def follows(op: OperatorUnderTest, version: str) -> None:
    async def read_at() -> bool:
        return op.running.served.dcd_version == version

    await eventually_or(
        read_at, lambda: f"the DCDs are read at {op.running.served.dcd_version}, not {version}"
    )


async def withdrawn_exports(op: OperatorUnderTest, since: int, ns: str) -> list[str]:
    return [
        w.name
        for w in await op.writes_since(since)
        if w.verb == "delete" and w.resource == "serviceexports" and w.namespace == ns
    ]


async def test_a_dcd_version_no_longer_served_is_followed_and_no_export_is_withdrawn(
    both_dcd_versions: ControlPlane,
) -> None:
    cp = both_dcd_versions
    async with running(cp, fast("mcs")) as (client, op, ns):
        await follows(op, "v1beta1")  # the preferred of those served
        await dcd_pool(client, ns, "p1", "v1alpha1")
        await exports_become(client, ns, {"p1-pool-relay", "p1-frontend"})
        await states_become(client, ns, "p1", {"p1-frontend": "Exported"})
        since = cp.audit.offset()
        await asyncio.to_thread(cp.install_crd, dcd_unserved_beta())
        await follows(op, "v1alpha1")
        # The cache in effect is live: a DCD made now is seen, and its frontend exported.
        await dcd_pool(client, ns, "p2", "v1alpha1")
        await exports_become(
            client, ns, {f"p{i}-{s}" for i in (1, 2) for s in ("pool-relay", "frontend")}
        )
        await states_become(client, ns, "p2", {"p2-frontend": "Exported"})
        assert await withdrawn_exports(op, since, ns) == []
        assert await op.reconcile_again((ns, "p1")) == []


async def test_a_dcd_api_installed_after_start_is_read_and_no_export_is_withdrawn(
    no_dcd_api: ControlPlane,
) -> None:
    cp = no_dcd_api
    async with running(cp, fast("mcs")) as (client, op, ns):
        assert op.running.served.dcd_version is None
        await asyncio.to_thread(cp.install_crd, dcd_crd(("v1beta1",)))
        await follows(op, "v1beta1")
        since = cp.audit.offset()
        await dcd_pool(client, ns, "p1", "v1beta1")
        await exports_become(client, ns, {"p1-pool-relay", "p1-frontend"})
        lines: dict[str, Any] = await states_become(client, ns, "p1", {"p1-frontend": "Exported"})
        assert lines["p1-frontend"].get("reason") != "ForeignService", lines
        assert await withdrawn_exports(op, since, ns) == []
        assert await op.reconcile_again((ns, "p1")) == []
