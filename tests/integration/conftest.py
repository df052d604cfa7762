"""The operator under test, as the integration tests share it: started on the session's
control plane for one test, with the shipped defaults (`operator`) or exporting through
an MCS implementation (`mcs`) or Karmada (`karmada`); and the admin client of the
plane where pods run (`node_client`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from tests.harness import OperatorUnderTest
from tests.integration.support.export_fixtures import config


@pytest.fixture
async def operator(control_plane: ControlPlane) -> AsyncIterator[OperatorUnderTest]:
    async with OperatorUnderTest(control_plane) as op:
        yield op


@pytest.fixture
async def mcs(control_plane: ControlPlane) -> AsyncIterator[OperatorUnderTest]:
    async with OperatorUnderTest(control_plane, config("mcs")) as op:
        yield op


@pytest.fixture
async def karmada(control_plane: ControlPlane) -> AsyncIterator[OperatorUnderTest]:
    async with OperatorUnderTest(control_plane, config("karmada")) as op:
        yield op


@pytest.fixture
async def node_client(node_plane: ControlPlane) -> AsyncIterator[Client]:
    """The runtime's own client on the plane where pods run, as its admin."""
    async with Client(load_kubeconfig(node_plane.kubeconfig), user_agent="dpo-tests") as c:
        yield c
