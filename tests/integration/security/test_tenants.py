"""The tenant fixture holds exactly what a pool author holds: her pools, nothing they make."""

from __future__ import annotations

import pytest

from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES
from tests.integration.support.export_fixtures import SE
from tests.integration.support.relay_fixtures import DGDS, RELAYS, WORKER, dgd_body, relay_body


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
