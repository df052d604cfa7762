"""APIs that come and go while the operator runs: the pure parts.

`follow_served_apis` (what a later discovery means), `transitions` (the one line per
change), the `Rediscovery` loop (each change acted on once, failures logged once,
pokes), and the runtime pieces whose behaviour is ours: a dropped watch enqueues
nothing, a check switched off is not degraded. What the API server does is in
tests/integration/apis/test_apis_at_runtime.py.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.discovery import ServedApis, follow_served_apis, transitions
from dynamo_pool_operator.runtime.cache.informer import EventType, Informer
from dynamo_pool_operator.runtime.cache.optional import DegradedChecks
from dynamo_pool_operator.runtime.cache.rediscovery import Rediscovery
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.clock import FakeClock
from dynamo_pool_operator.runtime.control.controller import Controller, Request
from dynamo_pool_operator.runtime.objects.resources import Resource
from tests.unit.runtime.client.fake import FakeClient
from tests.unit.served import DGD_ALPHA, DOWN, EXPORTS_ALPHA, EXPORTS_BETA, PROPS, RELAYS
from tests.unit.served import DGD_BETA as DGD

AT_START = ServedApis(
    "v1beta1",
    "v1beta1",
    "v1beta1",
    "v1beta1",
    dgd_versions=("v1beta1",),
    serviceexport_versions=("v1beta1",),
    about_versions=("v1beta1",),
)
EXPORTS_GONE = replace(
    AT_START, serviceexport_version=None, serviceexport_served=None, serviceexport_versions=()
)
ABOUT_GONE = replace(AT_START, about_version=None, about_versions=())


# ---------------------------------------------------------------- follow_served_apis
def test_an_unchanged_cluster_changes_nothing() -> None:
    assert follow_served_apis(AT_START, [RELAYS, DGD, EXPORTS_BETA, PROPS], "mcs") == AT_START


def test_the_serviceexport_api_gone_is_none_not_a_startup_error() -> None:
    after = follow_served_apis(AT_START, [RELAYS, DGD, PROPS], "mcs")
    assert after == EXPORTS_GONE  # the About API is followed on its own


def test_the_serviceexport_api_back_at_another_version() -> None:
    after = follow_served_apis(EXPORTS_GONE, [RELAYS, DGD, EXPORTS_ALPHA], "karmada")
    assert (after.serviceexport_version, after.serviceexport_served) == ("v1alpha1", "v1alpha1")
    assert after.serviceexport_versions == ("v1alpha1",)
    assert after.about_version is None  # karmada has no cluster ID check


def test_every_served_version_is_listed_preferred_first() -> None:
    """The version wanted is the preferred one; the others tell whether the cache in
    effect may stay in effect while the preferred one's is made."""
    after = follow_served_apis(
        AT_START, [RELAYS, DGD_ALPHA, DGD, EXPORTS_ALPHA, EXPORTS_BETA], "mcs"
    )
    assert after.serviceexport_versions == ("v1beta1", "v1alpha1")
    assert after.serviceexport_version == "v1beta1"
    assert after.dgd_versions == ("v1beta1", "v1alpha1")
    assert after.dgd_version == "v1beta1"


def test_the_about_api_appears_and_goes() -> None:
    assert follow_served_apis(ABOUT_GONE, [RELAYS, DGD, EXPORTS_BETA, PROPS], "mcs") == AT_START
    assert follow_served_apis(AT_START, [RELAYS, DGD, EXPORTS_BETA], "mcs") == ABOUT_GONE


def test_the_dgd_api_follows_the_cluster_to_a_version_still_served() -> None:
    after = follow_served_apis(AT_START, [RELAYS, DGD_ALPHA, EXPORTS_BETA, PROPS], "mcs")
    assert (after.dgd_version, after.dgd_versions) == ("v1alpha1", ("v1alpha1",))


def test_a_dgd_api_served_at_no_version_keeps_the_cache_in_effect_listed_as_unserved() -> None:
    # Not a startup error at runtime: the DGDs last read stay what is read, and with no
    # version served readiness fails (runtime/cache/followed.py).
    after = follow_served_apis(AT_START, [RELAYS, EXPORTS_BETA, PROPS], "mcs")
    assert (after.dgd_version, after.dgd_versions) == ("v1beta1", ())


def test_with_export_off_only_what_is_served_is_followed() -> None:
    off = ServedApis("v1beta1", None, None, None, dgd_versions=("v1beta1",))
    after = follow_served_apis(off, [RELAYS, DGD, EXPORTS_BETA, PROPS], "")
    assert after == replace(
        off, serviceexport_served="v1beta1", serviceexport_versions=("v1beta1",)
    )


