"""Which export events requeue a relay (`wiring.export_changed`).

The watches are drawn in docs/architecture.md, 'Watches to keys'.

Creates and deletes always do. An update does only while the export has a
controller, and only when something the plan reads changed: our label, the owner
references, the deletion timestamp. An MCS implementation writes the export's
status (Lighthouse and Cilium write conditions); reacting to that would cost a
reconcile per status write across the fleet and change nothing.
"""

from __future__ import annotations

import copy
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.mcs import Implementation
from dynamo_pool_operator.pool.controller import dgd_resource
from dynamo_pool_operator.pool.exports.apis import ExportApis
from dynamo_pool_operator.pool.exports.feature import PoolExports
from dynamo_pool_operator.pool.exports.wiring import export_changed, export_mapper
from dynamo_pool_operator.runtime.cache.informer import EventType, Informer
from dynamo_pool_operator.runtime.cache.optional import DegradedChecks
from dynamo_pool_operator.runtime.cache.shared import SharedInformers
from dynamo_pool_operator.runtime.control.controller import Controller
from dynamo_pool_operator.runtime.control.queue import LOW
from dynamo_pool_operator.runtime.objects.resources import CONFIGMAPS
from tests.unit.runtime.client.fake import FakeClient

REF = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "DynamoPoolRelay",
    "name": "llama",
    "uid": "u-1",
    "controller": True,
    "blockOwnerDeletion": True,
}


def export(*, controlled: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "llama-frontend",
        "namespace": "ns",
        "resourceVersion": "10",
        "labels": {names.DGD_NAME: "llama"},
    }
    if controlled:
        meta["ownerReferences"] = [REF]
    return {"metadata": meta}


def changed(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["resourceVersion"] = "11"
    target = out
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    return out


@pytest.mark.parametrize("etype", [EventType.ADDED, EventType.DELETED])
@pytest.mark.parametrize("controlled", [True, False])
def test_creates_and_deletes_always_requeue(etype: EventType, controlled: bool) -> None:
    obj = export(controlled=controlled)
    old, new = (None, obj) if etype is EventType.ADDED else (obj, None)
    assert export_changed(etype, old, new)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("metadata", "labels"), {names.DGD_NAME: "other"}),
        (("metadata", "ownerReferences"), [{**REF, "uid": "u-2"}]),
        (("metadata", "ownerReferences"), []),
        (("metadata", "deletionTimestamp"), "2026-11-30T00:00:00Z"),
        (("spec", "exportedAnnotations"), {"a": "b"}),
        (("spec", "exportedLabels"), {"a": "b"}),
    ],
    ids=[
        "label",
        "controller-changed",
        "controller-removed",
        "deleting",
        "exported-annotations",
        "exported-labels",
    ],
)
def test_an_update_of_what_the_plan_reads_requeues(path: tuple[str, ...], value: Any) -> None:
    old = export()
    assert export_changed(EventType.MODIFIED, old, changed(old, path, value))


def test_a_new_verdict_of_the_implementation_requeues_and_other_status_writes_do_not() -> None:
    """`Exported` shows the implementation's Valid, Ready and Conflict: a change of
    those requeues the relay; any other status field it writes does not."""
    old = export()
    conditions = [{"type": "Ready", "status": "True", "reason": "Exported"}]
    verdict = changed(old, ("status", "conditions"), conditions)
    assert export_changed(EventType.MODIFIED, old, verdict)
    assert not export_changed(EventType.MODIFIED, verdict, changed(verdict, ("status", "x"), 1))
    other = [*conditions, {"type": "Synced", "status": "True"}]
    assert not export_changed(
        EventType.MODIFIED, verdict, changed(verdict, ("status", "conditions"), other)
    )
    # Nor do its annotations, which the plan does not read.
    assert not export_changed(
        EventType.MODIFIED, old, changed(old, ("metadata", "annotations"), {"a": "b"})
    )


def test_a_user_export_changing_without_a_controller_does_not_requeue() -> None:
    old = export(controlled=False)
    new = changed(old, ("metadata", "labels"), {names.DGD_NAME: "mine"})
    assert not export_changed(EventType.MODIFIED, old, new)


def test_a_user_taking_a_controller_away_or_giving_one_requeues() -> None:
    ours = export()
    theirs = changed(ours, ("metadata", "ownerReferences"), [])
    assert export_changed(EventType.MODIFIED, ours, theirs)
    assert export_changed(EventType.MODIFIED, theirs, ours)


class RecordingController:
    """Records each watch's informer and fixed priority (None: by the event's source)."""

    def __init__(self) -> None:
        self.priorities: dict[Informer, int | None] = {}

    def watches(self, informer: Informer, mapper: Any, predicate: Any = None, **kw: Any) -> Any:
        self.priorities[informer] = kw.get("priority")
        return self


def test_a_cluster_property_change_requeues_every_relay_at_low_priority() -> None:
    """Every ClusterProperty event maps to every relay (a mass requeue): at LOW, so a
    user's change made meanwhile is served first (docs/runtime.md, Controller). Export
    events keep the priority of their source: a user deleting an export is a real
    change, served at NORMAL."""
    client = FakeClient()  # never run: only the wiring is looked at
    relays, dgds = Informer(client, CONFIGMAPS), Informer(client, CONFIGMAPS)
    registry = CollectorRegistry()
    rec = RecordingController()
    apis = ExportApis(
        SharedInformers(client),
        cast("Controller", rec),
        PoolExports(
            None,
            resource=None,
            implementation=Implementation.MCS,
            about_version=None,
        ),
        DegradedChecks({}, registry),
        relays=relays,
        dgds=dgds,
        namespace=None,
    )
    apis.begin("v1alpha1", "v1alpha1")
    caches = apis.caches
    assert caches is not None
    assert caches.cluster_properties is not None
    assert rec.priorities == {caches.exports: None, caches.cluster_properties: LOW}


def _dgd(name: str, *frontends: str) -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"components": [{"name": f, "type": "frontend"} for f in frontends]},
    }


def test_an_export_wakes_each_relay_whose_dgd_names_it_read_from_the_dgd_cache_as_is() -> None:
    """An export named like a frontend Service `<D>-<component>` wakes relay D when D's
    pool names it: D is one of the name's prefixes before a dash (a relay's name has no
    dot), so the DGD cache is read by name and needs no index of its own (~400 bytes a
    DGD at 10,000 pools)."""
    dgds = Informer(FakeClient(), dgd_resource("v1beta1"))
    for obj in (_dgd("pay", "ments-db"), _dgd("pay-ments", "db"), _dgd("pay-ments-db", "db")):
        dgds.store.put(obj)
    relays_for = export_mapper(lambda: dgds)
    named = {"metadata": {"name": "pay-ments-db", "namespace": "ns"}}
    assert sorted(relays_for(named)) == [("ns", "pay"), ("ns", "pay-ments")]
    assert sorted(relays_for({"metadata": {"name": "pay-web", "namespace": "ns"}})) == []
    assert sorted(relays_for({"metadata": {"name": "pay-ments-db", "namespace": "x"}})) == []
    relay_service = {"metadata": {"name": "pay-pool-relay", "namespace": "ns"}}
    assert sorted(relays_for(relay_service)) == [("ns", "pay")]
