"""Caches that follow the version their API is served at: made before broken.

A CRD's served versions change under a running controller. Dropping the old cache
first leaves readers with an empty store ("no objects") for as long as the new list
takes, and a slow list (large, loaded etcd, a conversion webhook) restarted on every
pass never ends. So the new cache is made first, and kept being made:

- `Candidate`: the informer for the version wanted now, waited for (`sync_timeout`)
  and left running if slower; `poke` is called once it syncs, so its owner switches
  then. Dropped when another version, or none, is wanted.
- `FollowedCache`: a cache every reconcile reads (the DGDs, the ClusterProperty). It
  reads the old cache until the candidate has synced. When its version stops being
  served its informer is stopped and its last content stays what is read (a stopped
  informer is never read as live, even at that version served again); a required
  cache is then not `ready`, so readiness fails rather than run on stale data.

Owners act from one task (a rediscovery pass), so nothing here takes a lock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from dynamo_pool_operator.runtime.cache.informer import Informer
from dynamo_pool_operator.runtime.cache.shared import SharedInformers
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.clock import Clock, SystemClock

log = logging.getLogger(__name__)

#: How long a new cache is waited for before its owner goes on without it (it keeps
#: being made).
SYNC_TIMEOUT = 10.0


def poke_on_not_found(informer: Informer, poke: Callable[[], None]) -> None:
    """Call `poke` when the informer's resource answers NotFound (its API went away), so
    its owner reads discovery again at once."""

    def failed(error: BaseException | None) -> None:
        if isinstance(error, errors.NotFound):
            poke()

    informer.on_failure = failed


class Candidate:
    """The informer being made for the version its owner wants now (at most one)."""

    def __init__(
        self,
        informers: SharedInformers,
        make: Callable[[str], Informer],
        *,
        what: str,
        poke: Callable[[], None],
        sync_timeout: float = SYNC_TIMEOUT,
        clock: Clock | None = None,
    ) -> None:
        self.informers = informers
        self.make = make
        #: Names the API in log lines ("the About API (clusterproperties.about.k8s.io)").
        self.what = what
        self.poke = poke
        self.sync_timeout = sync_timeout
        self._clock: Clock = clock or SystemClock()
        self.version: str | None = None
        self.informer: Informer | None = None
        self._started = 0.0
        self._late: asyncio.Task[None] | None = None

    async def offer(self, version: str, meanwhile: str) -> Informer | None:
        """The informer for `version` once it has synced, handed to the caller; else None
        while it is being made. The first offer starts it and waits up to `sync_timeout`
        (then one warning says what holds `meanwhile`); later offers only look."""
        if self.version != version:
            await self.drop()
            self.informer, self.version = self.make(version), version
            self._started = self._clock.monotonic()
            if not await self.informer.wait_synced(self.sync_timeout):
                log.warning(
                    "%s is served at %s, but its list did not complete within %.0fs: %s; "
                    "the list goes on, retried with backoff if it fails (the informer's "
                    "warnings say why it is slow or refused)",
                    self.what,
                    version,
                    self.sync_timeout,
                    meanwhile,
                )
                self._late = asyncio.create_task(
                    self._tell_when_synced(self.informer, version),
                    name=f"candidate {self.informer.description}",
                )
                return None
        if self.informer is not None and self.informer.has_synced:
            return self.take()
        return None

    def take(self) -> Informer:
        """The candidate, handed to the caller as it is (synced or not)."""
        informer = self.informer
        assert informer is not None, "no candidate to take"
        self._forget_late()
        self.informer, self.version = None, None
        return informer

    async def drop(self) -> None:
        """No longer wanted: stop it (a later offer of its version starts a new one)."""
        self._forget_late()
        informer, self.informer, self.version = self.informer, None, None
        if informer is not None:
            await self.informers.forget(informer)

    def _forget_late(self) -> None:
        if self._late is not None:
            self._late.cancel()
            self._late = None

    async def _tell_when_synced(self, informer: Informer, version: str) -> None:
        if await informer.wait_synced(None):
            log.info(
                "%s: the list at %s completed after %.0fs",
                self.what,
                version,
                self._clock.monotonic() - self._started,
            )
            self.poke()


class FollowedCache:
    """A cache that follows its API's served version (see the module docstring)."""

    def __init__(
        self,
        informers: SharedInformers,
        informer: Informer,
        version: str,
        *,
        make: Callable[[str], Informer],
        switch: Callable[[Informer, Informer], None],
        what: str,
        sync_timeout: float = SYNC_TIMEOUT,
        required: bool = True,
    ) -> None:
        self.informers = informers
        self.informer = informer
        self.version = version
        #: Hands the readers over (`switch(new, old)`) once the new informer is in effect.
        self.switch = switch
        self.what = what
        #: Whether a stale cache fails readiness (and is said at error level).
        self.required = required
        #: False while the content read is the last of a version no longer served.
        self.live = True
        #: Called when a resource of ours answers NotFound, or a late candidate synced.
        self.poke: Callable[[], None] = _nothing
        self._make = make
        self._stale_said = False
        self._candidate = Candidate(
            informers, self._made, what=what, poke=lambda: self.poke(), sync_timeout=sync_timeout
        )
        poke_on_not_found(informer, lambda: self.poke())

    @property
    def ready(self) -> bool:
        """Readiness: the cache read is of a served version, and has synced."""
        return self.live and self.informer.has_synced

    @property
    def pending(self) -> Informer | None:
        """The informer being made to replace the one read (readiness does not wait for it)."""
        return self._candidate.informer

    def _made(self, version: str) -> Informer:
        informer = self._make(version)
        poke_on_not_found(informer, lambda: self.poke())
        return informer

    async def follow(self, want: str | None, served: Sequence[str]) -> str:
        """Follow the cluster serving `served` (preferred first), `want` the version to
        read (None: none is served). Returns the version whose content is read now. A
        stopped cache is read until a new informer has synced, whatever its version."""
        if self.live and self.version not in served:
            self.live = False
            await self.informers.forget(self.informer)  # its store keeps the last content
        if want is None:
            await self._candidate.drop()
            self._stale("no version of it is served", "until one is")
            return self.version
        if self.live and want == self.version:
            await self._candidate.drop()
            return self.version
        meanwhile = (
            f"{self.version} stays in effect until it does"
            if self.live
            else (
                f"/readyz fails until it does, and the content last read at {self.version} "
                "is used meanwhile"
                if self.required
                else f"the content last read at {self.version} is used until it does"
            )
        )
        new = await self._candidate.offer(want, meanwhile)
        if new is None:
            if not self.live:
                self._stale(f"its cache at {want} has not synced", "until it has")
            return self.version
        old, was_live = self.informer, self.live
        self.informer, self.version, self.live = new, want, True
        self.switch(new, old)
        if was_live and old is not new:
            await self.informers.forget(old)
        if self._stale_said:
            self._stale_said = False
            log.info(
                "%s: read at %s again%s",
                self.what,
                want,
                "; /readyz passes" if self.required else "",
            )
        return self.version

    async def close(self) -> None:
        """No longer wanted: stop the candidate and the informer (its store keeps the last
        content)."""
        await self._candidate.drop()
        if self.live:
            self.live = False
            await self.informers.forget(self.informer)

    def _stale(self, why: str, until: str) -> None:
        if self._stale_said:
            return
        self._stale_said = True
        log.log(
            logging.ERROR if self.required else logging.WARNING,
            "%s is no longer served at %s and %s%s; the content last read is used meanwhile, "
            "and nothing it shows changes until then",
            self.what,
            self.version,
            why,
            f": /readyz fails {until}" if self.required else "",
        )


