"""Unit tests for runtime.cache.shared: forgetting an informer and the final stop.

Sharing by key, refused second transforms and the start/sync/stop cycle are tested in
test_informer.py, next to the informer they share."""

from __future__ import annotations

import asyncio

import pytest

from dynamo_pool_operator.runtime.cache.shared import SharedInformers
from tests.unit.runtime.cache.support import RES, Silent


async def test_a_forgotten_informer_is_stopped_and_the_next_ask_makes_a_new_running_one() -> None:
    shared = SharedInformers(Silent())
    old = shared.get(RES, "ns")
    shared.start_all()
    await asyncio.sleep(0)
    assert old.running
    await shared.forget(old)
    assert not old.running
    assert shared.informers() == []
    new = shared.get(RES, "ns")
    assert new is not old
    await asyncio.sleep(0)
    assert new.running
    await shared.stop_all()
    assert not new.running


async def test_nothing_new_is_made_after_stop_all() -> None:
    shared = SharedInformers(Silent())
    known = shared.get(RES, "ns")
    await shared.stop_all()
    assert shared.get(RES, "ns") is known
    with pytest.raises(RuntimeError, match="already stopped"):
        shared.get(RES, "other")
