"""A late sync of an optional cache requeues what read it unsynced (`Controller.watches`).

A watch that does not wait for its cache (`wait_for_sync=False`: a read that may be
refused for good) leaves the reconciler to report the cache unreadable. When the cache
syncs later with no object, no event says so: `on_sync` names the keys to reconcile
again then, at once (a key that raised would otherwise wait for its backoff retry; one
that only reported the read as failed, for an unrelated event). The informer runs
against a scripted client; the controllers have no workers, so what is queued stays
there to be looked at.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from dynamo_pool_operator.runtime.cache.informer import Informer
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import ListResult
from dynamo_pool_operator.runtime.control.controller import Controller, Request
from dynamo_pool_operator.runtime.control.queue import LOW
from dynamo_pool_operator.runtime.objects.resources import CONFIGMAPS, Resource
from tests.clock import FakeClock
from tests.unit.runtime.client.fake import FakeClient
from tests.unit.runtime.control.test_controller_priority import (
    controller,
    drain,
    leading,
    settle,
)

KEYS: list[Request] = [("ns", "a"), ("ns", "b")]


class RefusedThenEmpty(FakeClient):
    """The list is refused until `grant`, then answers with no object."""

    def __init__(self) -> None:
        super().__init__()
        self.granted = False
        self.lists = 0

    async def list(self, res: Resource, namespace: str | None = None, **kw: Any) -> ListResult:
        self.lists += 1
        if not self.granted:
            raise errors.Forbidden("no rbac", status=403)
        return ListResult([], "10")

    async def watch_lines(
        self, res: Resource, namespace: str | None = None, **kw: Any
    ) -> AsyncIterator[bytes]:
        if kw.get("send_initial_events"):
            raise errors.Invalid("no watch-list here: these scripts are lists")
        await asyncio.Event().wait()
        yield b""  # pragma: no cover


async def recovered(client: RefusedThenEmpty, clock: FakeClock, informer: Informer) -> None:
    client.granted = True
    for _ in range(50):
        await clock.advance(1.0)  # the informer's backoff before the next list
        await settle()
        if informer.has_synced:
            return
    raise AssertionError("the informer never synced")


@contextlib.asynccontextmanager
async def late_cache() -> AsyncIterator[tuple[RefusedThenEmpty, FakeClock, Informer, Controller]]:
    """A controller watching an optional cache (`on_sync` names KEYS) whose first list
    is refused; the cache's informer runs while the block does."""
    client, clock = RefusedThenEmpty(), FakeClock()
    informer = Informer(client, CONFIGMAPS, clock=clock)
    c = controller().watches(informer, lambda _: KEYS, wait_for_sync=False, on_sync=lambda: KEYS)
    task = asyncio.create_task(informer.run())
    try:
        yield client, clock, informer, c
    finally:
        informer.stop()
        await asyncio.gather(task, return_exceptions=True)


async def test_an_optional_cache_that_syncs_late_requeues_the_keys_it_names() -> None:
    async with late_cache() as (client, clock, informer, c):
        c.optional_sync_grace = 0.0
        async with leading(c):
            await settle()
            assert client.lists >= 1
            assert await drain(c) == []  # refused: nothing to tell yet
            await recovered(client, clock, informer)
            # The list had no object, so no event: the sync alone queued them, low.
            assert sorted(await drain(c)) == [(k, LOW) for k in KEYS]


async def test_a_cache_no_longer_watched_requeues_nothing_when_it_syncs() -> None:
    async with late_cache() as (client, clock, informer, c):
        c.optional_sync_grace = 0.0
        async with leading(c):
            await settle()
            c.unwatch(informer)
            await recovered(client, clock, informer)
            assert await drain(c) == []


async def test_before_the_controller_leads_a_sync_queues_nothing() -> None:
    """A follower keeps no queue; its start reconciles every key anyway."""
    async with late_cache() as (client, clock, informer, c):
        await settle()
        await recovered(client, clock, informer)
        assert len(c.queue) == 0
