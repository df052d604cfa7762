"""A pass on the inputs of the relay's last pass that did nothing is skipped, and only
that one: any input that moves (an object's version, a shared input told by
`inputs_changed`) brings a pass that decides afresh.

The skip is what makes a converged fleet's passes cheap (a restart's pass over every
relay, a resync); a skip that outlives a change of its inputs would leave a pool
unrepaired, so each input class is moved here and the pass that follows must plan.
The harness's `reconcile_again` decides afresh too, or every "the second pass writes
nothing" check in the integration tier would pass by skipping.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dynamo_pool_operator.api.dgd import DCD_KIND, DCD_PLURAL
from dynamo_pool_operator.api.dgd import GROUP as DGD_GROUP
from dynamo_pool_operator.localcluster import dynamo
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.pool import reconciler as reconciler_module
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import SERVICES, Resource
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.export_fixtures import SE, config, exports_become
from tests.integration.support.objects import controller_ref
from tests.integration.support.race_fixtures import FRONTEND_SVC, POOL, RELAY_SVC, make_pool
from tests.integration.support.relay_fixtures import DGDS, RELAYS, dgd_body, relay_body

pytestmark = pytest.mark.timeout(60)


class PlanCount:
    """Counts the plans the reconciler makes (each pass that is not skipped makes one):
    `n` every pass's, `mine` those of passes the test's own task ran (the controller's
    workers may still run one for a late event, however settled the operator looked)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        self.mine = 0
        test_task = asyncio.current_task()
        real = reconciler_module.make_plan

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.n += 1
            self.mine += asyncio.current_task() is test_task
            return real(*args, **kwargs)

        monkeypatch.setattr(reconciler_module, "make_plan", counted)


@pytest.fixture
async def mcs(control_plane: ControlPlane) -> AsyncIterator[OperatorUnderTest]:
    # No implementation runs here: with confirmation valid or ready, every pass would ask
    # for a later look (the unconfirmed export's Warning) and none would be quiet.
    multi_cluster = {"mcsImplementation": "mcs", "confirmation": "none"}
    async with OperatorUnderTest(control_plane, config(multiCluster=multi_cluster)) as op:
        yield op


async def _plans_of_one_pass(op: OperatorUnderTest, plans: PlanCount, ns: str) -> int:
    before = plans.mine
    await op.running.reconciler.reconcile((ns, POOL))
    return plans.mine - before


async def _published_and_counted(
    client: Client,
    namespace: str,
    op: OperatorUnderTest,
    monkeypatch: pytest.MonkeyPatch,
    *,
    frontend_service: bool = True,
) -> PlanCount:
    """A published pool, the operator settled, and its plans counted from now on.
    Without its frontend's Service (Dynamo's operator has not made it), the frontend is
    not exported."""
    plans = PlanCount(monkeypatch)
    if frontend_service:
        await make_pool(client, namespace)
        await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})
    else:
        await client.create(DGDS, dgd_body(POOL, namespace))
        await client.create(RELAYS, relay_body(POOL, namespace))
        await exports_become(client, namespace, {RELAY_SVC})
    await op.settle()
    return plans


