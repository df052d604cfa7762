"""A relay's status tells the truth about its own objects.

- A relay whose Deployment or Service write is refused (here by a real
  ValidatingAdmissionPolicy: a quota, a full ServiceIP range or a policy look the
  same to us) is not `Ready`: the condition says which object, which verb and what
  the API server answered, and a Warning Event says the same about that object.
  Once the refusal is lifted the retries alone make it Ready.
- A relay held terminating by someone else's finalizer withdraws its pool: nothing
  of the pool stays published or exported while the relay is being deleted.
"""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client.rest import MERGE_PATCH, Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.export_fixtures import (
    events_for,
    export_names,
    exports_become,
)
from tests.integration.support.race_fixtures import refuse_service_create
from tests.integration.support.relay_fixtures import (
    DGDS,
    RELAYS,
    absent,
    condition,
    dgd_body,
    dynamos_services,
    ready,
    relay_body,
)

pytestmark = pytest.mark.timeout(90)

POOL = "llama"
OBJ = f"{POOL}-pool-relay"


@pytest.fixture
def operator(mcs: OperatorUnderTest) -> OperatorUnderTest:
    return mcs


async def test_a_refused_relay_service_keeps_the_pool_not_ready_and_says_why(
    client: Client, control_plane: ControlPlane, namespace: str, operator: OperatorUnderTest
) -> None:
    async with refuse_service_create(control_plane, client, namespace, OBJ):
        await client.create(DGDS, dgd_body(POOL, namespace))
        await client.create(RELAYS, relay_body(POOL, namespace))

        async def refused() -> dict[str, Any] | None:
            cond = await ready(client, namespace, POOL)
            return cond if cond and cond["reason"] == "WriteRefused" else None

        cond = await eventually(refused)
        assert cond["status"] == "False"
        assert f"create Service {OBJ}" in cond["message"]
        relay_available = await condition(client, namespace, POOL, "RelayAvailable")
        assert relay_available is not None
        assert (relay_available["status"], relay_available["reason"]) == ("False", "WriteRefused")
        assert "test refuses" in cond["message"], "the API server's own message is shown"

        async def warned() -> list[dict[str, Any]]:
            return [
                e
                for e in await events_for(client, namespace, "RelayWriteFailed")
                if (e.get("related") or {}).get("kind") == "Service" and e["related"]["name"] == OBJ
            ]

        (event, *_) = await eventually(warned)
        assert event["type"] == "Warning"
        assert event["action"] == "Create"
        assert event["regarding"]["name"] == POOL
        assert "test refuses" in event["note"]
        # The Deployment was written: only the refused object is named.
        assert not await absent(client, DEPLOYMENTS, namespace, OBJ)

    async def recovered() -> bool:
        # The decision holds throughout; once the Service exists the refusal is gone
        # (no pod runs on this control plane, so Ready itself waits for RelayAvailable).
        cond = await condition(client, namespace, POOL, "RelayAvailable")
        return bool(cond and cond["reason"] != "WriteRefused")

    await eventually(recovered, timeout=30)
    assert not await absent(client, SERVICES, namespace, OBJ)
    await operator.settle()
    assert await operator.reconcile_again((namespace, POOL)) == []


async def test_a_relay_held_terminating_withdraws_its_pool(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    await dynamos_services(client, await client.create(DGDS, dgd_body(POOL, namespace)))
    body = relay_body(POOL, namespace)
    body["metadata"]["finalizers"] = ["example.com/hold"]
    await client.create(RELAYS, body)
    await exports_become(client, namespace, {OBJ, f"{POOL}-frontend"})
    try:
        await client.delete(RELAYS, POOL, namespace)

        async def withdrawn() -> dict[str, Any] | None:
            relay = await client.get(RELAYS, POOL, namespace)
            conds = (relay.get("status") or {}).get("conditions") or []
            cond = next((c for c in conds if c["type"] == "Ready"), None)
            if not cond or cond["reason"] != "RelayTerminating":
                return None
            gone = [await absent(client, r, namespace, OBJ) for r in (DEPLOYMENTS, SERVICES)]
            return cond if all(gone) and not await export_names(client, namespace) else None

        cond = await eventually(withdrawn)
        assert cond["status"] == "False"
        await operator.settle()
        assert await operator.reconcile_again((namespace, POOL)) == []
    finally:
        await client.request(
            "PATCH",
            RELAYS.path(namespace, POOL),
            body={"metadata": {"finalizers": None}},
            content_type=MERGE_PATCH,
        )
