"""APIs that appear, disappear or change version while the operator runs.

Each test runs on a private control plane, installs or deletes CRDs through the real
API server while the operator (the shipped wiring, rediscovering every 0.2 s) runs,
and checks what the operator does about it without a restart: the cluster ID check
turns on and off with the About API, the export machinery stops with the ServiceExport
API (every relay says so in `Exported`) and starts again when it returns, at whatever
version it is then served, and the feature-off cleanup runs when the API appears.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.localcluster.assets import resolve
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.crds import cluster_property_crd, mcs_crds
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS
from tests.harness import eventually
from tests.integration.support.api_fixtures import (
    ABOUT_CRD,
    EXPORTS_CRD,
    IMPORTS_CRD,
    exported,
    exported_becomes,
    fast,
    informer_warnings,
    lines,
    passes,
    plane,
)
from tests.integration.support.export_fixtures import SE, exports_become, set_cluster_id, wait_event
from tests.integration.support.race_fixtures import (
    FRONTEND_SVC,
    RELAY_SVC,
    make_pool,
    mismatches,
    writes_nothing,
)
from tests.integration.support.relay_fixtures import condition, relay_owner
from tests.integration.support.under_test import running
from tests.integration.support.waiting import eventually_or

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def without_about() -> Iterator[ControlPlane]:
    yield from plane(about=False, mcs=("v1alpha1", "v1beta1"))


@pytest.fixture
def with_everything() -> Iterator[ControlPlane]:
    yield from plane(about=True, mcs=("v1alpha1", "v1beta1"))


@pytest.fixture
def without_mcs() -> Iterator[ControlPlane]:
    yield from plane(about=False, mcs=None)


# ---------------------------------------------------------------- the About API
async def test_about_api_installed_after_start_turns_the_cluster_id_check_on(
    without_about: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    async with running(without_about, fast("mcs"), caplog) as (client, op, ns):
        assert op.running.served.about_version is None
        await make_pool(client, ns, clusterId="east")
        await exports_become(client, ns, {RELAY_SVC, FRONTEND_SVC})
        await asyncio.to_thread(without_about.install_crd, cluster_property_crd())
        await set_cluster_id(client, "west")
        # No restart: the mismatch is found once the API is served and the property read.
        await eventually_or(
            lambda: mismatches(client, ns),
            lambda: f"no ClusterIDMismatch; the log says {lines(caplog, 'About')}",
        )
        assert op.running.served.about_version == "v1beta1"
        turned_on = lines(caplog, "is served now at")
        assert turned_on == [
            "the About API (clusterproperties.about.k8s.io) is served now at v1beta1: the "
            "cluster ID check (ClusterIDMismatch) is on"
        ], turned_on
        # Still one line after further passes: a transition is logged once.
        await passes(op, 3)
        assert len(lines(caplog, "is served now at")) == 1
        await writes_nothing(op, ns)


async def test_about_api_removed_turns_the_check_off_without_a_failing_watch(
    with_everything: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    async with running(with_everything, fast("mcs"), caplog) as (client, op, ns):
        await set_cluster_id(client, "west")
        await make_pool(client, ns, clusterId="east")
        await eventually(lambda: mismatches(client, ns), timeout=30)
        await asyncio.to_thread(with_everything.delete_crd, ABOUT_CRD)

        async def off() -> bool:
            return bool(lines(caplog, "is no longer served: the cluster ID check"))

        await eventually_or(
            off,
            lambda: (
                "no transition logged; the ClusterProperty informer logged "
                f"{informer_warnings(caplog, 'clusterproperties')}"
            ),
        )
        assert op.running.served.about_version is None
        assert not [
            i for i in op.running.informers.informers() if "clusterproperties" in i.description
        ]
        # From now on nothing about the ClusterProperty: its watch is gone, not failing.
        before = informer_warnings(caplog, "clusterproperties")
        await passes(op, 10)
        assert informer_warnings(caplog, "clusterproperties") == before
        assert len(lines(caplog, "is no longer served: the cluster ID check")) == 1
        # The relay is reconciled without the check: Exported unaffected, no unreadable
        # property reported, no degraded check.
        await exports_become(client, ns, {RELAY_SVC, FRONTEND_SVC})
        c = await exported(client, ns, "llama")
        assert c is not None
        assert c["reason"] != "ExportFailed", c
        assert op.registry.get_sample_value(
            "dynamo_pool_operator_check_degraded", {"check": "clusterID"}
        ) in (None, 0.0)
        await writes_nothing(op, ns)


# ---------------------------------------------------------------- the ServiceExport API
async def test_serviceexport_api_removed_and_reinstalled_at_another_version(
    with_everything: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    async with running(with_everything, fast("mcs"), caplog) as (client, op, ns):
        await make_pool(client, ns, name="p1")
        await make_pool(client, ns, name="p2")
        await exports_become(
            client, ns, {f"p{i}-{s}" for i in (1, 2) for s in ("pool-relay", "frontend")}
        )
        for crd in (EXPORTS_CRD, IMPORTS_CRD):
            await asyncio.to_thread(with_everything.delete_crd, crd)
        for name in ("p1", "p2"):
            c = await exported_becomes(client, ns, name, "ExportAPIUnavailable")
            assert c["status"] == "False"
            assert EXPORTS_CRD in c["message"], c
            assert "mcsImplementation" in c["message"], c
            ready = await condition(client, ns, name, "Ready")
            assert ready is not None, name
            # False; its reason is the first part that is not True (here RelayAvailable:
            # this control plane runs no Deployment controller), so only the status.
            assert ready["status"] == "False", ready
        event = await wait_event(client, ns, "ExportAPIUnavailable")
        assert event["type"] == "Warning", event
        assert EXPORTS_CRD in event["note"], event
        gone = lines(caplog, "ServiceExport API")
        assert len(gone) == 1, gone
        assert "is no longer served" in gone[0], gone
        # The operator keeps serving: a new pool gets its relay and says why it is not
        # exported, and nothing fails over and over.
        await make_pool(client, ns, name="p3")

        async def relay_made() -> bool:
            return any(
                d["metadata"]["name"] == "p3-pool-relay"
                for d in (await client.list(DEPLOYMENTS, ns)).items
            )

        await eventually(relay_made)
        await exported_becomes(client, ns, "p3", "ExportAPIUnavailable")
        assert op.running.controller.healthy
        await op.settle()
        errors = len(lines(caplog, "Reconciler error", logging.ERROR))
        informer = len(informer_warnings(caplog, "serviceexports"))
        await passes(op, 10)
        await op.settle()
        assert len(lines(caplog, "Reconciler error", logging.ERROR)) == errors
        assert len(informer_warnings(caplog, "serviceexports")) == informer
        await writes_nothing(op, ns, "p3")
        # Back, at v1alpha1 only: the exports are created again, at that version.
        for doc in mcs_crds(resolve().mcs_crd_dir, served=("v1alpha1",)):
            await asyncio.to_thread(with_everything.install_crd, doc)
        alpha = SE.at_version("v1alpha1")
        want = {f"p{i}-{s}" for i in (1, 2, 3) for s in ("pool-relay", "frontend")}
        await exports_become(client, ns, want, alpha, timeout=30)
        assert op.running.served.serviceexport_version == "v1alpha1"
        for name in ("p1", "p2", "p3"):
            await eventually(lambda n=name: _not_unavailable(client, ns, n), timeout=30)
        back = lines(caplog, "ServiceExport API")
        assert len(back) == 2, back
        assert "is served now at v1alpha1" in back[1], back
        await writes_nothing(op, ns, "p1")


async def _not_unavailable(client: Client, ns: str, name: str) -> bool:
    c = await exported(client, ns, name)
    return c is not None and c["reason"] not in ("ExportAPIUnavailable", "ExportFailed")


async def test_feature_off_cleanup_runs_when_the_serviceexport_api_appears_later(
    without_mcs: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    async with running(without_mcs, fast(""), caplog) as (client, op, ns):
        relay = await make_pool(client, ns)
        assert op.running.served.serviceexport_served is None
        # Our own timing held: no pass may see the API before the exports exist (it
        # would find nothing to withdraw), so the loop is stopped and one pass run by
        # hand, the pass the loop runs.
        rediscovery = op.running.rediscovery
        await rediscovery.stop()
        for doc in mcs_crds(resolve().mcs_crd_dir):
            await asyncio.to_thread(without_mcs.install_crd, doc)
        # An export an earlier operator (with an implementation set) made, and a user's.
        owner = relay_owner(relay)
        ours = {
            "apiVersion": SE.api_version,
            "kind": SE.kind,
            "metadata": {
                "name": RELAY_SVC,
                "namespace": ns,
                "labels": {names.DGD_NAME: "llama"},
                "ownerReferences": [owner],
            },
        }
        theirs = {
            "apiVersion": SE.api_version,
            "kind": SE.kind,
            "metadata": {"name": "mine", "namespace": ns},
        }
        await client.create(SE, ours, ns)
        await client.create(SE, theirs, ns)
        assert await rediscovery.check() is True
        await exports_become(client, ns, {"mine"}, timeout=30)
        assert op.running.served.serviceexport_served == "v1beta1"
        assert lines(caplog, "withdrew 1 ServiceExports left from before")
        appeared = lines(caplog, "ServiceExport API")
        assert len(appeared) == 1, appeared
        assert "is served now at v1beta1" in appeared[0], appeared
        # With export off a pool's second reconcile writes nothing, as before.
        await writes_nothing(op, ns)