async def test_a_pass_on_unchanged_inputs_is_skipped_and_a_moved_input_is_not(
    client: Client, namespace: str, mcs: OperatorUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans = await _published_and_counted(client, namespace, mcs, monkeypatch)
    await _plans_of_one_pass(mcs, plans, namespace)  # quiet now, if the last was not
    assert await _plans_of_one_pass(mcs, plans, namespace) == 0, "a quiet pass was repeated"

    # A shared input no object shows (an API switch, a replaced cache).
    mcs.running.reconciler.inputs_changed()
    assert await _plans_of_one_pass(mcs, plans, namespace) == 1
    assert await _plans_of_one_pass(mcs, plans, namespace) == 0

    # Each object the pass reads, moved without a change the plan acts on.
    moves = {
        "the DGD": lambda: client.merge_patch(
            DGDS, POOL, {"metadata": {"labels": {"moved": "dgd"}}}, namespace
        ),
        "an export": lambda: client.merge_patch(
            SE, FRONTEND_SVC, {"metadata": {"labels": {"moved": "export"}}}, namespace
        ),
    }
    for what, move in moves.items():
        before = plans.n
        await move()

        async def decided_afresh(before: int = before) -> bool:
            return plans.n > before

        await eventually(decided_afresh)
        await mcs.settle()
        assert await _plans_of_one_pass(mcs, plans, namespace) == 0, f"after {what} moved"


async def test_reconcile_again_decides_afresh(
    client: Client, namespace: str, mcs: OperatorUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans = await _published_and_counted(client, namespace, mcs, monkeypatch)
    await _plans_of_one_pass(mcs, plans, namespace)
    before = plans.mine
    assert await mcs.reconcile_again((namespace, POOL)) == []
    assert plans.mine == before + 1, "reconcile_again skipped its pass: the check is hollow"


DCDS = Resource(DGD_GROUP, "v1alpha1", DCD_PLURAL, DCD_KIND)  # the test CRD's


async def _decided_afresh_then_quiet(
    op: OperatorUnderTest, plans: PlanCount, ns: str, before: int
) -> None:
    async def decided_afresh() -> bool:
        return plans.n > before

    await eventually(decided_afresh)
    await op.settle()
    await _plans_of_one_pass(op, plans, ns)  # quiet now, if the last was not
    assert await _plans_of_one_pass(op, plans, ns) == 0


async def test_a_frontends_service_appearing_or_changing_hands_is_decided_afresh(
    client: Client, namespace: str, mcs: OperatorUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether a frontend's Service exists, and whose it is, decides its export
    (docs/exports.md): the Service's version is an input, so a quiet pass never outlives
    its change."""
    plans = await _published_and_counted(
        client, namespace, mcs, monkeypatch, frontend_service=False
    )
    await _plans_of_one_pass(mcs, plans, namespace)
    assert await _plans_of_one_pass(mcs, plans, namespace) == 0
    # Dynamo's operator makes the frontend's Service: it is exported.
    _, service = dynamo.frontend(await client.get(DGDS, POOL, namespace))
    before = plans.n
    await client.create(SERVICES, service)
    await _decided_afresh_then_quiet(mcs, plans, namespace, before)
    await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})
    # It changes hands: the export goes.
    await client.merge_patch(
        SERVICES, FRONTEND_SVC, {"metadata": {"ownerReferences": None}}, namespace
    )
    await exports_become(client, namespace, {RELAY_SVC})


async def test_the_dcd_of_a_frontends_service_changing_hands_is_decided_afresh(
    client: Client, namespace: str, mcs: OperatorUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans = await _published_and_counted(
        client, namespace, mcs, monkeypatch, frontend_service=False
    )
    dgd = await client.get(DGDS, POOL, namespace)
    dcd_body = {
        "apiVersion": DCDS.api_version,
        "kind": DCD_KIND,
        "metadata": {
            "name": FRONTEND_SVC,
            "namespace": namespace,
            "ownerReferences": [controller_ref(dgd)],
        },
        "spec": {},
    }
    dcd = await client.create(DCDS, dcd_body)
    _, service = dynamo.frontend(dgd)
    service["metadata"] = {**service["metadata"], "ownerReferences": [controller_ref(dcd)]}
    before = plans.n
    await client.create(SERVICES, service)
    await _decided_afresh_then_quiet(mcs, plans, namespace, before)
    await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})
    # The DGD lets go of the DCD: its Service is no longer the DGD's, the export goes.
    await client.merge_patch(DCDS, FRONTEND_SVC, {"metadata": {"ownerReferences": None}}, namespace)
    await exports_become(client, namespace, {RELAY_SVC})
