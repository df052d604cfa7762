"""Fair queuing by namespace on the real server: one tenant's mass change does not hold
up another tenant's single change.

Tenant A (the test's namespace) deletes the DGDs of all her pools at once; while her
relays' keys wait, tenant B (a second namespace) creates a pool. Both are changes at
NORMAL priority. The operator's passes of A's relays are held (so A's backlog is certain
to be there, whatever the machine's speed) while B's key is queued; then the order in
which the relays are reconciled is what is checked, in passes, not seconds: the worker
kept for changes takes B's key while A's passes hold the others (or, if it holds A's
first key, B's pass comes next but at most one of A's), where first come, first served
would put it after all of them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.control.controller import Controller, Request, Result
from dynamo_pool_operator.runtime.control.queue import NORMAL
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.relay_fixtures import (
    DGDS,
    RELAYS,
    WORKER,
    dgd_body,
    published,
    relay_body,
)

pytestmark = pytest.mark.timeout(120)

#: A's pools: far more than the workers, so that most of her keys wait in the queue.
A_POOLS = 24
B_POOL = "newcomer"


@pytest.fixture
def namespace_b(control_plane: ControlPlane) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    control_plane.create_namespace(name)
    try:
        yield name
    finally:
        control_plane.delete_namespace(name)


class Held:
    """The operator's reconciler, recording the order of its passes, and holding every
    pass of one namespace's relays while `hold` is set (a worker busy with that pass)."""

    def __init__(self, inner: Any, held_namespace: str) -> None:
        self.inner = inner
        self.held_namespace = held_namespace
        self.hold = False
        self.released = asyncio.Event()
        self.order: list[Request] = []
        self.holding: set[Request] = set()

    def inputs_changed(self) -> None:
        self.inner.inputs_changed()

    async def reconcile(self, request: Request) -> Result | None:
        self.order.append(request)
        if self.hold and request[0] == self.held_namespace:
            self.holding.add(request)
            await self.released.wait()
        result: Result | None = await self.inner.reconcile(request)
        return result


class Adds:
    """Every key the controller queues, with the queue's NORMAL depth and the number of
    passes begun at that moment."""

    def __init__(self, controller: Controller, held: Held) -> None:
        self.seen: list[tuple[Request, int, int, int]] = []
        queue = controller.queue
        real = queue.add

        def add(key: Request, priority: int = NORMAL) -> None:
            real(key, priority)
            depth = queue.depth_by_priority().get(NORMAL, 0)
            self.seen.append((key, priority, depth, len(held.order)))

        queue.add = add  # type: ignore[method-assign]

    def first(self, key: Request) -> tuple[int, int, int] | None:
        """(priority, NORMAL depth, passes begun) when `key` was first queued."""
        return next(((p, d, n) for k, p, d, n in self.seen if k == key), None)


async def test_a_tenants_single_change_is_served_within_one_round_of_anothers_mass_change(
    client: Client, namespace: str, namespace_b: str, operator: OperatorUnderTest
) -> None:
    a = namespace
    for i in range(A_POOLS):
        await client.create(DGDS, dgd_body(f"a{i:02d}", a, [WORKER]))
        await client.create(RELAYS, relay_body(f"a{i:02d}", a))
    for i in range(A_POOLS):
        await published(client, a, f"a{i:02d}")
    controller = operator.running.controller
    held = Held(controller.reconciler, a)
    controller.reconciler = held
    adds = Adds(controller, held)
    workers = controller.workers

    held.hold = True
    for i in range(A_POOLS):  # tenant A withdraws every pool at once
        await client.delete(DGDS, f"a{i:02d}", a)

    # The general workers all hold A's passes; the kept one holds one too if it took
    # A's first key (A had none in flight then), and takes none of hers after.
    async def a_backlog_queued() -> bool:
        holding = len(held.holding) >= workers - 1
        return holding and len(controller.queue) >= A_POOLS - workers

    await eventually(a_backlog_queued)
    kept_worker_free = len(held.holding) < workers
    await client.create(DGDS, dgd_body(B_POOL, namespace_b, [WORKER]))
    await client.create(RELAYS, relay_body(B_POOL, namespace_b))
    b_key = (namespace_b, B_POOL)

    async def b_queued() -> tuple[int, int, int] | None:
        return adds.first(b_key)

    priority, normal_depth, begun = await eventually(b_queued)
    assert priority == NORMAL, "B's change is a real change"
    assert normal_depth >= A_POOLS - workers, "A's backlog was queued ahead of B's key"

    if kept_worker_free:  # B's pool is published while every pass of A's is held
        await published(client, namespace_b, B_POOL)
    held.hold = False
    held.released.set()
    await published(client, namespace_b, B_POOL)

    after = held.order[begun:]
    assert b_key in after, f"B's relay was not reconciled after it was queued: {after}"
    ahead = [key for key in after[: after.index(b_key)] if key[0] == a]
    assert len(ahead) <= (0 if kept_worker_free else 1), (
        f"B's key waited behind {len(ahead)} of A's passes: {ahead}"
    )

    # A's withdrawal goes on to its end: fairness reorders, it drops nothing.
    async def a_withdrawn() -> bool:
        left = await client.list(DEPLOYMENTS, a)
        return not left.items

    await eventually(a_withdrawn, timeout=60)
