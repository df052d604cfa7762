"""Confirmation levels and held withdrawals on the real control plane: the test acts as
the MCS implementation, writing what Antrea writes (`Valid=True Succeed`, never `Ready`)
on our exports, or adding a finalizer as AWS Cloud Map and Clusternet do."""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client.rest import Client
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.export_fixtures import (
    SE,
    conditions_of,
    config,
    events_for,
    exports_become,
    relay_status,
    states_become,
)
from tests.integration.support.race_fixtures import (
    FRONTEND_SVC,
    POOL,
    RELAY_SVC,
    exported_pool,
)
from tests.integration.support.race_fixtures import writes_nothing as second_pass_writes_nothing
from tests.integration.support.relay_fixtures import DGDS, RELAYS

HELD_BY = "mcs.example/cleanup"


async def write_valid_only(client: Client, ns: str, name: str) -> None:
    """What Antrea's member controller writes on an export it accepts."""
    condition = {
        "type": "Valid",
        "status": "True",
        "reason": "Succeed",
        "message": "the Service is exported",
        "lastTransitionTime": "2026-12-01T00:00:00Z",
    }
    await client.merge_patch(
        SE, name, {"status": {"conditions": [condition]}}, ns, subresource="status"
    )


async def exported_when(client: Client, ns: str, reason: str, saying: str = "") -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        c = (await conditions_of(client, ns)).get("Exported")
        return c if c and c["reason"] == reason and saying in c["message"] else None

    found: dict[str, Any] = await eventually(probe, timeout=20)
    return found


@pytest.mark.parametrize("level", ["valid", "ready"])
async def test_valid_only_is_exported_under_valid_and_unconfirmed_under_ready(
    client: Client, namespace: str, control_plane: ControlPlane, level: str
) -> None:
    # Long enough to see Pending for Ready under load, short for a test.
    multi = {"mcsImplementation": "mcs", "confirmation": level, "unconfirmedAfter": "8s"}
    async with OperatorUnderTest(control_plane, config("mcs", multiCluster=multi)) as op:
        await exported_pool(client, namespace)
        for name in (RELAY_SVC, FRONTEND_SVC):
            await write_valid_only(client, namespace, name)
        if level == "valid":
            said = await exported_when(client, namespace, "ImplementationReady")
            assert said["status"] == "True"
        else:
            # Pending, now for Ready (before the test wrote Valid: for any condition).
            await exported_when(client, namespace, "Pending", "waiting for Ready")
            said = await exported_when(client, namespace, "Unconfirmed")
            assert said["status"] == "Unknown"
            assert "multiCluster.confirmation: valid" in said["message"]
        lines = await states_become(
            client, namespace, POOL, {RELAY_SVC: "Exported", FRONTEND_SVC: "Exported"}
        )
        assert lines[RELAY_SVC]["valid"]["reason"] == "Succeed"
        await op.settle()
        await second_pass_writes_nothing(op, namespace)


async def test_a_withdrawal_held_by_a_finalizer_says_withdrawing_and_warns_once(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    multi = {"mcsImplementation": "mcs", "confirmation": "none", "unconfirmedAfter": "3s"}
    async with OperatorUnderTest(control_plane, config("mcs", multiCluster=multi)) as op:
        await exported_pool(client, namespace, op)
        await client.merge_patch(SE, RELAY_SVC, {"metadata": {"finalizers": [HELD_BY]}}, namespace)
        await client.delete(DGDS, POOL, namespace)  # the relay is withdrawn
        await exports_become(client, namespace, {RELAY_SVC})  # held by the finalizer

        lines = await states_become(client, namespace, POOL, {RELAY_SVC: "Withdrawing"})
        line = lines[RELAY_SVC]
        assert (line["reason"], line["finalizers"]) == ("HeldByFinalizers", [HELD_BY])
        assert HELD_BY in line["message"]
        await op.settle()
        await second_pass_writes_nothing(op, namespace)
        await op.reconcile_again((namespace, POOL), include_events=True)
        # A status written again for another cause (the relay's cluster ID) while the
        # line stays Withdrawing: still the one Warning.
        await client.merge_patch(RELAYS, POOL, {"spec": {"clusterId": "elsewhere"}}, namespace)

        async def rewritten() -> bool:
            return (await relay_status(client, namespace, POOL)).get("clusterId") == "elsewhere"

        await eventually(rewritten)
        await op.settle()
        await op.running.recorder.wait_idle()
        warned = await events_for(client, namespace, "ExportStuckTerminating")
        assert len(warned) == 1, warned
        (event,) = warned
        assert event["type"] == "Warning"
        assert event["related"]["name"] == RELAY_SVC
        assert HELD_BY in event["note"]
        assert int((event.get("series") or {}).get("count") or 1) == 1, event

        # The finalizer's owner finishes: the export goes, and its line with it.
        await client.merge_patch(SE, RELAY_SVC, {"metadata": {"finalizers": None}}, namespace)
        await exports_become(client, namespace, set())

        async def no_line() -> bool:
            return not (await relay_status(client, namespace, POOL)).get("exports")

        await eventually(no_line)
        await op.settle()
        await second_pass_writes_nothing(op, namespace)
