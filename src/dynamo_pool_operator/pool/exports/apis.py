"""The export feature's caches and watches, following the APIs as the cluster serves them.

The ServiceExport, About and DCD APIs are CRDs that may be installed after the operator
started, deleted, or re-versioned. `ExportApis.follow` makes the feature match what
discovery found, always making the new cache before breaking the old one
(`runtime/cache/followed.py`):

- a new version's informer is started and waited for; once synced it is handed to the
  feature (`PoolExports.use`), its watch declared, the old one dropped and every relay
  reconciled. A slower list goes on and the switch is made when it completes;
- meanwhile the ServiceExport cache in effect stays while its version is served; with
  none usable nothing is exported and each relay says the list has not completed
  (`PoolExports.listing`). An export cache read before it synced would show no exports,
  and every pool would create exports that exist;
- the ClusterProperty read is a `FollowedCache`: an unreadable or half-filled cache must
  not change what the relays are told. With no old one, a new one is used unsynced, as
  at start (each relay says the property is unreadable), its sync requeuing every relay;
- an API that went away: the feature stops reading it, then its watch and informer go,
  and every relay is reconciled.

`follow` compares with what is in effect, so calling it again with the same value does
nothing. NotFound from an informer, and a late sync, poke the owner to read discovery
again at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dynamo_pool_operator.api.dgd import DCD_PLURAL
from dynamo_pool_operator.api.dgd import GROUP as DGD_GROUP
from dynamo_pool_operator.api.mcs import CLUSTER_ID_PROPERTY, clusterproperties, serviceexports
from dynamo_pool_operator.pool.exports.feature import ExportCaches, PoolExports
from dynamo_pool_operator.pool.exports.wiring import (
    all_relays,
    dcd_cache,
    export_changed,
    export_mapper,
    relay_of_controller,
)
from dynamo_pool_operator.runtime import (
    CONTROLLER_UID_INDEX,
    LOW,
    SYNC_TIMEOUT,
    Candidate,
    Controller,
    DegradedChecks,
    Informer,
    MaybeServed,
    Obj,
    SharedInformers,
    index_by_controller_uid,
    poke_on_not_found,
    spec_or_metadata_changed,
)
from dynamo_pool_operator.runtime.objects import Meta, record

#: The name of the cluster ID check among the optional caches (`DegradedChecks`).
CLUSTER_ID_CHECK = "clusterID"
_EXPORTS_API = "the ServiceExport API (serviceexports.multicluster.x-k8s.io)"
_ABOUT_API = "the About API (clusterproperties.about.k8s.io)"
_DCD_API = f"the DynamoComponentDeployment API ({DCD_PLURAL}.{DGD_GROUP})"


def is_cluster_id_property(obj: Obj) -> bool:
    """The one ClusterProperty the check reads (a function of its own: the shared informer
    factory tells filters apart by identity)."""
    return Meta(obj).name == CLUSTER_ID_PROPERTY


@record
class InEffect:
    """The versions the feature uses now (None: not served, the part is off)."""

    serviceexport_version: str | None
    about_version: str | None
    dcd_version: str | None = None


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
        #: The ClusterProperty read; a new one is read before it has synced, as at start.
        self._properties = MaybeServed(
            informers,
            make=self._property_informer,
            switch=self._switch_properties,
            what=_ABOUT_API,
            meanwhile="each relay reports the ClusterProperty unreadable until it does",
            use_unsynced=True,
            sync_timeout=sync_timeout,
        )
        self._properties.poke = lambda: self.poke()
        #: The DCDs (stubs), read only once synced: one not yet listed would make every
        #: frontend a DCD controls someone else's.
        self._dcds = MaybeServed(
            informers,
            make=self._dcd_informer,
            switch=self._switch_dcds,
            what=_DCD_API,
            meanwhile="a frontend's Service a DCD controls reads as someone else's until it does",
            use_unsynced=False,
            sync_timeout=sync_timeout,
        )
        self._dcds.poke = lambda: self.poke()
        self._export_candidate = Candidate(
            informers,
            self._export_informer,
            what=_EXPORTS_API,
            poke=lambda: self.poke(),
            sync_timeout=sync_timeout,
        )

    @property
    def in_effect(self) -> InEffect:
        return InEffect(self._export_version, self._properties.version, self._dcds.version)

    @property
    def caches(self) -> ExportCaches | None:
        """The caches the feature reads now (None while no export cache is usable)."""
        return self.feature.caches

    @property
    def pending(self) -> list[Informer]:
        """The informers being made to replace those in effect (readiness does not wait)."""
        making = (self._export_candidate.informer, self._properties.pending, self._dcds.pending)
        return [i for i in making if i is not None]

    def use_dgds(self, dgds: Informer) -> None:
        """Map export events through this DGD cache from now on (the DGD API moved)."""
        self.dgds = dgds

    def begin(
        self, export_version: str | None, about_version: str | None, dcd_version: str | None = None
    ) -> None:
        """At build time: declare what is served at start (the controller waits for the
        export and DCD caches before its first reconcile)."""
        if export_version is not None:
            self._exports = self._export_informer(export_version)
            self._export_version = export_version
            self._watch_exports(self._exports)
        self._properties.begin(about_version)
        self._dcds.begin(dcd_version)
        self._hand_over()

    async def follow(
        self,
        export_version: str | None,
        about_version: str | None,
        *,
        export_served: Sequence[str],
        about_served: Sequence[str],
        dcd_version: str | None = None,
        dcd_served: Sequence[str] = (),
    ) -> InEffect:
        """Match the versions wanted (`*_version`, the preferred of those served, as
        `*_served`); return what is in effect afterwards."""
        before = (self.in_effect, self.feature.listing)
        await self._properties.follow(about_version, about_served)
        await self._dcds.follow(dcd_version, dcd_served)
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
            # No longer served: no cache is usable until the new one syncs.
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
    def _property_informer(self, version: str) -> Informer:
        return self.informers.get(clusterproperties(version), keep=is_cluster_id_property)

    def _switch_properties(self, new: Informer | None, old: Informer | None) -> None:
        self._hand_over()  # no pass reads the old cache from here on
        if new is not None:
            # Not waited for: an unreadable property is reported per relay, and its late
            # sync requeues every relay, at low priority so a user's change does not wait.
            self.controller.watches(
                new,
                all_relays(self.relays),
                wait_for_sync=False,
                priority=LOW,
                on_sync=self.relays.store.keys,
            )
            self.degraded.watch(CLUSTER_ID_CHECK, new)
        else:
            self.degraded.unwatch(CLUSTER_ID_CHECK)
        if old is not None:
            self.controller.unwatch(old)
            self.controller.enqueue_all(self.relays.store.keys())

    # ------------------------------------------------------------ the DCDs
    def _dcd_informer(self, version: str) -> Informer:
        return dcd_cache(self.informers, namespace=self.namespace, version=version)

    def _switch_dcds(self, new: Informer | None, old: Informer | None) -> None:
        frontends = self.feature.frontends
        if frontends is not None:
            frontends.component_deployments = new  # read by every pass from here on
        if new is not None:
            self.controller.watches(new, relay_of_controller, spec_or_metadata_changed)
        if old is not None:
            self.controller.unwatch(old)
            self.controller.enqueue_all(self.relays.store.keys())

    # ------------------------------------------------------------ the feature
    def _hand_over(self) -> None:
        about = self.in_effect.about_version
        if self._exports is None or self._export_version is None:
            self.feature.use(None, resource=None, about_version=about)
            return
        properties = self._properties.informer
        self.feature.use(
            ExportCaches(self._exports, properties),
            resource=serviceexports(self._export_version),
            about_version=about,
        )


def _nothing() -> None:
    """No one to tell (until the operator sets `ExportApis.poke`)."""