@pytest.mark.parametrize(
    "unavailable",
    ["multicluster.x-k8s.io/v1beta1", "about.k8s.io/v1beta1", "nvidia.com/v1beta1"],
    ids=str,
)
def test_an_unreadable_group_version_keeps_what_is_in_effect(unavailable: str) -> None:
    # Unreadable this time is not gone: no API is turned off or moved for it.
    found = [RELAYS, DGD, EXPORTS_BETA, PROPS]
    readable = [r for r in found if f"{r.group}/{r.version}" != unavailable]
    after = follow_served_apis(AT_START, readable, "mcs", {unavailable: DOWN})
    assert after == AT_START


def test_unreadable_and_gone_are_told_apart() -> None:
    after = follow_served_apis(AT_START, [RELAYS], "mcs", {"nvidia.com/v1beta1": DOWN})
    assert (after.dgd_version, after.dgd_versions) == ("v1beta1", ("v1beta1",))
    assert after.serviceexport_version is None
    assert after.about_version is None


# ---------------------------------------------------------------- transitions
def test_no_change_no_line() -> None:
    assert transitions(AT_START, AT_START, "mcs") == []


def test_each_change_is_one_line_naming_the_api_and_what_happens() -> None:
    gone = ServedApis("v1beta1", None, None, None)
    lines = transitions(AT_START, gone, "mcs")
    assert lines == [
        "the ServiceExport API (serviceexports.multicluster.x-k8s.io) is no longer served: no "
        "export can be written; every relay says so (Exported=False ExportAPIUnavailable) "
        "until the API is served again",
        "the About API (clusterproperties.about.k8s.io) is no longer served: the cluster ID "
        "check (ClusterIDMismatch) is off, as when it was never served",
    ]
    back = transitions(
        gone,
        replace(AT_START, serviceexport_version="v1alpha1", serviceexport_served="v1alpha1"),
        "mcs",
    )
    assert back[0] == (
        "the ServiceExport API (serviceexports.multicluster.x-k8s.io) is served now at "
        "v1alpha1: exports are created and kept again"
    )
    assert back[1].endswith(
        "is served now at v1beta1: the cluster ID check (ClusterIDMismatch) is on"
    )


def test_a_version_change_says_both() -> None:
    moved = replace(AT_START, serviceexport_version="v1alpha1", serviceexport_served="v1alpha1")
    (line,) = transitions(AT_START, moved, "mcs")
    assert (
        "is served now at v1alpha1 (was v1beta1): exports are read and written at v1alpha1" in line
    )


def test_an_export_api_served_but_not_in_effect_yet_is_not_called_gone() -> None:
    """In effect nothing (the cache of v1beta1 has not synced, and v1alpha1 is no longer
    served): the switchover says so; "no longer served" would be untrue."""
    moved = replace(AT_START, serviceexport_version="v1alpha1", serviceexport_served="v1alpha1")
    listing = replace(AT_START, serviceexport_version=None)
    assert transitions(moved, listing, "mcs") == []


def test_a_dgd_version_change_is_one_line() -> None:
    moved = replace(AT_START, dgd_version="v1alpha1", dgd_versions=("v1alpha1",))
    assert transitions(AT_START, moved, "mcs") == [
        "the DGD API (dynamographdeployments.nvidia.com) is served now at v1alpha1 (was "
        "v1beta1): every DGD is read at v1alpha1 from now on"
    ]


def test_with_export_off_the_line_says_what_the_cleanup_does() -> None:
    off = ServedApis("v1beta1", None, None, None)
    (line,) = transitions(off, replace(off, serviceexport_served="v1beta1"), "")
    assert line.endswith(
        "multi-cluster export is off: the exports this operator made earlier are withdrawn"
    )


# ---------------------------------------------------------------- Rediscovery
class Cluster:
    """What `read` finds: a value to return, or an error to raise."""

    def __init__(self, value: int) -> None:
        self.value = value
        self.error: Exception | None = None
        self.applied: list[tuple[int, int]] = []
        #: What `apply` can take up of a change (None: all of it).
        self.cap: int | None = None

    async def read(self, current: int) -> int:
        if self.error is not None:
            raise self.error
        return self.value

    async def apply(self, current: int, new: int) -> int:
        self.applied.append((current, new))
        return new if self.cap is None else min(new, self.cap)


def loop(cluster: Cluster, clock: FakeClock | None = None) -> Rediscovery[int]:
    return Rediscovery(cluster.read, cluster.apply, 0, interval=30.0, what="the thing", clock=clock)


