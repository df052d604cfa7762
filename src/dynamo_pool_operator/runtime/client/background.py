"""Writes of background work: at most a few in flight.

A mass event (the initial list of a start or failover, a relist, a requeue of every
relay because one shared input changed) is reconciled at `LOW` priority (queue.py),
and a worker is kept for `NORMAL` keys, so a user's change made meanwhile is taken at
once. Its writes still meet the API server the mass event is loading: with every
worker writing, each write waits behind the others at the server (on a saturated
server a write's latency is about the writes in flight over the server's rate). So
the writes made for `LOW` keys are capped (`BackgroundWrites`): the server's queue
stays short and a user's write gets through it quickly, while the backlog still
keeps the server busy.

Which writes are background ones is told by a context variable that the controller
sets around the reconcile of a `LOW` key (`background`); the tasks a reconcile
starts inherit it. Events are background writes too (the recorder's writers run in
that mode): never urgent, and a third of a cold start's writes. Leader election's
writes are never capped.

A lone change's writes go first (`ChangesFirst`, decision 0015). The worker kept for
changes takes a key only of a namespace with none in flight: its pass is a change made
alone, beside a backlog or another namespace's mass change, and waits for a worker no
more. What it still waits for is the server, which is busy with every other pass's
writes: a chain of three (the relay's objects, its exports, its status) took 78 ms at
p50 beside a tenant's mass change. So while such a pass is in flight, the writes of
other passes and background writes wait for it to end, each at most `hold` seconds:
the server meets the change's writes with little else in hand, and the backlog goes
on the moment the pass is done. Writes outside a pass (leader election, start-up)
never wait.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar

_BACKGROUND: ContextVar[bool] = ContextVar("background_work", default=False)
#: The pass the current task writes for: None outside a pass, True for a lone change's.
_CHANGE: ContextVar[bool | None] = ContextVar("lone_change", default=None)


@contextlib.contextmanager
def background(on: bool) -> Iterator[None]:
    """Within this block (and the tasks started in it), writes are background ones
    when `on`."""
    token = _BACKGROUND.set(on)
    try:
        yield
    finally:
        _BACKGROUND.reset(token)


def in_background() -> bool:
    return _BACKGROUND.get()


class BackgroundWrites:
    """At most `limit` background writes in flight; other writes pass at once."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"background writes in flight must be at least 1, got {limit}")
        self.limit = limit
        self._free = limit
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def in_flight(self) -> int:
        return self.limit - self._free

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a slot for one write if it is a background one (FIFO among waiters)."""
        if not in_background():
            yield
            return
        if self._free > 0 and not self._waiters:
            self._free -= 1
        else:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter  # the releaser handed its slot over
            except asyncio.CancelledError:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                elif waiter.done() and not waiter.cancelled():
                    self._release()  # handed a slot just as we were cancelled: pass it on
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)  # the slot goes to the waiter, still taken
                return
        self._free += 1


class ChangesFirst:
    """While a lone change's pass is in flight, the writes of other passes and background
    writes wait for it to end (each at most `hold` seconds); see the module docstring."""

    def __init__(self, hold: float) -> None:
        if hold <= 0:
            raise ValueError(f"a write waits for a change's pass at most hold > 0 s, got {hold}")
        self.hold = hold
        self._changes = 0
        self._calm = asyncio.Event()
        self._calm.set()

    @property
    def changes_in_flight(self) -> int:
        return self._changes

    @contextlib.asynccontextmanager
    async def pass_of(self, change: bool) -> AsyncIterator[None]:
        """Around one pass (and the tasks it starts); `change`: a lone change's."""
        token = _CHANGE.set(change)
        if change:
            self._changes += 1
            self._calm.clear()
        try:
            yield
        finally:
            _CHANGE.reset(token)
            if change:
                self._changes -= 1
                if not self._changes:
                    self._calm.set()

    async def turn(self) -> None:
        """Before a write: wait while a change's pass is in flight, unless this write is
        that pass's own or made outside any pass (and not a background one)."""
        if not self._changes:
            return
        change = _CHANGE.get()
        if change or (change is None and not _BACKGROUND.get()):
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._calm.wait(), self.hold)
