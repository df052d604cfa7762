"""Waiting for the cluster to come round, and saying what it shows instead when it
does not: a timeout alone tells a failing test's reader nothing."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tests.harness import eventually

T = TypeVar("T")


async def eventually_or(
    probe: Callable[[], Awaitable[T]],
    why: Callable[[], Awaitable[str] | str],
    timeout: float = 30,
) -> T:
    """`eventually(probe)`, failing with `why()` (what is the case instead) if it never is."""
    try:
        return await eventually(probe, timeout=timeout)
    except AssertionError as e:
        said = why()
        raise AssertionError(await said if inspect.isawaitable(said) else said) from e
