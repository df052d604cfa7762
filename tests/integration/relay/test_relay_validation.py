"""Bad pod fields in a relay never reach a Deployment, and a typo never takes a pool
down: the API server refuses what the CRD's schema and CEL rules can say (the same
rules as the operator's: `api/names.py`), naming the field at `kubectl apply`; for the
rest the operator says `InvalidConfiguration` naming the field, creates nothing for a
new relay, and keeps a running pool as it runs (decision 0013). `Ready` is never True
for a relay whose objects the API server would refuse.
"""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES
from tests.harness import OperatorUnderTest
from tests.integration.support.race_fixtures import make_pool, published_pool
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
    ({"tolerations": [{"key": "a b", "operator": "Exists"}]}, "spec.tolerations[0].key"),
    ({"tolerations": [{"key": "gpu", "value": "not a label"}]}, "spec.tolerations[0].value"),
    ({"nodeSelector": {"a b": "x"}}, "key a b must be a valid label key"),
    ({"nodeSelector": {"pool": "not a label"}}, "spec.nodeSelector.pool"),
    ({"podLabels": {"bad key!": "x"}}, "key bad key! must be a valid label key"),
    ({"podLabels": {"x": "not a label"}}, "spec.podLabels.x"),
    ({"podLabels": {"nvidia.com/dynamo-component-type": "frontend"}},
     "the label domains nvidia.com, kubernetes.io, k8s.io are reserved"),
    ({"podLabels": {"app.kubernetes.io/name": "x"}}, "set by the operator to select"),
    ({"podAnnotations": {"bad key!": "x"}}, "key bad key! must be a valid label key"),
    ({"serviceAccountName": "Bad_SA"}, "spec.serviceAccountName"),
]  # fmt: skip

# (spec, the field InvalidConfiguration must name): rules only the operator judges.
INVALID_TO_THE_OPERATOR: list[tuple[dict[str, Any], str]] = [
    ({"resources": {"requests": {"CPU": "1"}}}, "spec.resources.requests[CPU]"),
    ({"resources": {"limits": {"nvidia.com/gpu": "0.5"}}}, "spec.resources.limits[nvidia.com/gpu]"),
    ({"resources": {"requests": {"nvidia.com/gpu": "1"}}}, "spec.resources.limits[nvidia.com/gpu]"),
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


@pytest.mark.parametrize(("spec", "named"), INVALID_TO_THE_OPERATOR)
async def test_a_new_relay_with_a_bad_pod_field_the_schema_lets_through_creates_nothing(
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


async def test_a_typo_in_a_live_relay_is_refused_at_apply_naming_the_field(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    """What a user tried on `make dev`: `kubectl apply` of a bad podLabels key on a
    published relay. The API server refuses it; the pool never notices."""
    await published_pool(client, namespace)
    with pytest.raises(errors.Invalid) as refused:
        await client.merge_patch(
            RELAYS, POOL, {"spec": {"podLabels": {"bad key!": "x"}}}, namespace
        )
    assert "spec.podLabels" in str(refused.value)
    assert "bad key!" in str(refused.value)


async def test_a_live_relay_stored_invalid_keeps_its_pool_running(
    client: Client, namespace: str, operator: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    """A spec only the operator can call invalid (or one stored before the rules): the
    relay says so and its Deployment and Service stay as they run, nothing withdrawn;
    fixed, it is published again."""
    await published_pool(client, namespace)
    relay_obj = f"{POOL}-pool-relay"
    running = {
        res.kind: await client.get(res, relay_obj, namespace) for res in (DEPLOYMENTS, SERVICES)
    }
    since = control_plane.audit.offset()
    bad = {"resources": {"requests": {"nvidia.com/gpu": "1"}}}
    await client.merge_patch(RELAYS, POOL, {"spec": bad}, namespace)
    cond = await decided(client, namespace, POOL, "InvalidConfiguration")
    assert "spec.resources.limits[nvidia.com/gpu]" in cond["message"]
    assert "nothing is withdrawn" in cond["message"]
    assert await operator.reconcile_again((namespace, POOL)) == []
    for res in (DEPLOYMENTS, SERVICES):
        now = await client.get(res, relay_obj, namespace)
        assert now["metadata"]["uid"] == running[res.kind]["metadata"]["uid"]
        assert (
            now["metadata"]["resourceVersion"] == running[res.kind]["metadata"]["resourceVersion"]
        )
    # Here only: the previous test's namespace may still be terminating, and its relays
    # are withdrawn by this operator as its namespace controller deletes their DGDs.
    writes = await operator.writes_since(since)
    deleted = [w for w in writes if w.verb == "delete" and w.namespace == namespace]
    assert deleted == [], [(w.resource, w.name) for w in deleted]
    await client.merge_patch(RELAYS, POOL, {"spec": {"resources": None}}, namespace)
    await decided(client, namespace, POOL, "Published")
    assert await operator.reconcile_again((namespace, POOL)) == []