async def test_a_change_is_acted_on_once() -> None:
    cluster = Cluster(0)
    r = loop(cluster)
    assert await r.check() is False
    cluster.value = 1
    assert await r.check() is True
    assert await r.check() is False
    assert cluster.applied == [(0, 1)]
    assert (r.current, r.reads) == (1, 3)


async def test_a_part_not_taken_up_is_offered_again() -> None:
    cluster = Cluster(0)
    cluster.cap = 1
    r = loop(cluster)
    cluster.value = 2
    assert await r.check() is True  # 1 is in effect, not 2
    cluster.cap = None
    assert await r.check() is True
    assert cluster.applied == [(0, 2), (1, 2)]
    assert r.current == 2


async def test_failures_are_logged_once_and_the_recovery_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="dynamo_pool_operator.runtime.cache.rediscovery")
    cluster = Cluster(0)
    r = loop(cluster)
    cluster.error = errors.ApiError("unavailable", status=503)
    for _ in range(5):
        assert await r.check() is False
    cluster.error = None
    cluster.value = 1
    await r.check()
    await r.check()
    said = [rec.getMessage() for rec in caplog.records if rec.levelno >= logging.INFO]
    assert len(said) == 2, said
    assert said[0].startswith("reading the thing failed (ApiError")
    assert "retried every 30s" in said[0]
    assert said[1] == "the thing: read and acted on again"
    assert r.current == 1


async def test_a_failing_apply_keeps_what_is_in_effect() -> None:
    cluster = Cluster(1)

    async def refuse(current: int, new: int) -> int:
        raise errors.ApiError("boom", status=500)

    r = Rediscovery(cluster.read, refuse, 0, interval=30.0, what="the thing")
    assert await r.check() is False
    assert r.current == 0


async def yields() -> None:
    """Let the loop's task run until it waits again (no real time passes)."""
    for _ in range(10):
        await asyncio.sleep(0)


async def test_the_loop_runs_every_interval_and_at_once_when_poked() -> None:
    clock = FakeClock()
    cluster = Cluster(0)
    r = loop(cluster, clock)
    r.start()
    await yields()
    await clock.advance(29)
    await yields()
    assert r.reads == 0
    await clock.advance(1)
    await yields()
    assert r.reads == 1
    r.poke()
    r.poke()  # pokes before the pass runs are one pass
    await yields()
    assert r.reads == 2
    await clock.advance(29)
    await yields()
    assert r.reads == 2  # the interval starts again after a poked pass
    await r.stop()
    assert not r.running


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval must be positive"):
        Rediscovery(Cluster(0).read, Cluster(0).apply, 0, interval=0, what="x")


# ---------------------------------------------------------------- runtime pieces
RES = Resource("multicluster.x-k8s.io", "v1beta1", "serviceexports", "ServiceExport", True)


class Silent(FakeClient):
    """An API server that never answers a list: the informer runs and never syncs."""

    async def list(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()

    def watch_lines(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("never reached")


class Nothing:
    async def reconcile(self, request: Request) -> None:
        return None


async def test_a_dropped_watch_enqueues_nothing_and_is_not_waited_for() -> None:
    informer = Informer(Silent(), RES)  # never run: synced and its events emitted by hand
    informer._synced.set()
    controller = Controller("c", Nothing(), registry=CollectorRegistry(), workers=0)
    controller.watches(informer, lambda o: [("ns", o["metadata"]["name"])])
    await controller.start()  # leading: events queue keys (no worker takes them)
    obj = {"metadata": {"name": "a", "namespace": "ns"}}
    informer._emit(EventType.ADDED, None, obj)
    assert len(controller.queue) == 1
    controller.unwatch(informer)
    informer._emit(EventType.ADDED, None, {"metadata": {"name": "b", "namespace": "ns"}})
    assert len(controller.queue) == 1
    assert informer not in controller._informers
    await controller.stop()


async def test_a_check_switched_off_is_not_degraded() -> None:
    registry = CollectorRegistry()
    checks = DegradedChecks({}, registry, grace=0.01)
    checks.start()
    informer = Informer(Silent(), RES)
    running = asyncio.create_task(informer.run())
    await asyncio.sleep(0)
    checks.watch("clusterID", informer)
    assert checks.is_optional(informer)

    def degraded() -> float | None:
        return registry.get_sample_value(
            "dynamo_pool_operator_check_degraded", {"check": "clusterID"}
        )

    for _ in range(200):
        if degraded() == 1.0:
            break
        await asyncio.sleep(0.01)
    assert degraded() == 1.0
    checks.unwatch("clusterID")
    assert degraded() == 0.0
    assert not checks.is_optional(informer)
    informer.stop()
    await running
    await checks.stop()
