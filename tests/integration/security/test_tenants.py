"""The tenant fixture holds exactly what a pool author holds: her pools, nothing they make;
and a user granted relays alone publishes no one's pool."""

from __future__ import annotations

import pytest

from dynamo_pool_operator.localcluster import dynamo
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES
from tests.harness import OperatorUnderTest
from tests.integration.support.export_fixtures import SE, export_names
from tests.integration.support.relay_fixtures import DGDS, RELAYS, WORKER, dgd_body, relay_body
from tests.integration.support.tenants import RELAY_ONLY_RULES, relay_policy, tenant_client


async def test_alice_may_write_her_pools_and_nothing_they_make(
    alice: Client, client: Client, namespace: str
) -> None:
    await alice.create(DGDS, dgd_body("pool", namespace, [WORKER]))
    await alice.create(RELAYS, relay_body("pool", namespace))
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "mine", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "mine", "namespace": namespace},
        "spec": {"ports": [{"port": 80}]},
    }
    export = {"apiVersion": SE.api_version, "kind": "ServiceExport", "metadata": {"name": "mine"}}
    for res, body in ((DEPLOYMENTS, deployment), (SERVICES, service), (SE, export)):
        with pytest.raises(errors.Forbidden):
            await alice.create(res, body, namespace)
    with pytest.raises(errors.Forbidden):
        await alice.list(RELAYS, "default")  # her grant ends at her namespace


async def test_a_user_granted_only_relays_publishes_no_other_teams_pool(
    control_plane: ControlPlane,
    client: Client,
    alice: Client,
    namespace: str,
    mcs: OperatorUnderTest,
) -> None:
    """`mallory` may write relays in the namespace and nothing else (a
    403 even to read a DGD). Beside the payments team's DGD `payments`, with its frontend
    Service, her relay `payments` would have the operator publish their pool: export their
    frontend to every cluster and run a relay as their discovery ServiceAccount. The
    shipped policy refuses her create; nothing is published."""
    dgd = await client.create(DGDS, dgd_body("payments", namespace))
    await client.create(SERVICES, dynamo.frontend(dgd)[1])
    async with (
        relay_policy(control_plane, namespace, alice),
        tenant_client(control_plane, namespace, user="mallory", rules=RELAY_ONLY_RULES) as m,
    ):
        with pytest.raises(errors.Forbidden) as refused:
            await m.create(RELAYS, relay_body("payments", namespace))
        assert "DynamoGraphDeployment" in str(refused.value)
        await mcs.settle()
        assert await export_names(client, namespace) == set()
        assert (await client.list(DEPLOYMENTS, namespace)).items == []
