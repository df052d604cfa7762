"""Read something again on a schedule and act on each change: APIs that come and go.

A CRD may be installed, deleted or re-versioned under a running controller. Watching
CRDs needs a cluster-wide read grant on every schema and misses aggregated APIs;
discovery needs no grant and is two requests, so it is re-read every `interval`.

`read(current)` returns the value now (keeping what it could not read); a value that
differs goes to `apply(current, new)`, which returns what is now in effect (a step
towards `new` when a part cannot be applied yet). `poke()` runs the next pass now: an
informer whose resource answers NotFound pokes. A failed read keeps `current` and is
logged when failures start and end, not at every attempt.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.clock import Clock, SystemClock

log = logging.getLogger(__name__)

T = TypeVar("T")


class Rediscovery(Generic[T]):
    """`start()` a loop that runs `check()` every `interval` seconds until `stop()`."""

    def __init__(
        self,
        read: Callable[[T], Awaitable[T]],
        apply: Callable[[T, T], Awaitable[T]],
        current: T,
        *,
        interval: float,
        what: str,
        clock: Clock | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be positive, got {interval}")
        self.read = read
        self.apply = apply
        self.current = current
        self.interval = interval
        #: Names what is read, in log lines ("the served APIs").
        self.what = what
        self._clock: Clock = clock or SystemClock()
        #: Passes completed (read, and applied if it changed), failed ones included.
        self.reads = 0
        self._failing = False
        self._lock = asyncio.Lock()
        self._poked = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the loop (needs a running event loop; a second call does nothing)."""
        if not self.running:
            self._task = asyncio.create_task(self._loop(), name=f"rediscovery of {self.what}")

    async def stop(self) -> None:
        """Stop the loop; a pass in progress is cancelled (`apply` must tolerate it)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def poke(self) -> None:
        """Run the next pass now (the loop, if it runs, wakes up)."""
        self._poked.set()

    async def _loop(self) -> None:
        while True:
            await self._wait()
            self._poked.clear()
            await self.check()

    async def _wait(self) -> None:
        """Until the interval ends or `poke()` is called, whichever comes first."""
        waits = [
            asyncio.ensure_future(self._clock.sleep(self.interval)),
            asyncio.ensure_future(self._poked.wait()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def check(self) -> bool:
        """One pass: read, and apply what changed; True if the value in effect changed.
        Never raises but for cancellation."""
        async with self._lock:
            try:
                return await self._check()
            finally:
                self.reads += 1

    async def _check(self) -> bool:
        try:
            new = await self.read(self.current)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._failed(f"reading {self.what} failed", e)
            return False
        if new == self.current:
            self._recovered()
            return False
        try:
            applied = await self.apply(self.current, new)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._failed(f"acting on a change of {self.what} failed", e)
            return False
        self._recovered()
        changed = applied != self.current
        self.current = applied
        return changed

    def _failed(self, what: str, error: Exception) -> None:
        if self._failing:
            log.debug("%s again: %s", what, error)
            return
        self._failing = True
        # An expected failure is one line; a bug has its traceback.
        expected = isinstance(error, errors.ApiError | errors.Reported)
        log.warning(
            "%s (%s: %s); what was found before stays in effect, retried every %gs",
            what,
            type(error).__name__,
            error,
            self.interval,
            exc_info=not expected,
        )

    def _recovered(self) -> None:
        if self._failing:
            self._failing = False
            log.info("%s: read and acted on again", self.what)
