"""Time, injectable: the queue, the event recorder and the elector take a `Clock`, so
unit tests drive time by hand (`tests/clock.py`) instead of sleeping.

`monotonic()` is for durations and deadlines; `now()` is wall-clock UTC for the
timestamps written into objects (Lease renewTime, Event eventTime).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))
