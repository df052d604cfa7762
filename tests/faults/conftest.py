"""Fixtures of the fault suite: a private control plane (these tests kill its
kube-apiserver and etcd and register webhooks, so never the shared one), a fresh
namespace per test that is fully gone afterwards, and two operator replicas.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from dynamo_pool_operator.localcluster.assets import resolve
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.crds import default_crds
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from tests.faults.fleet import FLEET_SIZE, Fleet, namespace_gone
from tests.faults.replicas import Replicas


@pytest.fixture(scope="session")
def fault_cp() -> Iterator[ControlPlane]:
    assets = resolve()
    with ControlPlane(assets=assets, crds=default_crds(assets.mcs_crd_dir)) as cp:
        yield cp


@pytest.fixture
async def admin(fault_cp: ControlPlane) -> AsyncIterator[Client]:
    async with Client(load_kubeconfig(fault_cp.kubeconfig), user_agent="dpo-faults") as c:
        yield c


@pytest.fixture
async def fleet_ns(fault_cp: ControlPlane) -> AsyncIterator[str]:
    name = f"f-{uuid.uuid4().hex[:8]}"
    fault_cp.create_namespace(name)
    try:
        yield name
    finally:
        await namespace_gone(fault_cp, name)


@pytest.fixture
def replicas(fault_cp: ControlPlane, fleet_ns: str) -> Iterator[Replicas]:
    reps = Replicas(fault_cp, fleet_ns)
    try:
        yield reps
    finally:
        reps.stop()
        print(reps.report())  # shown only when the test failed


@pytest.fixture
def fleet(admin: Client, fleet_ns: str) -> Fleet:
    return Fleet(admin, fleet_ns, size=FLEET_SIZE)
