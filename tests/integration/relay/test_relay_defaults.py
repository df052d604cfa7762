"""The operator configuration's `poolRelay.*` defaults reach a relay that leaves the
field out, and a field the relay sets wins.

The CRD must not default these fields itself: an API-server default is stored in
every relay at creation, so the configured default would never be seen.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from dynamo_pool_operator.config import parse_configuration
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.relay_fixtures import DGDS, RELAYS, dgd_body, relay_body

CONFIGURED = {
    "apiVersion": "operator.config.dynamo.nvidia.com/v1alpha1",
    "kind": "OperatorConfiguration",
    "poolRelay": {
        "image": "registry.example/relay:configured",
        "imagePullPolicy": "Always",
        "port": 7300,
        "replicas": 3,
    },
}


@pytest.fixture
async def operator(control_plane: ControlPlane) -> AsyncIterator[OperatorUnderTest]:
    async with OperatorUnderTest(control_plane, parse_configuration(CONFIGURED)) as op:
        yield op


async def _deployment(client: Client, ns: str, name: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any]:
        return await client.get(DEPLOYMENTS, f"{name}-pool-relay", ns)

    dep: dict[str, Any] = await eventually(probe)
    return dep


async def test_a_relay_without_those_fields_gets_the_configured_defaults(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    await client.create(DGDS, dgd_body("llama", namespace))
    made = await client.create(RELAYS, relay_body("llama", namespace))
    assert "replicas" not in made["spec"], "the CRD must leave spec.replicas unset"
    dep = await _deployment(client, namespace, "llama")
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert dep["spec"]["replicas"] == 3
    assert container["image"] == "registry.example/relay:configured"
    assert container["imagePullPolicy"] == "Always"
    assert container["ports"][0]["containerPort"] == 7300

    async def service() -> dict[str, Any]:
        return await client.get(SERVICES, "llama-pool-relay", namespace)

    svc = await eventually(service)
    assert svc["spec"]["ports"][0]["port"] == 7300


async def test_fields_the_relay_sets_win_over_the_configuration(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    await client.create(DGDS, dgd_body("llama", namespace))
    await client.create(
        RELAYS, relay_body("llama", namespace, replicas=1, port=7400, image="relay:own")
    )
    dep = await _deployment(client, namespace, "llama")
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert (dep["spec"]["replicas"], container["image"]) == (1, "relay:own")
    assert container["ports"][0]["containerPort"] == 7400
