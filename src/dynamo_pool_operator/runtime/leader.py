"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

Our own because the Python clients' electors judge expiry by wall clock, write naive
local times, never count transitions and never release. As client-go's:

* Expiry is judged by our monotonic clock from when we saw the record change, against
  the record's `leaseDurationSeconds`: node clock skew cannot steal a lease early.
* Every write is a PUT with the resourceVersion read: of two contenders one wins.
* The leader stops believing it leads `renew_deadline` after the *start* of its last
  successful renewal; with renew_deadline < lease_duration it has stopped before a
  successor can begin.

`run` returns after a clean stop (lease released) and raises `LeadershipLost`;
`is_leader` turns False at the renew deadline, even mid-request, and gates every write
(`Client.write_gate`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, NoReturn, TypeVar

from prometheus_client import CollectorRegistry, Gauge

from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.clock import Clock, SystemClock
from dynamo_pool_operator.runtime.objects.resources import LEASES
from dynamo_pool_operator.runtime.registry import REGISTRY, per_registry

log = logging.getLogger(__name__)

T = TypeVar("T")


class LeadershipLost(Exception):
    """The lease could not be renewed in time, or another holder took it: the process
    must stop every controller and exit non-zero."""

    def __init__(self, lease: str, identity: str, reason: str) -> None:
        super().__init__(f"lost leadership of lease {lease} as {identity!r}: {reason}")
        self.lease = lease
        self.identity = identity
        self.reason = reason


class _AttemptTimedOut(Exception):
    """An API attempt did not finish within the time the elector could give it."""


def format_micro_time(moment: datetime) -> str:
    """A `metav1.MicroTime`: RFC 3339 in UTC with six fractional digits and 'Z' (the API
    server refuses other shapes); a naive datetime is refused, not taken as local."""
    if moment.tzinfo is None:
        raise ValueError("MicroTime needs an aware datetime; got a naive one")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_identity() -> str:
    """`hostname_uuid`, as controller-runtime: unique even if two pods share a hostname."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@per_registry
def _master_status(registry: CollectorRegistry) -> Gauge:
    """One gauge per registry: several electors (or tests) may share a registry."""
    return Gauge(
        "leader_election_master_status",
        "1 while this process holds the named leader-election lease, else 0.",
        ["name"],
        registry=registry,
    )


class LeaderElector:
    """Acquires, renews and releases one Lease for one identity. `leading` is set while
    we hold it, `lost` when leadership ended involuntarily."""

    def __init__(
        self,
        client: Client,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Clock | None = None,
        release_on_cancel: bool = True,
        registry: CollectorRegistry | None = None,
        jitter_factor: float = 1.2,
        rng: random.Random | None = None,
    ) -> None:
        if not identity:
            raise ValueError("leader election needs a non-empty identity")
        if lease_duration < 1 or lease_duration != int(lease_duration):
            raise ValueError("lease_duration must be whole seconds >= 1 (it is written as such)")
        if not lease_duration > renew_deadline > jitter_factor * retry_period:
            raise ValueError(
                "need lease_duration > renew_deadline > jitter_factor * retry_period, so the "
                "leader stops before a follower may take over and can retry within the deadline"
            )
        if retry_period <= 0 or jitter_factor < 0:
            raise ValueError("retry_period must be > 0 and jitter_factor >= 0")
        self._client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self._clock: Clock = clock or SystemClock()
        self._jitter = jitter_factor
        self._rng = rng or random.Random()
        self._gauge = _master_status(registry if registry is not None else REGISTRY)
        self._gauge.labels(name=name).set(0)
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()
        self._lease: dict[str, Any] | None = None  # last object read or written (with its RV)
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0  # monotonic time we first saw _observed_spec
        self._renewed_at: float | None = None  # start of last successful write; None = follower

    # ------------------------------------------------------------ state
    @property
    def lease(self) -> str:
        """`namespace/name`, as logs and `LeadershipLost` name the lease."""
        return f"{self.namespace}/{self.name}"

    @property
    def holder(self) -> str | None:
        """The holder in the last record we saw ('' when free, None before any read)."""
        if self._observed_spec is None:
            return None
        return str(self._observed_spec.get("holderIdentity") or "")

    @property
    def is_leader(self) -> bool:
        """True only while we hold the lease and the renew deadline has not passed."""
        return (
            self._renewed_at is not None
            and self.holder == self.identity
            and self._clock.monotonic() - self._renewed_at < self.renew_deadline
        )

    def _observed_valid(self) -> bool:
        spec = self._observed_spec or {}
        duration = float(spec.get("leaseDurationSeconds") or 0)  # missing = 0, as client-go
        return self._observed_at + duration > self._clock.monotonic()

    def _observe(self, obj: dict[str, Any], *, written: bool = False) -> None:
        """Remember the record; restart the expiry clock only when its spec changed
        (or we just wrote it), because expiry counts from *our* first sight of it."""
        self._lease = obj
        spec = dict(obj.get("spec") or {})
        if written or spec != self._observed_spec:
            before = self.holder
            self._observed_spec = spec
            self._observed_at = self._clock.monotonic()
            after = self.holder
            if after != before and after not in ("", self.identity):
                log.info("lease %s is held by %r (we are %r)", self.lease, after, self.identity)

    # ------------------------------------------------------------ one attempt
    async def _try_acquire_or_renew(self) -> bool:
        stamp = format_micro_time(self._clock.now())
        if (
            self._renewed_at is not None
            and self._lease is not None
            and self.holder == self.identity
            and self._observed_valid()
        ):
            # Fast path: we lead, so PUT on the cached RV without reading first.
            body = self._with_spec(self._lease, renewTime=stamp)
            try:
                self._observe(await self._client.replace(LEASES, body), written=True)
                return True
            except errors.ApiError as e:
                log.info("renewing lease %s optimistically failed (%s); re-reading", self.lease, e)
        try:
            current = await self._client.get(LEASES, self.name, self.namespace)
        except errors.NotFound:
            created = await self._client.create(LEASES, self._new_lease(stamp), self.namespace)
            self._observe(created, written=True)
            return True
        self._observe(current)
        holder = self.holder
        if holder and holder != self.identity and self._observed_valid():
            return False
        old = self._observed_spec or {}
        if holder == self.identity:
            fields = {"renewTime": stamp, "acquireTime": old.get("acquireTime") or stamp}
        else:
            transitions = int(old.get("leaseTransitions") or 0) + 1
            fields = {"renewTime": stamp, "acquireTime": stamp, "leaseTransitions": transitions}
        body = self._with_spec(current, **fields)
        self._observe(await self._client.replace(LEASES, body), written=True)
        return True

    def _new_lease(self, stamp: str) -> dict[str, Any]:
        return {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_duration),
                "acquireTime": stamp,
                "renewTime": stamp,
                "leaseTransitions": 0,
            },
        }

    def _with_spec(self, obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
        """The object as read (resourceVersion kept: PUT is optimistic) with our holder,
        duration and `fields`; other spec fields kept."""
        spec = dict(obj.get("spec") or {})
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=int(self.lease_duration))
        spec.update(fields)
        body = dict(obj)
        body.setdefault("apiVersion", LEASES.api_version)
        body.setdefault("kind", LEASES.kind)
        body["spec"] = spec
        return body

    async def _bounded(self, work: Awaitable[T], seconds: float) -> T:
        """Run `work` for at most `seconds` of the injected clock, so a hung request cannot
        carry the leader past its renew deadline (`asyncio.wait`: never swallows our own
        cancellation)."""
        task = asyncio.ensure_future(work)
        timer = asyncio.ensure_future(self._clock.sleep(seconds))
        try:
            await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            await _cancel_and_wait(task)
            raise
        finally:
            timer.cancel()
        if not task.done():
            await _cancel_and_wait(task)
            if task.cancelled():
                raise _AttemptTimedOut(f"no answer within {seconds:.1f}s")
        return task.result()

    async def _attempt(self, seconds: float) -> bool:
        """One bounded try. Any failure is a failed try, never a crash: the renew loop
        around `_lose` must not end while workers run."""
        try:
            return await self._bounded(self._try_acquire_or_renew(), seconds)
        except (errors.ApiError, _AttemptTimedOut) as e:
            log.warning("lease %s: attempt by %r failed: %s", self.lease, self.identity, e)
            return False
        except Exception as e:
            log.warning(
                "lease %s: attempt by %r failed: %s: %s",
                self.lease,
                self.identity,
                type(e).__name__,
                e,
                exc_info=True,
            )
            return False

    # ------------------------------------------------------------ lifecycle
    async def acquire(self) -> None:
        """Return once we hold the lease, trying every retry_period (jittered)."""
        if self.is_leader:
            return
        log.info("trying to acquire lease %s as %r", self.lease, self.identity)
        while True:
            started = self._clock.monotonic()
            if await self._attempt(self.renew_deadline):
                self._renewed_at = started
                self.lost.clear()
                self.leading.set()
                self._gauge.labels(name=self.name).set(1)
                log.info("acquired lease %s as %r", self.lease, self.identity)
                return
            await self._clock.sleep(self.retry_period * (1 + self._rng.random() * self._jitter))

    async def renew_loop(self) -> NoReturn:
        """Renew every retry_period until cancelled; raise `LeadershipLost` when no renewal
        succeeded within renew_deadline or another holder has the lease. Cancelled, it
        releases the lease if `release_on_cancel`."""
        if self._renewed_at is None:
            raise RuntimeError("renew_loop() needs the lease: await acquire() first")
        try:
            while True:
                if self._renewed_at is None:  # release() was called while we renewed
                    raise self._lose("stopped leading while renewing")
                deadline = self._renewed_at + self.renew_deadline
                await self._clock.sleep(min(self.retry_period, deadline - self._clock.monotonic()))
                started = self._clock.monotonic()
                if started >= deadline:
                    raise self._lose(f"not renewed within {self.renew_deadline}s")
                if await self._attempt(deadline - started):
                    self._renewed_at = started
                elif self.holder != self.identity:
                    raise self._lose(f"lease is now held by {self.holder!r}")
        except LeadershipLost:
            raise
        except Exception as e:
            # Leadership ends one way only, whatever went wrong here.
            raise self._lose(f"renewing failed: {type(e).__name__}: {e}") from e
        except asyncio.CancelledError:
            if self.release_on_cancel:
                await self.release()
            elif self._renewed_at is not None:
                self._stop_leading()
                log.info("stopped leading %s as %r (not released)", self.lease, self.identity)
            raise

    async def run(self, on_started_leading: Callable[[], Awaitable[None]]) -> None:
        """Acquire, then run `on_started_leading()` while renewing. The work is always
        stopped before the lease is released, so a successor never overlaps our last
        writes; leadership lost cancels it and raises `LeadershipLost`."""
        await self.acquire()
        work = asyncio.ensure_future(on_started_leading())
        renew = asyncio.ensure_future(self.renew_loop())
        try:
            await asyncio.wait({work, renew}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Stop the work, then the renewals (which release); nested, so a cancellation
            # landing meanwhile still stops the renewals.
            try:
                await _cancel_and_wait(work)
            finally:
                await _cancel_and_wait(renew)
        if renew.done() and not renew.cancelled():
            renew.result()  # raises LeadershipLost: the renew loop ends no other way
        work.result()

    async def release(self) -> bool:
        """Give the lease up so a successor acquires at once (holder '', 1 s), only if the
        record still names us; only once renew_loop has stopped. Returns whether it was
        released; else it simply expires."""
        if self.holder != self.identity:
            return False
        self._stop_leading()
        try:
            released = await self._bounded(self._release_once(), self.renew_deadline)
        except (errors.ApiError, _AttemptTimedOut) as e:
            log.warning("release of %s as %r failed: %s", self.lease, self.identity, e)
            return False
        if released:
            log.info("released lease %s as %r", self.lease, self.identity)
        return released

    async def _release_once(self) -> bool:
        current = await self._client.get(LEASES, self.name, self.namespace)
        self._observe(current)
        if self.holder != self.identity:
            return False
        stamp = format_micro_time(self._clock.now())
        body = self._with_spec(current, renewTime=stamp, acquireTime=stamp)
        body["spec"].update(holderIdentity="", leaseDurationSeconds=1)
        self._observe(await self._client.replace(LEASES, body), written=True)
        return True

    def _stop_leading(self) -> None:
        self._renewed_at = None
        self.leading.clear()
        self._gauge.labels(name=self.name).set(0)

    def _lose(self, reason: str) -> LeadershipLost:
        self._stop_leading()
        self.lost.set()
        log.error("lost lease %s as %r: %s", self.lease, self.identity, reason)
        return LeadershipLost(self.lease, self.identity, reason)


async def _cancel_and_wait(task: asyncio.Future[Any]) -> None:
    """Cancel `task` and wait for its cleanup; its outcome stays for `result()`, marked
    retrieved. A cancellation of the waiter itself still propagates."""
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()
