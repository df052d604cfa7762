"""Make before break (`runtime/cache/followed.py`): our own rules for moving a cache.

A new version's cache is waited for once, then kept being made (not abandoned and
started again); the cache in effect stays read meanwhile; a version no longer served
fails readiness until a served one's cache has synced. The API server is a stand-in
whose lists complete when the test lets them; what the real one does is in
tests/integration/apis/test_apis_make_before_break.py and test_dgd_api_at_runtime.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from dynamo_pool_operator.runtime.cache.followed import Candidate, FollowedCache, MaybeServed
from dynamo_pool_operator.runtime.cache.informer import Informer
from dynamo_pool_operator.runtime.cache.shared import SharedInformers
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import ListResult
from dynamo_pool_operator.runtime.objects.resources import Resource
from tests.clock import FakeClock
from tests.unit.runtime.client.fake import FakeClient


def widgets(version: str) -> Resource:
    return Resource("example.com", version, "widgets", "Widget", True)


class Server(FakeClient):
    """Lists of each resource and version complete when the test lets them
    (`complete`), with one object; watches stay open and quiet. Streaming lists are
    refused, so the informer lists page by page."""

    def __init__(self, name: str = "w") -> None:
        super().__init__()
        self.name = name
        self._done: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.lists: Counter[str] = Counter()

    def complete(self, version: str, plural: str = "widgets") -> None:
        self._done[f"{plural}/{version}"].set()

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        each: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
        **_: Any,
    ) -> ListResult:
        self.lists[res.version] += 1
        await self._done[f"{res.plural}/{res.version}"].wait()
        meta = {"name": self.name, "resourceVersion": "1"}
        item = {"metadata": {**meta, "namespace": "ns"} if res.namespaced else meta}
        kept = each(item) if each is not None else item  # the informer's filter, as the client
        return ListResult([kept] if kept is not None else [], "1")

    async def watch_lines(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        send_initial_events: bool = False,
        **_: Any,
    ) -> AsyncIterator[bytes]:
        if send_initial_events:
            raise errors.Invalid("no streaming lists here", status=422)
        await asyncio.Event().wait()
        yield b""  # never reached


class World:
    def __init__(self) -> None:
        self.server = Server()
        self.clock = FakeClock()
        self.informers = SharedInformers(self.server, clock=self.clock)
        self.pokes = 0
        self.switches: list[tuple[Informer, Informer]] = []

    def make(self, version: str) -> Informer:
        return self.informers.get(widgets(version), "ns")

    def poke(self) -> None:
        self.pokes += 1

    def switch(self, new: Informer, old: Informer) -> None:
        self.switches.append((new, old))

    async def timed_out(self, offer: Any) -> Any:
        """Run an offer whose wait times out: the fake clock passes the 10 s."""
        task = asyncio.ensure_future(offer)
        await settle()
        await self.clock.advance(10)
        return await task


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    w = World()
    w.informers.start_all()
    yield w
    await w.informers.stop_all()


# ---------------------------------------------------------------- Candidate
async def test_a_slow_new_cache_keeps_being_made_and_is_taken_once_synced(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    candidate = Candidate(world.informers, world.make, what="the Widget API", poke=world.poke)
    assert await world.timed_out(candidate.offer("v2", "v1 stays in effect until it does")) is None
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(
        "the Widget API is served at v2, but its list did not complete within 10s: v1 stays "
        "in effect until it does"
    )
    informer = candidate.informer
    assert informer is not None
    assert informer.running
    assert not informer.has_synced
    # Offered again, it only looks: no second wait, no second list.
    assert await candidate.offer("v2", "v1 stays") is None
    assert world.server.lists["v2"] == 1
    world.server.complete("v2")
    await settle()
    assert world.pokes == 1  # its owner is told at once
    assert await candidate.offer("v2", "v1 stays") is informer
    assert candidate.informer is None
    assert world.server.lists["v2"] == 1  # the one list, waited for


async def test_a_new_cache_that_syncs_in_time_is_taken_at_once(world: World) -> None:
    world.server.complete("v2")
    candidate = Candidate(world.informers, world.make, what="the Widget API", poke=world.poke)
    informer = await candidate.offer("v2", "unused")
    assert informer is not None
    assert informer.has_synced
    assert world.pokes == 0


async def test_a_candidate_no_longer_wanted_is_stopped(world: World) -> None:
    candidate = Candidate(world.informers, world.make, what="the Widget API", poke=world.poke)
    await world.timed_out(candidate.offer("v2", "v1 stays"))
    v2 = candidate.informer
    assert v2 is not None
    await world.timed_out(candidate.offer("v3", "v1 stays"))
    assert not v2.running
    assert candidate.version == "v3"
    await candidate.drop()
    assert candidate.informer is None
    world.server.complete("v2")
    await settle()
    assert world.pokes == 0  # a dropped candidate tells no one


# ---------------------------------------------------------------- FollowedCache
async def followed(world: World) -> FollowedCache:
    world.server.complete("v1")
    v1 = world.make("v1")
    assert await v1.wait_synced(1)
    cache = FollowedCache(
        world.informers,
        v1,
        "v1",
        make=world.make,
        switch=world.switch,
        what="the Widget API (widgets.example.com)",
    )
    cache.poke = world.poke
    return cache


async def test_the_old_cache_stays_read_while_the_new_one_is_made(world: World) -> None:
    cache = await followed(world)
    v1 = cache.informer
    assert await world.timed_out(cache.follow("v2", ["v2", "v1"])) == "v1"
    assert cache.informer is v1
    assert cache.ready
    assert v1.running
    assert world.switches == []
    pending = cache.pending
    assert pending is not None
    assert not pending.has_synced
    world.server.complete("v2")
    await settle()
    assert world.pokes == 1
    assert await cache.follow("v2", ["v2", "v1"]) == "v2"
    assert world.switches == [(pending, v1)]
    assert cache.informer is pending
    assert cache.ready
    assert cache.pending is None
    assert not v1.running


async def test_a_version_no_longer_served_fails_readiness_until_a_served_one_has_synced(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    cache = await followed(world)
    v1 = cache.informer
    assert await world.timed_out(cache.follow("v2", ["v2"])) == "v1"
    # Its watch would only fail: stopped. Its last content is what is read meanwhile.
    assert not v1.running
    assert cache.informer is v1
    assert v1.store.get("ns", "w") is not None
    assert not cache.ready
    errors_said = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors_said == [
        "the Widget API (widgets.example.com) is no longer served at v1 and its cache at v2 "
        "has not synced: /readyz fails until it has; the content last read is used "
        "meanwhile, and nothing it shows changes until then"
    ]
    world.server.complete("v2")
    await settle()
    assert await cache.follow("v2", ["v2"]) == "v2"
    assert cache.ready
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert "the Widget API (widgets.example.com): read at v2 again; /readyz passes" in said


async def test_no_version_served_fails_readiness_and_says_so_once(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    cache = await followed(world)
    for _ in range(3):
        assert await cache.follow(None, []) == "v1"
    assert not cache.ready
    loud = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(loud) == 1, loud
    assert "no version of it is served: /readyz fails until one is" in loud[0]
    # Served again at the same version: a new informer (the old one was stopped).
    assert await cache.follow("v1", ["v1"]) == "v1"
    assert cache.ready
    assert cache.informer.running


async def test_a_not_found_answer_pokes_the_owner(world: World) -> None:
    cache = await followed(world)
    assert cache.informer.on_failure is not None
    cache.informer.on_failure(errors.NotFound("gone", status=404))
    cache.informer.on_failure(errors.ApiError("boom", status=500))
    assert world.pokes == 1


# ---------------------------------------------------------------- MaybeServed
def maybe_served(world: World, *, use_unsynced: bool) -> tuple[MaybeServed, list[Any]]:
    said: list[Any] = []
    cache = MaybeServed(
        world.informers,
        make=world.make,
        switch=lambda new, old: said.append((new, old)),
        what="the Widget API (widgets.example.com)",
        meanwhile="nothing reads it until it does",
        use_unsynced=use_unsynced,
    )
    cache.poke = world.poke
    return cache, said


async def test_an_api_that_appears_is_read_only_once_synced_unless_told_otherwise(
    world: World,
) -> None:
    strict, said = maybe_served(world, use_unsynced=False)
    await world.timed_out(strict.follow("v1", ["v1"]))
    assert (strict.informer, said) == (None, []), "an unsynced cache would read as empty"
    assert strict.pending is not None
    world.server.complete("v1")
    await settle()
    assert world.pokes == 1
    await strict.follow("v1", ["v1"])
    assert strict.version == "v1"
    assert said == [(strict.informer, None)]
    eager, told = maybe_served(world, use_unsynced=True)
    await world.timed_out(eager.follow("v9", ["v9"]))
    assert eager.informer is not None
    assert not eager.informer.has_synced
    assert told == [(eager.informer, None)]


async def test_an_api_followed_moves_before_it_breaks_and_closes_when_it_goes(
    world: World,
) -> None:
    cache, said = maybe_served(world, use_unsynced=False)
    world.server.complete("v1")
    cache.begin("v1")
    v1 = cache.informer
    assert v1 is not None
    assert said == [(v1, None)]
    await world.timed_out(cache.follow("v2", ["v2", "v1"]))
    assert cache.informer is v1, "the old one is read until the new one has synced"
    world.server.complete("v2")
    await settle()
    await cache.follow("v2", ["v2", "v1"])
    v2 = cache.informer
    assert said[-1] == (v2, v1)
    await cache.follow(None, [])
    assert said[-1] == (None, v2)
    assert cache.informer is None
    assert v2 is not None
    assert not v2.running
