"""The export caches follow their APIs, made before broken (`pool/exports/apis.py`).

What stays in effect while a new version's cache is being made: the export cache while
its version is served, nothing (and a truthful word to every relay) when it is not,
and the ClusterProperty read always, until the new one has synced. The API server is
the stand-in of tests/unit/runtime/cache/test_followed.py; the real one is in
tests/integration/apis/test_apis_make_before_break.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.api.mcs import CLUSTER_ID_PROPERTY, Implementation
from dynamo_pool_operator.pool.exports.apis import ExportApis
from dynamo_pool_operator.pool.exports.feature import PoolExports
from dynamo_pool_operator.runtime.cache.informer import Informer
from dynamo_pool_operator.runtime.cache.optional import DegradedChecks
from dynamo_pool_operator.runtime.cache.shared import SharedInformers
from dynamo_pool_operator.runtime.control.controller import Controller, Request
from dynamo_pool_operator.runtime.objects.resources import CONFIGMAPS
from tests.clock import FakeClock
from tests.unit.runtime.cache.test_followed import Server, settle

BOTH = ("v1beta1", "v1alpha1")


class Nothing:
    async def reconcile(self, request: Request) -> None:
        return None


class Feature:
    def __init__(self) -> None:
        self.server = Server(CLUSTER_ID_PROPERTY)
        self.clock = FakeClock()
        self.informers = SharedInformers(self.server, clock=self.clock)
        registry = CollectorRegistry()
        self.pool_exports = PoolExports(
            None, resource=None, implementation=Implementation.MCS, about_version=None
        )
        self.apis = ExportApis(
            self.informers,
            Controller("c", Nothing(), registry=registry, workers=0),
            self.pool_exports,
            DegradedChecks({}, registry),
            relays=Informer(self.server, CONFIGMAPS),
            dgds=Informer(self.server, CONFIGMAPS),
            namespace=None,
        )
        self.pokes = 0
        self.apis.poke = self.poke

    def poke(self) -> None:
        self.pokes += 1

    async def follow(
        self,
        export: str | None,
        about: str | None,
        *,
        exports: tuple[str, ...] = BOTH,
        abouts: tuple[str, ...] = BOTH,
        times_out: bool = False,
    ) -> Any:
        task = asyncio.ensure_future(
            self.apis.follow(export, about, export_served=exports, about_served=abouts)
        )
        if times_out:
            await settle()
            await self.clock.advance(10)
        return await task


@pytest.fixture
async def feature() -> AsyncIterator[Feature]:
    f = Feature()
    yield f
    await f.informers.stop_all()


EXPORTS, PROPERTIES = "serviceexports", "clusterproperties"


async def started(feature: Feature, export: str | None, about: str | None) -> None:
    if export is not None:
        feature.server.complete(export, EXPORTS)
    if about is not None:
        feature.server.complete(about, PROPERTIES)
    feature.apis.begin(export, about)
    feature.informers.start_all()
    caches = feature.apis.caches
    if caches is not None:
        assert await caches.exports.wait_synced(1)


async def properties_read_at_alpha(feature: Feature) -> Informer:
    """Started reading the ClusterProperty at v1alpha1; its cache, synced."""
    await started(feature, "v1beta1", "v1alpha1")
    caches = feature.apis.caches
    assert caches is not None
    old = caches.cluster_properties
    assert old is not None
    assert await old.wait_synced(1)
    return old


async def test_the_export_cache_in_effect_stays_while_the_new_one_is_made(
    feature: Feature,
) -> None:
    await started(feature, "v1alpha1", None)
    caches = feature.apis.caches
    assert caches is not None
    old = caches.exports
    now = await feature.follow("v1beta1", None, times_out=True)
    assert now.serviceexport_version == "v1alpha1"
    assert feature.apis.caches is not None
    assert feature.apis.caches.exports is old
    assert feature.pool_exports.listing is None
    (pending,) = feature.apis.pending
    feature.server.complete("v1beta1", EXPORTS)
    await settle()
    assert feature.pokes == 1
    now = await feature.follow("v1beta1", None)
    assert now.serviceexport_version == "v1beta1"
    assert feature.apis.caches.exports is pending
    assert feature.pool_exports.resource is not None
    assert feature.pool_exports.resource.version == "v1beta1"
    assert not old.running
    assert feature.apis.pending == []


async def test_with_no_usable_export_cache_each_relay_is_told_the_api_is_served(
    feature: Feature,
) -> None:
    await started(feature, "v1alpha1", None)
    old = feature.apis.caches
    assert old is not None
    # v1alpha1 is no longer served: its cache cannot stay, and v1beta1's is not ready.
    now = await feature.follow("v1beta1", None, exports=("v1beta1",), times_out=True)
    assert now.serviceexport_version is None
    assert feature.apis.caches is None
    assert not old.exports.running
    assert feature.pool_exports.listing == "v1beta1"
    said = feature.pool_exports.unavailable_message()
    assert "serviceexports.multicluster.x-k8s.io API at v1beta1, but its list has not" in said
    assert "install" not in said
    feature.server.complete("v1beta1", EXPORTS)
    await settle()
    assert (await feature.follow("v1beta1", None)).serviceexport_version == "v1beta1"
    assert feature.pool_exports.listing is None
    # Gone after all: the message is the one of an API not served.
    await feature.follow(None, None, exports=())
    said = feature.pool_exports.unavailable_message()
    assert "install the Multi-Cluster Services API CRDs" in said, said


async def test_the_cluster_property_read_stays_the_old_one_until_the_new_one_syncs(
    feature: Feature,
) -> None:
    old = await properties_read_at_alpha(feature)
    # v1alpha1 no longer served: its informer stops (its watch would fail), its last
    # content stays what is read.
    now = await feature.follow("v1beta1", "v1beta1", abouts=("v1beta1",), times_out=True)
    assert now.about_version == "v1alpha1"
    assert feature.apis.caches is not None
    assert feature.apis.caches.cluster_properties is old
    assert not old.running
    assert old.store.get("", CLUSTER_ID_PROPERTY) is not None
    feature.server.complete("v1beta1", PROPERTIES)
    await settle()
    assert (await feature.follow("v1beta1", "v1beta1", abouts=("v1beta1",))).about_version == (
        "v1beta1"
    )
    assert feature.apis.caches.cluster_properties is not old


async def test_a_cluster_property_version_served_again_is_read_live_again(
    feature: Feature,
) -> None:
    """Stale (v1alpha1 no longer served, v1beta1's list not done), then v1alpha1 is
    served again before v1beta1's list completes: the stopped informer's content must
    not stay what is read just because its version is the one wanted."""
    old = await properties_read_at_alpha(feature)
    await feature.follow("v1beta1", "v1beta1", abouts=("v1beta1",), times_out=True)
    assert not old.running
    (beta,) = feature.apis.pending
    # Rolled back: v1alpha1 alone is served again.
    now = await feature.follow("v1beta1", "v1alpha1", abouts=("v1alpha1",))
    assert now.about_version == "v1alpha1"
    assert feature.apis.caches is not None
    live = feature.apis.caches.cluster_properties
    assert live is not None
    assert live is not old, "still reading the stopped informer"
    assert live.running
    assert live.has_synced
    assert not beta.running, "the v1beta1 candidate is no longer wanted"
    assert feature.apis.pending == []
    # Live from here on: following the same versions again changes nothing.
    await feature.follow("v1beta1", "v1alpha1", abouts=("v1alpha1",))
    assert feature.apis.caches.cluster_properties is live


async def test_a_property_cache_that_syncs_late_requeues_every_relay(feature: Feature) -> None:
    """With no cache to keep, the new one is read unsynced (each relay says unreadable);
    its sync, even with no property (no event), requeues every relay at once."""
    feature.server.name = "another-property"  # the cluster has no ID property: no event
    relays = feature.apis.relays
    relays.store.replace([{"metadata": {"name": n, "namespace": "ns"}} for n in ("a", "b")])
    controller = feature.apis.controller
    controller.optional_sync_grace = 0.0
    await started(feature, "v1beta1", None)
    await controller.start()
    try:
        await feature.follow("v1beta1", "v1beta1", times_out=True)
        while len(controller.queue):  # what the switch itself queued
            controller.queue.done(await controller.queue.get())
        feature.server.complete("v1beta1", PROPERTIES)
        caches = feature.apis.caches
        assert caches is not None
        properties = caches.cluster_properties
        assert properties is not None
        assert await properties.wait_synced(1)
        assert len(properties.store) == 0
        queued = set()
        while len(controller.queue):
            key = await controller.queue.get()
            controller.queue.done(key)
            queued.add(key)
        assert queued == {("ns", "a"), ("ns", "b")}
    finally:
        await controller.stop(0)


async def test_with_no_property_cache_before_the_new_one_is_used_unsynced(
    feature: Feature,
) -> None:
    """Nothing to keep reading: as at start, the check runs on the new cache, which says
    the property is unreadable until it has synced (and is no candidate any more)."""
    await started(feature, "v1beta1", None)
    now = await feature.follow("v1beta1", "v1beta1", times_out=True)
    assert now.about_version == "v1beta1"
    assert feature.apis.caches is not None
    properties = feature.apis.caches.cluster_properties
    assert properties is not None
    assert not properties.has_synced
    assert feature.apis.pending == []


async def test_an_api_gone_while_its_new_cache_was_being_made_is_called_not_served(
    feature: Feature,
) -> None:
    await started(feature, "v1alpha1", None)
    await feature.follow("v1beta1", None, exports=("v1beta1",), times_out=True)
    (pending,) = feature.apis.pending
    await feature.follow(None, None, exports=())
    assert feature.pool_exports.listing is None
    said = feature.pool_exports.unavailable_message()
    assert "install the Multi-Cluster Services API CRDs" in said, said
    assert not pending.running
    assert feature.apis.pending == []


async def test_the_property_cache_asked_for_twice_is_one_shared_informer(
    feature: Feature,
) -> None:
    """The shared informer factory refuses a second filter for the same key, so the
    ClusterProperty cache's filter is one function, not a new one per request."""
    first = feature.apis._property_informer("v1beta1")
    assert feature.apis._property_informer("v1beta1") is first
