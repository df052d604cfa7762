"""Bad pod fields in a relay never reach a Deployment: the API server refuses what
the CRD schema can say, and the operator withdraws with `InvalidConfiguration`
naming the field for the rest. Either way no partial Deployment is created and
`Ready` is never True for a relay whose objects the API server would refuse.
"""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.localcluster.harness import OperatorUnderTest
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES
from tests.integration.support.race_fixtures import make_pool
from tests.integration.support.relay_fixtures import (
    RELAYS,
    absent,
    decided,
    relay_body,
)

POOL = "llama"

# (spec, what the API server's refusal must name)
REFUSED_BY_THE_SCHEMA: list[tuple[dict[str, Any], str]] = [
    ({"resources": {"limits": {"cpu": "lots"}}}, "spec.resources.limits.cpu"),
    ({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}},
     "each request must be less than or equal to its limit"),
    ({"resources": {"limits": {"cpu": "1"}, "requets": {}}}, "requets"),
    ({"tolerations": [{"key": "gpu", "operator": "Gt"}]}, "spec.tolerations[0].operator"),
    ({"tolerations": [{"key": "gpu", "operator": "Exists", "value": "x"}]},
     "value must be empty when operator is Exists"),
    ({"tolerations": [{"value": "x"}]}, "operator must be Exists when key is empty"),
    ({"tolerations": [{"key": "gpu", "tolerationSeconds": 5}]},
     "tolerationSeconds is only valid with effect NoExecute"),
    ({"tolerations": [{"key": "gpu", "effect": "Sometimes"}]}, "spec.tolerations[0].effect"),
    ({"image": " "}, "spec.image"),
    ({"image": "relay :1"}, "spec.image"),
]  # fmt: skip

# (spec, the field InvalidConfiguration must name)
WITHDRAWN_BY_THE_OPERATOR: list[tuple[dict[str, Any], str]] = [
    ({"resources": {"requests": {"CPU": "1"}}}, "spec.resources.requests[CPU]"),
    ({"resources": {"limits": {"nvidia.com/gpu": "0.5"}}}, "spec.resources.limits[nvidia.com/gpu]"),
    ({"resources": {"requests": {"nvidia.com/gpu": "1"}}}, "spec.resources.limits[nvidia.com/gpu]"),
    ({"tolerations": [{"key": "a b", "operator": "Exists"}]}, "spec.tolerations[0].key"),
    ({"tolerations": [{"key": "gpu", "value": "not a label"}]}, "spec.tolerations[0].value"),
    ({"nodeSelector": {"a b": "x"}}, "spec.nodeSelector[a b]"),
    ({"nodeSelector": {"pool": "not a label"}}, "spec.nodeSelector[pool]"),
    ({"podLabels": {"nvidia.com/dynamo-component-type": "frontend"}},
     "spec.podLabels[nvidia.com/dynamo-component-type]"),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "named"), REFUSED_BY_THE_SCHEMA)
async def test_the_api_server_refuses_a_bad_pod_field(
    client: Client, namespace: str, spec: dict[str, Any], named: str
) -> None:
    # kubectl's default: server-side field validation, strict (an unknown field is an
    # error, not silently pruned).
    with pytest.raises(errors.Invalid) as refused:
        await client.request(
            "POST",
            RELAYS.path(namespace),
            params={"fieldValidation": "Strict"},
            body=relay_body(POOL, namespace, **spec),
        )
    assert named in str(refused.value)


@pytest.mark.parametrize(("spec", "named"), WITHDRAWN_BY_THE_OPERATOR)
async def test_a_bad_pod_field_the_schema_lets_through_withdraws_naming_it(
    client: Client,
    namespace: str,
    operator: OperatorUnderTest,
    spec: dict[str, Any],
    named: str,
) -> None:
    await make_pool(client, namespace, name=POOL, **spec)
    cond = await decided(client, namespace, POOL, "InvalidConfiguration")
    assert cond["status"] == "False"
    assert named in cond["message"]
    await operator.settle()
    for res in (DEPLOYMENTS, SERVICES):
        assert await absent(client, res, namespace, f"{POOL}-pool-relay")
    writes = await operator.reconcile_again((namespace, POOL))
    assert writes == []
