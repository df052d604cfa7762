"""The export feature's caches and watches, following the APIs as the cluster serves them.

The ServiceExport API and the About API are CRDs someone may install after the
operator started, delete, or change the served versions of. `ExportApis.follow` makes
the feature match what discovery found (`discovery.follow_served_apis`), always making
the new cache before breaking the old one (`runtime/cache/followed.py`):

- a version to move to (the API appeared, or is served at a version preferred to the
  one in effect, or the one in effect is no longer served): its informer is started
  and waited for (10 s); once it has synced it is handed to the feature
  (`PoolExports.use`), its watch declared, the old watch dropped and the old informer
  stopped, and every relay is reconciled. A list slower than the wait is not abandoned:
  it goes on (retried with backoff if it fails), and the switch is made when it
  completes;
- meanwhile, the ServiceExport cache in effect stays in effect while its version is
  served. When none is usable (the old version is no longer served, or there was none)
  nothing is exported and each relay says so truthfully: the API is served, its list
  has not completed (`PoolExports.listing`). The ClusterProperty read is a
  `FollowedCache`, as the DGDs: it stays the old one until the new one has synced,
  even when its version is no longer served (its informer is then stopped, its last
  content read): an unreadable or half-filled cache must not change what the relays
  are told. A stopped informer is never kept once a served version is wanted, the
  one it was on included (served again): a new informer of it is made and switched
  to, so a later change of the property is seen. With no old one, the new cache is
  used after the wait, synced or not, as at start (`DegradedChecks` reports it, each
  relay says the property is unreadable); its sync requeues every relay
  (`Controller.watches(on_sync=...)`), since a sync with no property is no event;
- an API that went away: the feature stops reading it first, then its watch is
  dropped and its informer stopped, so no watch keeps failing against a resource the
  server no longer has; every relay is reconciled (each says `ExportAPIUnavailable`,
  or runs without the cluster ID check).

The export cache is waited for before it is used: read before it synced, it would
show no exports and every pool would try to create exports that exist.

`follow` compares with what is in effect here, not with what it was told last time,
so calling it again with the same value does nothing (or, while a new cache is being
made, only looks whether it has synced).

Its informers call `poke` when their resource answers NotFound (the CRD was deleted),
and a new cache that syncs late pokes too: the owner reads discovery again at once
instead of at the end of its interval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dynamo_pool_operator.api.mcs import CLUSTER_ID_PROPERTY, clusterproperties, serviceexports
from dynamo_pool_operator.pool.exports.feature import ExportCaches, PoolExports
from dynamo_pool_operator.pool.exports.wiring import all_relays, export_changed, export_mapper
from dynamo_pool_operator.runtime import (
    CONTROLLER_UID_INDEX,
    LOW,
    SYNC_TIMEOUT,
    Candidate,
    Controller,
    DegradedChecks,
    FollowedCache,
    Informer,
    SharedInformers,
    index_by_controller_uid,
    poke_on_not_found,
)
from dynamo_pool_operator.runtime.objects import Meta, record

#: The name of the cluster ID check among the optional caches (`DegradedChecks`).
CLUSTER_ID_CHECK = "clusterID"
_EXPORTS_API = "the ServiceExport API (serviceexports.multicluster.x-k8s.io)"
_ABOUT_API = "the About API (clusterproperties.about.k8s.io)"


@record
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
        feature: PoolExports,
        degraded: DegradedChecks,
        *,
        relays: Informer,
        dgds: Informer,
        namespace: str | None,
        sync_timeout: float = SYNC_TIMEOUT,
    ) -> None:
        self.informers = informers
        self.controller = controller
        self.feature = feature
        self.degraded = degraded
        self.relays = relays
        self.namespace = namespace
        self.sync_timeout = sync_timeout
        #: Called when a resource of ours answers NotFound (see the module docstring).
        self.poke: Callable[[], None] = _nothing
        self.dgds = dgds
        self.use_dgds(dgds)
        self._exports: Informer | None = None
        self._export_version: str | None = None
        #: The ClusterProperty read, following the About API (None: not served).
        self._properties: FollowedCache | None = None
        self._export_candidate = Candidate(
            informers,
            self._export_informer,
            what=_EXPORTS_API,
            poke=lambda: self.poke(),
            sync_timeout=sync_timeout,
        )

    @property
    def in_effect(self) -> InEffect:
        about = self._properties.version if self._properties is not None else None
        return InEffect(self._export_version, about)

    @property
    def caches(self) -> ExportCaches | None:
        """The caches the feature reads now (None while no export cache is usable)."""
        return self.feature.caches

    @property
    def pending(self) -> list[Informer]:
        """The informers being made to replace those in effect (readiness does not wait
        for them: the ones in effect serve meanwhile)."""
        properties = self._properties.pending if self._properties is not None else None
        return [i for i in (self._export_candidate.informer, properties) if i is not None]

    def use_dgds(self, dgds: Informer) -> None:
        """Map export events through this DGD cache from now on (the DGD API moved)."""
        self.dgds = dgds

    def begin(self, export_version: str | None, about_version: str | None) -> None:
        """At build time, before the informers start: declare what is served at start
        (the controller waits for the export cache before its first reconcile)."""
        if export_version is not None:
            self._exports = self._export_informer(export_version)
            self._export_version = export_version
            self._watch_exports(self._exports)
        if about_version is not None:
            self._attach_properties(about_version, self._property_informer(about_version))
        self._hand_over()

    async def follow(
        self,
        export_version: str | None,
        about_version: str | None,
        *,
        export_served: Sequence[str],
        about_served: Sequence[str],
    ) -> InEffect:
        """Match the versions wanted (`*_version`, the preferred of those served, as
        `*_served`); return what is in effect afterwards."""
        before = (self.in_effect, self.feature.listing)
        await self._follow_properties(about_version, about_served)
        await self._follow_exports(export_version, export_served)
        self._hand_over()
        if (self.in_effect, self.feature.listing) != before:
            self.controller.enqueue_all(self.relays.store.keys())
        return self.in_effect

    # ------------------------------------------------------------ ServiceExports
    async def _follow_exports(self, want: str | None, served: Sequence[str]) -> None:
        if want is None:
            await self._export_candidate.drop()
            self.feature.listing = None  # not served after all: say that instead
            await self._drop_exports()
            return
        if want == self._export_version:
            await self._export_candidate.drop()
            return
        keep = self._exports is not None and self._export_version in served
        if not keep:
            # Its version is no longer served (writes would fail, its watch too): no
            # cache is usable until the new one has synced, and the relays say so.
            await self._drop_exports()
            self.feature.listing = want
        meanwhile = (
            f"{self._export_version} stays in effect until it does"
            if keep
            else "no export is written until it does, and every relay says so "
            "(Exported=False ExportAPIUnavailable)"
        )
        new = await self._export_candidate.offer(want, meanwhile)
        if new is None:
            return
        old = self._exports
        self._exports, self._export_version = new, want
        self.feature.listing = None
        self._watch_exports(new)
        self._hand_over()  # no pass reads the old cache from here on
        if old is not None:
            self.controller.unwatch(old)
            await self.informers.forget(old)

    async def _drop_exports(self) -> None:
        old = self._exports
        self._exports, self._export_version = None, None
        self._hand_over()  # no pass reads the old cache from here on
        if old is not None:
            self.controller.unwatch(old)
            await self.informers.forget(old)

    def _watch_exports(self, informer: Informer) -> None:
        self.controller.watches(informer, export_mapper(lambda: self.dgds), export_changed)

    def _export_informer(self, version: str) -> Informer:
        informer = self.informers.get(serviceexports(version), self.namespace)
        if not informer.store.has_index(CONTROLLER_UID_INDEX):
            informer.store.add_index(CONTROLLER_UID_INDEX, index_by_controller_uid)
        poke_on_not_found(informer, lambda: self.poke())
        return informer

    # ------------------------------------------------------------ the ClusterProperty
    async def _follow_properties(self, want: str | None, served: Sequence[str]) -> None:
        if want is None:
            await self._detach_properties()
            return
        if self._properties is None:
            # Nothing to keep reading: as at start, the check runs on the new cache, which
            # reports the property unreadable until it has synced (its sync requeues
            # every relay).
            candidate = Candidate(
                self.informers,
                self._property_informer,
                what=_ABOUT_API,
                poke=lambda: self.poke(),
                sync_timeout=self.sync_timeout,
            )
            new = await candidate.offer(
                want, "each relay reports the ClusterProperty unreadable until it does"
            )
            self._attach_properties(want, new if new is not None else candidate.take())
            self._hand_over()
            return
        # The read in effect stays until a new cache has synced, even when its version is
        # no longer served (then its informer is stopped and its last content read): an
        # unreadable or half-filled cache must not change what the relays are told.
        await self._properties.follow(want, served)

    def _property_informer(self, version: str) -> Informer:
        informer = self.informers.get(
            clusterproperties(version),
            keep=lambda o: Meta(o).name == CLUSTER_ID_PROPERTY,
        )
        poke_on_not_found(informer, lambda: self.poke())
        return informer

    def _attach_properties(self, version: str, informer: Informer) -> None:
        self._properties = FollowedCache(
            self.informers,
            informer,
            version,
            make=self._property_informer,
            switch=self._switch_properties,
            what=_ABOUT_API,
            sync_timeout=self.sync_timeout,
            required=False,
        )
        self._properties.poke = lambda: self.poke()
        self._watch_properties(informer)

    def _watch_properties(self, informer: Informer) -> None:
        # Not waited for: an unreadable property is reported per relay; its late sync
        # requeues every relay (all read it), at once. Low priority: a change requeues
        # every relay, and a user's change made meanwhile must not wait behind all of them.
        self.controller.watches(
            informer,
            all_relays(self.relays),
            wait_for_sync=False,
            priority=LOW,
            on_sync=self.relays.store.keys,
        )
        self.degraded.watch(CLUSTER_ID_CHECK, informer)

    def _switch_properties(self, new: Informer, old: Informer) -> None:
        self._hand_over()  # no pass reads the old cache from here on
        self._watch_properties(new)
        self.controller.unwatch(old)
        self.controller.enqueue_all(self.relays.store.keys())

    async def _detach_properties(self) -> None:
        old = self._properties
        self._properties = None
        self._hand_over()
        if old is not None:
            self.degraded.unwatch(CLUSTER_ID_CHECK)
            self.controller.unwatch(old.informer)
            await old.close()

    # ------------------------------------------------------------ the feature
    def _hand_over(self) -> None:
        about = self.in_effect.about_version
        if self._exports is None or self._export_version is None:
            self.feature.use(None, resource=None, about_version=about)
            return
        properties = self._properties.informer if self._properties is not None else None
        self.feature.use(
            ExportCaches(self._exports, properties),
            resource=serviceexports(self._export_version),
            about_version=about,
        )


def _nothing() -> None:
    """No one to tell (until the operator sets `ExportApis.poke`)."""
