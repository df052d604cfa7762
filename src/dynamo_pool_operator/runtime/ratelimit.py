"""Rate limiters: how long a key (or a request) waits before it goes.

For the work queue's retries (`ExponentialBackoff`; `TokenBucket` and `MaxOf` rebuild
client-go's older default), the client's `qps` and the metrics server's reviews
(`TokenBucket`), and the informers' reconnects (`Backoff`, jittered so informers that
failed together do not retry together). Time comes from an injected `Clock`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

from dynamo_pool_operator.runtime.clock import Clock, SystemClock

__all__ = ["Backoff", "ExponentialBackoff", "MaxOf", "RateLimiter", "TokenBucket"]

K = TypeVar("K", bound=Hashable)
_K_contra = TypeVar("_K_contra", bound=Hashable, contravariant=True)


class RateLimiter(Protocol[_K_contra]):
    """Decides how long a key waits before its next retry (`when` records the attempt;
    `failures` is the pure query)."""

    def when(self, key: _K_contra) -> float:
        """Record one more retry of `key` and return how many seconds it should wait."""
        ...

    def forget(self, key: _K_contra) -> None:
        """Stop tracking `key` (it succeeded): its next retry starts from scratch."""
        ...

    def failures(self, key: _K_contra) -> int:
        """How many retries of `key` have been recorded since it was last forgotten."""
        ...


class ExponentialBackoff:
    """Per-key exponential backoff, ``base * 2**failures`` seconds capped at `cap`: one
    broken object backs off without slowing the healthy ones."""

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        if base < 0 or cap < 0:
            raise ValueError(f"backoff base and cap must be >= 0, got base={base} cap={cap}")
        self._base = base
        self._cap = cap
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        exponent = self._failures.get(key, 0)
        self._failures[key] = exponent + 1
        try:
            delay = self._base * 2.0**exponent
        except OverflowError:
            return self._cap
        return min(delay, self._cap)

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def failures(self, key: Hashable) -> int:
        return self._failures.get(key, 0)


class TokenBucket:
    """One bucket shared by all keys: at most `qps` retries per second after a `burst`,
    bounding the total when many keys fail at once. Every `when` reserves a token, so
    delays grow with the debt, as golang.org/x/time/rate's ``Reserve().Delay()``."""

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Clock | None = None) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"token bucket needs qps > 0 and burst >= 1, got {qps}/{burst}")
        self._qps = qps
        self._burst = float(burst)
        self._clock: Clock = clock or SystemClock()
        self._tokens = float(burst)
        self._last = self._clock.monotonic()

    def _refill(self) -> None:
        now = self._clock.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
        self._last = now

    def when(self, key: Hashable) -> float:
        self._refill()
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self._qps

    def take(self) -> float:
        """Take a token if one is there and return 0; else take nothing (as rate's
        ``Allow``) and return the seconds until one will be."""
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self._qps

    def forget(self, key: Hashable) -> None:
        return None

    def failures(self, key: Hashable) -> int:
        return 0


class MaxOf(Generic[K]):
    """Combines limiters: the longest delay wins, and every limiter records each retry."""

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        if not limiters:
            raise ValueError("MaxOf needs at least one rate limiter")
        self._limiters = limiters

    def when(self, key: K) -> float:
        # Every limiter must see the retry (a list, not a generator short-circuit).
        return max([limiter.when(key) for limiter in self._limiters])

    def forget(self, key: K) -> None:
        for limiter in self._limiters:
            limiter.forget(key)

    def failures(self, key: K) -> int:
        return max(limiter.failures(key) for limiter in self._limiters)


class Backoff:
    """Exponential backoff: `initial`, then x`factor` per failure up to `maximum`, each
    delay shortened by a random fraction up to `jitter`."""

    def __init__(
        self,
        initial: float = 0.8,
        maximum: float = 30.0,
        *,
        factor: float = 2.0,
        jitter: float = 0.2,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.jitter = jitter
        self._rng = rng
        self._base = initial

    def next_delay(self) -> float:
        delay = self._base * (1 - self.jitter * self._rng())
        self._base = min(self.maximum, self._base * self.factor)
        return delay

    def reset(self) -> None:
        self._base = self.initial
