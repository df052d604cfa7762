"""Read something again on a schedule and act on each change: APIs that come and go.

A cluster's APIs change under a running controller: a CRD is installed after it
started, or deleted, or starts serving another version. The alternative to polling
is a watch on CustomResourceDefinitions, which needs a read grant in
`apiextensions.k8s.io` (cluster-wide: it shows every CRD's schema) and covers CRDs
only, not aggregated APIs. Discovery needs no grant (every authenticated user may
read it) and is two requests with aggregated discovery, so it is re-read every
`interval` seconds (the operator's default is 30 s, the garbage collector's resync
of its own discovery).

`Rediscovery` knows nothing of what it reads: `read(current)` returns the value as
it is now (it may keep parts of `current` it could not read this time), and a value
that differs from `current` is handed to `apply(current, new)`, which acts on the
difference and returns the value now in effect: `new`, or a step towards it when a
part could not be applied yet (that part is then offered again after the next
read). Each change is acted on once; an unchanged value costs the read only.

`poke()` runs the next pass now rather than at the end of the interval: an informer
whose resource answers NotFound pokes, so an API that went away is noticed within a
second, not an interval (pokes while a pass waits are one pass).

A failed read keeps `current` in effect. It is logged once when the failures
start and once when reading works again, not at every attempt: the API server
being unreachable is reported by every other request already.
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
        """One pass: read, and apply what changed. True if the value in effect changed.
        Never raises but for cancellation: a failure is logged and retried next pass."""
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
        # An expected failure (the API server unreachable) is one line; a bug has its
        # traceback.
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
