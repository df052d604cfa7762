"""Which priority a controller queues a key at: the source of the event decides.

An informer's list (initial or relist) and the replay of its cache to a new handler
queue keys at LOW; its watch at NORMAL; a watch that names a priority (a mass
requeue, as the ClusterProperty watch) always at that one; a failed or requeued key
goes back at the priority it was handed out with. The informer runs against a
scripted client (the API server's behaviour is not what is tested here). The
controllers have no workers, so what is queued stays there to be looked at; they are
started, since a controller queues nothing before it starts (a follower).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.cache.informer import Informer
from dynamo_pool_operator.runtime.cache.store import Obj
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.background import ChangesFirst, in_background
from dynamo_pool_operator.runtime.client.rest import ListResult
from dynamo_pool_operator.runtime.control.controller import Controller, Request, Result
from dynamo_pool_operator.runtime.control.queue import LOW, NORMAL
from dynamo_pool_operator.runtime.objects.resources import CONFIGMAPS, Resource
from tests.clock import FakeClock
from tests.unit.runtime.client.fake import FakeClient


def cm(name: str, rv: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "uid": name}}


class Scripted(FakeClient):
    """One list answer, then one watch session that plays `events` and stays open."""

    def __init__(self, listed: list[Obj], events: Iterable[tuple[str, Obj]] = ()) -> None:
        super().__init__()
        self.listed = listed
        self.events = list(events)
        self.release = asyncio.Event()

    async def list(self, res: Resource, namespace: str | None = None, **kw: Any) -> ListResult:
        each: Callable[[Obj], Obj | None] | None = kw.get("each")
        items = [dict(o, metadata=dict(o["metadata"])) for o in self.listed]
        if each is not None:
            items = [k for k in map(each, items) if k is not None]
        return ListResult(items, "10")

    async def watch_lines(
        self, res: Resource, namespace: str | None = None, **kw: Any
    ) -> AsyncIterator[bytes]:
        if kw.get("send_initial_events"):
            raise errors.Invalid("no watch-list here: these scripts are lists")
        await self.release.wait()  # the test decides when the watch events come
        for etype, obj in self.events:
            yield orjson.dumps({"type": etype, "object": obj})
        self.events = []
        await asyncio.Event().wait()


class NoReconcile:
    async def reconcile(self, request: Request) -> Result | None:
        return None


async def settle(rounds: int = 30) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[None]:
    task = asyncio.create_task(informer.run())
    try:
        assert await informer.wait_synced(5)
        yield
    finally:
        informer.stop()
        await asyncio.gather(task, return_exceptions=True)


def controller(**kw: Any) -> Controller:
    return Controller("prio", NoReconcile(), registry=CollectorRegistry(), workers=0, **kw)


@contextlib.asynccontextmanager
async def leading(c: Controller) -> AsyncIterator[Controller]:
    """The controller started (its process leads): it queues from now on."""
    await c.start()
    try:
        yield c
    finally:
        await c.stop()


async def drain(c: Controller) -> list[tuple[Request, int]]:
    out = []
    while len(c.queue):
        key, prio = await asyncio.wait_for(c.queue.get_with_priority(), 1)
        c.queue.done(key)
        out.append((key, prio))
    return out


async def test_initial_list_keys_are_low_and_watch_keys_normal_and_served_first() -> None:
    client = Scripted([cm("a", "1"), cm("b", "2")], [("ADDED", cm("c", "11"))])
    informer = Informer(client, CONFIGMAPS)
    c = controller().for_(informer)
    async with running(informer), leading(c):
        assert c.queue.depth_by_priority() == {LOW: 2}
        client.release.set()
        await settle()
        assert await drain(c) == [(("ns", "c"), NORMAL), (("ns", "a"), LOW), (("ns", "b"), LOW)]


async def test_a_change_to_a_key_still_waiting_from_the_list_moves_it_up() -> None:
    client = Scripted([cm("a", "1"), cm("b", "2")], [("MODIFIED", cm("b", "12"))])
    informer = Informer(client, CONFIGMAPS)
    c = controller().for_(informer)
    async with running(informer), leading(c):
        client.release.set()
        await settle()
        assert await drain(c) == [(("ns", "b"), NORMAL), (("ns", "a"), LOW)]


async def test_a_relist_queues_its_changes_at_low() -> None:
    """After a 410 the informer relists; what changed meanwhile comes from that list."""

    class Relisting(Scripted):
        def __init__(self) -> None:
            super().__init__([cm("a", "1")])
            self.calls = 0

        async def list(self, res: Resource, namespace: str | None = None, **kw: Any) -> ListResult:
            self.calls += 1
            if self.calls == 2:
                self.listed = [cm("a", "20"), cm("d", "21")]
            return await super().list(res, namespace, **kw)

        async def watch_lines(
            self, res: Resource, namespace: str | None = None, **kw: Any
        ) -> AsyncIterator[bytes]:
            if kw.get("send_initial_events"):
                raise errors.Invalid("no watch-list here: these scripts are lists")
            if self.calls == 1:
                raise errors.Gone("too old")
            await asyncio.Event().wait()
            yield b""  # pragma: no cover

    client = Relisting()
    clock = FakeClock()
    informer = Informer(client, CONFIGMAPS, clock=clock)
    c = controller().for_(informer)
    async with running(informer), leading(c):
        await drain(c)  # the initial list
        for _ in range(200):
            await clock.advance(1.0)  # the backoff before the relist
            await settle()
            if client.calls >= 2 and len(c.queue) == 2:
                break
        assert sorted(await drain(c)) == [(("ns", "a"), LOW), (("ns", "d"), LOW)]


async def test_a_handler_added_to_a_synced_informer_gets_its_replay_at_low() -> None:
    client = Scripted([cm("a", "1")])
    informer = Informer(client, CONFIGMAPS)
    async with running(informer):
        c = controller()
        async with leading(c):
            c.for_(informer)
            assert await drain(c) == [(("ns", "a"), LOW)]


async def test_a_watch_with_a_fixed_priority_queues_every_event_at_it() -> None:
    """A mass requeue (one object's change maps to every key) stays low even live."""
    client = Scripted([cm("a", "1")], [("MODIFIED", cm("a", "11"))])
    informer = Informer(client, CONFIGMAPS)
    c = controller().watches(informer, lambda _: [("ns", "x"), ("ns", "y")], priority=LOW)
    async with running(informer), leading(c):
        await drain(c)
        client.release.set()
        await settle()
        assert sorted(await drain(c)) == [(("ns", "x"), LOW), (("ns", "y"), LOW)]


class Failing:
    def __init__(self, result: Result | None = None) -> None:
        self.result = result

    async def reconcile(self, request: Request) -> Result | None:
        if self.result is None:
            raise RuntimeError("boom")
        return self.result


@pytest.mark.parametrize("result", [None, Result(requeue=True), Result(requeue_after=2.0)], ids=str)
async def test_a_retried_key_goes_back_at_the_priority_it_was_handed_out_with(
    result: Result | None,
) -> None:
    clock = FakeClock()
    c = Controller("prio", Failing(result), registry=CollectorRegistry(), clock=clock)
    c.queue.add(("ns", "k"), LOW)
    key, prio = await c.queue.get_with_priority()
    await c._reconcile_handler(key, prio)
    c.queue.done(key)
    await clock.advance(5.0)
    await settle()
    c.queue.add(("ns", "user"))

    assert await drain(c) == [(("ns", "user"), NORMAL), (("ns", "k"), LOW)]


class NeverSuspends:
    """A no-op reconcile that reads caches only: it never awaits anything that suspends."""

    def __init__(self) -> None:
        self.done = 0

    async def reconcile(self, request: Request) -> Result | None:
        self.done += 1
        return None


async def started_with_backlog(reconciler: Any, names: list[str]) -> Controller:
    """A four-worker controller started with `names` (in namespace `ns`) queued low."""
    c = Controller("prio", reconciler, registry=CollectorRegistry(), workers=4)
    for name in names:
        c.queue.add(("ns", name), LOW)
    await c.start()
    return c


async def test_a_worker_yields_to_the_loop_between_keys() -> None:
    """A mass requeue of no-op reconciles must not hold the event loop: while the workers
    drain it, the informers must still read their watches, or a user's change is not even
    queued (let alone served first) until the whole backlog is through."""
    reconciler = NeverSuspends()
    c = await started_with_backlog(reconciler, [f"r{i}" for i in range(1000)])
    try:
        await asyncio.sleep(0)  # one turn of the loop for anything else that is ready
        assert reconciler.done < 50, f"{reconciler.done} reconciles before the loop turned"
    finally:
        await c.stop()


async def test_a_mass_requeue_waits_behind_a_change_made_meanwhile() -> None:
    """`enqueue_all` (every relay, when a served API or the cluster ID changes) queues
    at LOW: a user's change queued after it is still served first."""
    async with leading(controller()) as c:
        c.enqueue_all([("ns", "a"), ("ns", "b")])
        c.queue.add(("ns", "z"), NORMAL)
        assert await drain(c) == [(("ns", "z"), NORMAL), (("ns", "a"), LOW), (("ns", "b"), LOW)]


class HoldsLowKeys:
    """A reconcile of a LOW key waits until released (a backlog's slow writes); one of
    a NORMAL key returns at once. Records what it ran, and in which mode."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started: list[tuple[Request, bool]] = []

    async def reconcile(self, request: Request) -> Result | None:
        self.started.append((request, in_background()))
        if request[1].startswith("low"):
            await self.release.wait()
        return None


async def test_a_change_is_taken_at_once_while_every_other_worker_holds_a_backlog_key() -> None:
    """With one worker kept for changes, a NORMAL key is reconciled while the LOW
    backlog occupies every other worker; the kept worker never takes a LOW key."""
    reconciler = HoldsLowKeys()
    c = Controller("prio", reconciler, registry=CollectorRegistry(), workers=4, kept_for_changes=1)
    for i in range(10):
        c.queue.add(("ns", f"low{i}"), LOW)
    await c.start()
    try:
        await settle()
        assert [k for k, _ in reconciler.started] == [("ns", f"low{i}") for i in range(3)]
        c.queue.add(("ns", "change"), NORMAL)
        await settle()
        assert reconciler.started[-1] == (("ns", "change"), False)
        assert c.queue.processing == 3  # the backlog's three, still held
    finally:
        reconciler.release.set()
        await c.stop()


async def test_without_a_kept_worker_a_change_waits_for_a_backlog_key() -> None:
    """The same backlog with no worker kept: the change waits (what the kept worker is for)."""
    reconciler = HoldsLowKeys()
    c = await started_with_backlog(reconciler, [f"low{i}" for i in range(10)])
    try:
        await settle()
        c.queue.add(("ns", "change"), NORMAL)
        await settle()
        assert (("ns", "change"), False) not in reconciler.started
    finally:
        reconciler.release.set()
        await c.stop()


async def test_a_backlog_key_is_reconciled_in_background_mode_and_a_change_is_not() -> None:
    reconciler = HoldsLowKeys()
    reconciler.release.set()
    c = Controller("prio", reconciler, registry=CollectorRegistry(), workers=1)
    c.queue.add(("ns", "low"), LOW)
    c.queue.add(("ns", "change"), NORMAL)
    await c.start()
    try:
        await settle()
        assert reconciler.started == [(("ns", "change"), False), (("ns", "low"), True)]
    finally:
        await c.stop()


class RecordsChanges(HoldsLowKeys):
    """As `HoldsLowKeys`, recording how many lone changes' passes are in flight during
    each pass (`ChangesFirst`): the kept worker's pass counts itself."""

    def __init__(self, first: ChangesFirst) -> None:
        super().__init__()
        self.first = first
        self.changes: dict[Request, int] = {}

    async def reconcile(self, request: Request) -> Result | None:
        self.changes[request] = self.first.changes_in_flight
        return await super().reconcile(request)


@pytest.mark.parametrize("flows", [True, False])
async def test_the_kept_workers_pass_is_a_lone_changes_with_fair_queuing(flows: bool) -> None:
    """With a flow function, the pass of the worker kept for changes (a namespace's
    change made alone) is a lone change's, whose writes go first; the backlog's passes
    are not. Without one, no pass is (a mass change at NORMAL runs on the kept worker)."""
    first = ChangesFirst(1.0)
    reconciler = RecordsChanges(first)
    c = Controller(
        "prio",
        reconciler,
        registry=CollectorRegistry(),
        workers=2,
        kept_for_changes=1,
        flow=(lambda key: key[0]) if flows else None,
        changes_first=first,
    )
    c.queue.add(("a", "low0"), LOW)
    await c.start()
    try:
        await settle()
        c.queue.add(("b", "change"), NORMAL)
        await settle()
        assert reconciler.changes == {("a", "low0"): 0, ("b", "change"): 1 if flows else 0}
        assert first.changes_in_flight == 0  # the change's pass ended
    finally:
        reconciler.release.set()
        await c.stop()
