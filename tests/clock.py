"""`FakeClock`: a `runtime.clock.Clock` that moves only when a test says so."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from datetime import UTC, datetime, timedelta


class FakeClock:
    """A clock that only moves when a test calls `advance`.

    `sleep` parks the caller until `advance` moves time past its deadline; after
    each step `advance` yields to the loop so woken tasks run before it returns.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._mono = 1000.0
        self._wall = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self._mono

    def now(self) -> datetime:
        return self._wall

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._seq), fut))
        await fut

    @property
    def sleepers(self) -> int:
        """How many tasks are parked in `sleep` (cancelled ones excluded)."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking each sleeper whose deadline passes, in order."""
        target = self._mono + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            when, _, fut = heapq.heappop(self._sleepers)
            self._step_to(when)
            if not fut.done():
                fut.set_result(None)
            for _ in range(5):
                await asyncio.sleep(0)
        self._step_to(target)
        for _ in range(5):
            await asyncio.sleep(0)

    def _step_to(self, mono: float) -> None:
        if mono > self._mono:
            self._wall += timedelta(seconds=mono - self._mono)
            self._mono = mono
