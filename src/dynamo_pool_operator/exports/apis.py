"""The export feature's caches and watches, following the APIs as the cluster serves them.

The ServiceExport API and the About API are CRDs someone may install after the
operator started, delete, or change the served versions of. `ExportApis.follow(served)`
makes the feature match what discovery found (`discovery.follow_served_apis`):

- an API that appeared: its informer is started and (the exports) waited for, then
  handed to the contributor, its watch declared, and every relay reconciled;
- an API that went away: the contributor stops reading it first, then its watch is
  dropped and its informer stopped, so no watch keeps failing against a resource the
  server no longer has; every relay is reconciled (each says `ExportAPIUnavailable`,
  or runs without the cluster ID check);
- a version change is the one going and the other coming.

The export cache is waited for before it is used: read before it synced, it would
show no exports and every pool would try to create exports that exist. One that does
not sync in `sync_timeout` (its list is refused) is dropped and tried again on the
next pass, and `follow` says the API is still not in effect. The ClusterProperty cache
is optional, as at start: used after a short wait, synced or not (`DegradedChecks`
reports it while unreadable).

`follow` compares with what is in effect here, not with what it was told last time,
so calling it again with the same value does nothing.

Its informers call `poke` when their resource answers NotFound (the CRD was deleted):
the owner reads discovery again at once instead of at the end of its interval.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..api.mcs import CLUSTER_ID_PROPERTY, clusterproperties, serviceexports
from ..runtime import errors
from ..runtime.controller import Controller
from ..runtime.degraded import DegradedChecks
from ..runtime.informer import Informer
from ..runtime.meta import Meta
from ..runtime.queue import LOW
from ..runtime.shared_informers import SharedInformers
from ..runtime.store import CONTROLLER_UID_INDEX, index_by_controller_uid
from .contributor import ExportCaches, PoolExports
from .wiring import (
    FRONTEND_SERVICE_INDEX,
    all_relays,
    export_changed,
    export_mapper,
    frontend_services,
)

log = logging.getLogger(__name__)

#: The name of the cluster ID check among the optional caches (`DegradedChecks`).
CLUSTER_ID_CHECK = "clusterID"
#: How long a new export cache may take to sync before it is dropped (tried again next
#: pass), and how long a new ClusterProperty cache is waited for before it is used.
SYNC_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class InEffect:
    """The versions the feature uses now (None: not served, the part is off)."""

    serviceexport_version: str | None
    about_version: str | None


class ExportApis:
    """Owns the export feature's informers and watches for one controller."""

    def __init__(
        self,
        informers: SharedInformers,
        controller: Controller,
        contributor: PoolExports,
        degraded: DegradedChecks,
        *,
        relays: Informer,
        dgds: Informer,
        namespace: str | None,
        sync_timeout: float = SYNC_TIMEOUT,
    ) -> None:
        self.informers = informers
        self.controller = controller
        self.contributor = contributor
        self.degraded = degraded
        self.relays = relays
        self.dgds = dgds
        self.namespace = namespace
        self.sync_timeout = sync_timeout
        #: Called when a resource of ours answers NotFound (see the module docstring).
        self.poke: Callable[[], None] = _nothing
        self._exports: Informer | None = None
        self._export_version: str | None = None
        self._properties: Informer | None = None
        self._about_version: str | None = None
        if not dgds.store.has_index(FRONTEND_SERVICE_INDEX):
            dgds.store.add_index(FRONTEND_SERVICE_INDEX, frontend_services)

    @property
    def in_effect(self) -> InEffect:
        return InEffect(self._export_version, self._about_version)

    @property
    def caches(self) -> ExportCaches | None:
        """The caches the contributor reads now (None while no export API is served)."""
        return self.contributor.caches

    def begin(self, export_version: str | None, about_version: str | None) -> None:
        """At build time, before the informers start: declare what is served at start
        (the controller waits for the export cache before its first reconcile)."""
        if export_version is not None:
            self._exports = self._export_informer(export_version)
            self._export_version = export_version
            self.controller.watches(self._exports, export_mapper(self.dgds), export_changed)
        if about_version is not None:
            self._attach_properties(about_version)
        self._hand_over()

    async def follow(self, export_version: str | None, about_version: str | None) -> InEffect:
        """Match the served versions; return what is in effect afterwards."""
        before = self.in_effect
        if about_version != self._about_version:
            await self._detach_properties()
            if about_version is not None:
                informer = self._property_informer(about_version)
                await informer.wait_synced(self.sync_timeout)
                self._attach_properties(about_version, informer)
        if export_version != self._export_version:
            await self._follow_exports(export_version)
        self._hand_over()
        if self.in_effect != before:
            self.controller.enqueue_all(self.relays.store.keys())
        return self.in_effect

    async def _follow_exports(self, version: str | None) -> None:
        old = self._exports
        self._exports, self._export_version = None, None
        self._hand_over()  # no pass reads the old cache from here on
        if old is not None:
            self.controller.unwatch(old)
            await self.informers.forget(old)
        if version is None:
            return
        informer = self._export_informer(version)
        if not await informer.wait_synced(self.sync_timeout):
            await self.informers.forget(informer)
            log.warning(
                "the ServiceExport API is served at %s, but its cache did not sync within "
                "%.0fs (see the informer's warnings, e.g. Forbidden): exports stay off, "
                "tried again on the next discovery",
                version,
                self.sync_timeout,
            )
            return
        self._exports, self._export_version = informer, version
        self.controller.watches(informer, export_mapper(self.dgds), export_changed)

    def _hand_over(self) -> None:
        if self._exports is None or self._export_version is None:
            self.contributor.use(None, resource=None, about_version=self._about_version)
            return
        self.contributor.use(
            ExportCaches(self._exports, self._properties),
            resource=serviceexports(self._export_version),
            about_version=self._about_version,
        )

    def _export_informer(self, version: str) -> Informer:
        informer = self.informers.get(serviceexports(version), self.namespace)
        if not informer.store.has_index(CONTROLLER_UID_INDEX):
            informer.store.add_index(CONTROLLER_UID_INDEX, index_by_controller_uid)
        informer.on_failure = self._failed
        return informer

    def _property_informer(self, version: str) -> Informer:
        informer = self.informers.get(
            clusterproperties(version),
            keep=lambda o: Meta(o).name == CLUSTER_ID_PROPERTY,
        )
        informer.on_failure = self._failed
        return informer

    def _failed(self, error: BaseException | None) -> None:
        if isinstance(error, errors.NotFound):
            self.poke()

    def _attach_properties(self, version: str, informer: Informer | None = None) -> None:
        informer = informer or self._property_informer(version)
        self._properties, self._about_version = informer, version
        # Not waited for: an unreadable property is reported per relay and retried.
        # Low priority: a change requeues every relay, and a user's change made
        # meanwhile must not wait behind all of them.
        self.controller.watches(
            informer, all_relays(self.relays), wait_for_sync=False, priority=LOW
        )
        self.degraded.watch(CLUSTER_ID_CHECK, informer)

    async def _detach_properties(self) -> None:
        old = self._properties
        self._properties, self._about_version = None, None
        self._hand_over()
        if old is not None:
            self.degraded.unwatch(CLUSTER_ID_CHECK)
            self.controller.unwatch(old)
            await self.informers.forget(old)


def _nothing() -> None:
    """No one to tell (until the operator sets `ExportApis.poke`)."""
