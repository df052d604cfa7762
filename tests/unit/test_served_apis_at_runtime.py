"""APIs that come and go while the operator runs: the pure parts.

`follow_served_apis` (what a later discovery means), `transitions` (the one line per
change), and a dropped watch that enqueues nothing. The `Rediscovery` loop and
optional checks are tested with their modules under tests/unit/runtime/cache/. What
the API server does is in tests/integration/apis/test_apis_at_runtime.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.cache.informer import EventType, Informer
from dynamo_pool_operator.runtime.control.controller import Controller, Request
from dynamo_pool_operator.served_apis import ServedApis, follow_served_apis, transitions
from tests.unit.runtime.cache.support import RES, Silent
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
