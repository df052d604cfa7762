"""The relay's PodDisruptionBudget, against a real API server: owned, repaired and
withdrawn like its Deployment (docs/crd.md, `replicas`), a relay of two pods or more
keeping one of them through a drain, a relay of one pod blocking none."""

from __future__ import annotations

from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.pool.relay.kinds import POD_DISRUPTION_BUDGET
from dynamo_pool_operator.runtime.client.rest import Client
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.race_fixtures import published_pool
from tests.integration.support.relay_fixtures import (
    DGDS,
    RELAYS,
    absent,
    decided,
    relay_owner,
)

POOL = "llama"
OBJ = f"{POOL}-pool-relay"
BUDGETS = POD_DISRUPTION_BUDGET.resource


async def budget(client: Client, ns: str) -> dict[str, Any] | None:
    try:
        return await client.get(BUDGETS, OBJ, ns)
    except Exception:
        return None


async def test_a_relay_of_two_pods_owns_a_budget_that_keeps_one(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    relay = await published_pool(client, namespace, replicas=2)
    made: dict[str, Any] = await eventually(lambda: budget(client, namespace))
    assert made["spec"]["minAvailable"] == 1
    assert made["spec"]["selector"] == {"matchLabels": names.selector(POOL)}
    assert made["metadata"]["ownerReferences"] == [relay_owner(relay)]
    assert made["metadata"]["labels"] == names.owned_object_labels(POOL)
    assert await operator.reconcile_again((namespace, POOL)) == []


async def test_a_budget_changed_by_someone_is_repaired_in_place(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    await published_pool(client, namespace, replicas=2)
    made: dict[str, Any] = await eventually(lambda: budget(client, namespace))
    await client.merge_patch(BUDGETS, OBJ, {"spec": {"minAvailable": 0}}, namespace)

    async def repaired() -> dict[str, Any] | None:
        now = await budget(client, namespace)
        return now if now is not None and now["spec"]["minAvailable"] == 1 else None

    again: dict[str, Any] = await eventually(repaired)
    assert again["metadata"]["uid"] == made["metadata"]["uid"]
    assert await operator.reconcile_again((namespace, POOL)) == []


async def test_one_pod_has_no_budget_and_a_budget_goes_with_the_pool(
    client: Client, namespace: str, operator: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    """Down to one pod, `minAvailable: 1` would block every drain: the budget is
    withdrawn. Back to two, it is made again; the DGD gone, it goes with the pool."""
    await published_pool(client, namespace, replicas=2)
    await eventually(lambda: budget(client, namespace))
    await client.merge_patch(RELAYS, POOL, {"spec": {"replicas": 1}}, namespace)
    await eventually(lambda: absent(client, BUDGETS, namespace, OBJ))
    assert await operator.reconcile_again((namespace, POOL)) == []
    await client.merge_patch(RELAYS, POOL, {"spec": {"replicas": 3}}, namespace)
    await eventually(lambda: budget(client, namespace))
    await client.delete(DGDS, POOL, namespace)
    await decided(client, namespace, POOL, "DGDNotFound")
    await eventually(lambda: absent(client, BUDGETS, namespace, OBJ))
    assert await operator.reconcile_again((namespace, POOL)) == []