def _nothing() -> None:
    """No one to tell (until the owner sets `poke`)."""


class MaybeServed:
    """A cache of an API that may not be served at all: made when the API appears,
    following its version (`FollowedCache`, never gating readiness), closed when it goes.
    The owner hears of each change with `switch(new, old)` (None: none). A new API's
    first cache is handed over unsynced after the wait when `use_unsynced`, else once it
    has synced."""

    def __init__(
        self,
        informers: SharedInformers,
        *,
        make: Callable[[str], Informer],
        switch: Callable[[Informer | None, Informer | None], None],
        what: str,
        meanwhile: str,
        use_unsynced: bool,
        sync_timeout: float = SYNC_TIMEOUT,
    ) -> None:
        self.informers = informers
        self.switch = switch
        self.what = what
        self.meanwhile = meanwhile
        self.use_unsynced = use_unsynced
        self.sync_timeout = sync_timeout
        #: Called when a resource of ours answers NotFound, or a late cache synced.
        self.poke: Callable[[], None] = _nothing
        self._make = make
        self.cache: FollowedCache | None = None
        self._candidate = Candidate(
            informers, self._made, what=what, poke=lambda: self.poke(), sync_timeout=sync_timeout
        )

    @property
    def version(self) -> str | None:
        return self.cache.version if self.cache is not None else None

    @property
    def informer(self) -> Informer | None:
        return self.cache.informer if self.cache is not None else None

    @property
    def pending(self) -> Informer | None:
        """The informer being made (readiness does not wait for it)."""
        if self.cache is not None:
            return self.cache.pending
        return self._candidate.informer

    def _made(self, version: str) -> Informer:
        informer = self._make(version)
        poke_on_not_found(informer, lambda: self.poke())
        return informer

    def begin(self, version: str | None) -> None:
        """At build time, before the informers start: the version served at start."""
        if version is not None:
            self._attach(version, self._made(version))

    async def follow(self, want: str | None, served: Sequence[str]) -> None:
        """Follow the cluster serving `served` (preferred first), `want` the version to
        read (None: the API is not served)."""
        if want is None:
            await self.close()
            return
        if self.cache is not None:
            await self.cache.follow(want, served)
            return
        new = await self._candidate.offer(want, self.meanwhile)
        if new is None and self.use_unsynced:
            new = self._candidate.take()
        if new is not None:
            self._attach(want, new)

    def _attach(self, version: str, informer: Informer) -> None:
        self.cache = FollowedCache(
            self.informers,
            informer,
            version,
            make=self._made,
            switch=lambda new, old: self.switch(new, old),
            what=self.what,
            sync_timeout=self.sync_timeout,
            required=False,
        )
        self.cache.poke = lambda: self.poke()
        self.switch(informer, None)

    async def close(self) -> None:
        """The API went away: its readers stop reading first, then its informer stops."""
        await self._candidate.drop()
        old, self.cache = self.cache, None
        if old is not None:
            self.switch(None, old.informer)
            await old.close()
