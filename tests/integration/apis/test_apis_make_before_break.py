"""A new API version's cache is made before the old one is broken.

When the cluster starts serving the ServiceExport or About API at another version, the
operator moves its cache there: it starts the new informer, waits for its list, and only
then hands it over and drops the old one. The new list can be slow (here: held 13 s by
the API server's authorization webhook, `slow_authorizer.py`, longer than the 10 s the
operator waits); meanwhile the old cache stays in effect, the relays are served from it,
and the new list is not abandoned and restarted but completes, and then the switch is
made. Only when no cache is usable at all is the feature without exports, and then
each relay says what is true: the API is served, its list has not completed. A version
served again before the new list completes is read live again, not from the informer
stopped when it stopped being served.

Each test runs on a private control plane whose CRDs it changes; the operator runs as
a user with the shipped RBAC (a superuser's requests skip authorization, slow or not).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dynamo_pool_operator.api.mcs import clusterproperties, serviceexports
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.localcluster.assets import resolve
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.crds import cluster_property_crd, mcs_crds
from dynamo_pool_operator.runtime.client.rest import Client
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.api_fixtures import (
    EXPORTS_CRD,
    IMPORTS_CRD,
    exported,
    exported_becomes,
    fast,
    lines,
    passes,
    plane,
)
from tests.integration.support.export_fixtures import (
    events_for,
    exports_become,
    relay_status,
    set_cluster_id,
)
from tests.integration.support.race_fixtures import (
    CLUSTER_PROPERTY_RULES,
    OPERATOR_RULES,
    POOL,
    Grants,
    make_pool,
    writes_nothing,
)
from tests.integration.support.relay_fixtures import condition
from tests.integration.support.slow_authorizer import SlowAuthorizer
from tests.integration.support.under_test import admin, running
from tests.integration.support.waiting import eventually_or

pytestmark = pytest.mark.timeout(150)

#: The operator's user: only its lists and watches reach the slow authorizer.
USER = "dpo-operator"
#: How long the new version's lists are held: longer than the operator's 10 s wait.
HELD = 13.0
ALPHA = serviceexports("v1alpha1")
BETA = serviceexports("v1beta1")
ABOUT_ALPHA = clusterproperties("v1alpha1")


Slow = tuple[ControlPlane, SlowAuthorizer]


def slow_plane(
    tmp_path: Path, resources: set[str], *, about: bool | tuple[str, ...], mcs: tuple[str, ...]
) -> Iterator[Slow]:
    with SlowAuthorizer(tmp_path, USER, resources) as slow:
        for cp in plane(about=about, mcs=mcs, extra_apiserver_args=slow.apiserver_args):
            yield cp, slow


@pytest.fixture
def exports_alpha(tmp_path: Path) -> Iterator[Slow]:
    yield from slow_plane(tmp_path, {"serviceexports"}, about=False, mcs=("v1alpha1",))


@pytest.fixture
def exports_beta(tmp_path: Path) -> Iterator[Slow]:
    yield from slow_plane(tmp_path, {"serviceexports"}, about=False, mcs=("v1beta1",))


@pytest.fixture
def about_alpha(tmp_path: Path) -> Iterator[Slow]:
    yield from slow_plane(tmp_path, {"clusterproperties"}, about=("v1alpha1",), mcs=("v1beta1",))


@contextlib.asynccontextmanager
async def operator(
    cp: ControlPlane, cfg: OperatorConfiguration
) -> AsyncIterator[OperatorUnderTest]:
    """The operator as `USER`, with the shipped rules (and the ClusterProperty reader)."""
    grants = Grants(cp, USER)
    await grants.grant(USER, OPERATOR_RULES)
    await grants.grant(f"{USER}-clusterproperties", CLUSTER_PROPERTY_RULES)
    async with OperatorUnderTest(cp, cfg, kubeconfig=cp.user_kubeconfig(USER)) as op:
        yield op


@contextlib.asynccontextmanager
async def west_at_alpha(
    cp: ControlPlane, cfg: OperatorConfiguration
) -> AsyncIterator[OperatorUnderTest]:
    """`operator`, started once the cluster's ID reads "west" at v1alpha1."""
    async with admin(cp) as client:
        await set_cluster_id(client, "west", ABOUT_ALPHA)
    async with operator(cp, cfg) as op:
        yield op


def pool_exports(*pools: str) -> set[str]:
    return {f"{p}-{s}" for p in pools for s in ("pool-relay", "frontend")}


@contextlib.asynccontextmanager
async def sampled(probe: Callable[[], Awaitable[Any]]) -> AsyncIterator[list[Any]]:
    """What `probe` returns, every 0.1 s while the block runs."""
    seen: list[Any] = []

    async def sample() -> None:
        while True:
            seen.append(await probe())
            await asyncio.sleep(0.1)

    task = asyncio.create_task(sample())
    try:
        yield seen
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _now(value: bool) -> bool:
    return value


async def reason(client: Client, ns: str, name: str) -> str | None:
    c = await exported(client, ns, name)
    return None if c is None else str(c["reason"])


async def in_effect(read: Callable[[], str | None], want: str, timeout: float) -> None:
    async def probe() -> bool:
        return read() == want

    await eventually_or(
        probe, lambda: f"{read()} is in effect, want {want}, after {timeout:.0f}s", timeout
    )


# ---------------------------------------------------------------- the ServiceExport API
async def test_an_export_version_switch_keeps_the_old_cache_until_the_new_one_has_synced(
    exports_alpha: Slow, caplog: pytest.LogCaptureFixture
) -> None:
    cp, slow = exports_alpha
    async with running(cp, fast("mcs"), caplog, start=operator) as (client, op, ns):
        assert op.running.served.serviceexport_version == "v1alpha1"
        await make_pool(client, ns, name="p1")
        await exports_become(client, ns, pool_exports("p1"), ALPHA)
        slow.hold("serviceexports", "v1beta1", HELD)
        async with (
            sampled(lambda: reason(client, ns, "p1")) as reasons,
            sampled(lambda: _now(op.running.caches_synced())) as readiness,
        ):
            # v1beta1 is served too now, and preferred: the operator moves there.
            for doc in mcs_crds(resolve().mcs_crd_dir, served=("v1alpha1", "v1beta1")):
                await asyncio.to_thread(cp.install_crd, doc)
            # While the new list is held, the old cache serves: a new pool is exported.
            await make_pool(client, ns, name="p2")
            await exports_become(client, ns, pool_exports("p1", "p2"), ALPHA, timeout=HELD)
            try:
                await in_effect(lambda: op.running.served.serviceexport_version, "v1beta1", 45)
            except AssertionError as e:
                raise AssertionError(f"{e}; Exported of p1 was {sorted(set(reasons))}") from e
        assert "ExportAPIUnavailable" not in reasons, reasons
        # Nor did the cache being made hold readiness: the one in effect served.
        assert all(readiness), readiness.count(False)
        late = lines(caplog, "did not complete within 10s", logging.WARNING)
        assert len(late) == 1, late
        assert "v1alpha1 stays in effect" in late[0], late
        switched = lines(caplog, "is served now at v1beta1 (was v1alpha1)")
        assert len(switched) == 1, switched
        # The held list was waited for, not abandoned and started again on every pass.
        asked = [verb for verb, held in slow.seen_of("serviceexports", "v1beta1") if held]
        assert len(asked) <= 2, asked
        slow.hold("serviceexports", "v1beta1", 0)
        # The new cache is the live one: an export deleted now is created again.
        await client.delete(BETA, "p1-frontend", ns)
        await exports_become(client, ns, pool_exports("p1", "p2"), BETA)
        await op.settle()
        await writes_nothing(op, ns, "p1")


async def test_a_served_export_api_whose_list_is_slow_is_not_called_missing(
    exports_beta: Slow, caplog: pytest.LogCaptureFixture
) -> None:
    cp, slow = exports_beta
    async with running(cp, fast("mcs"), caplog, start=operator) as (client, op, ns):
        await make_pool(client, ns, name="p1")
        await exports_become(client, ns, pool_exports("p1"), BETA)
        for crd in (EXPORTS_CRD, IMPORTS_CRD):
            await asyncio.to_thread(cp.delete_crd, crd)
        gone = await exported_becomes(client, ns, "p1", "ExportAPIUnavailable")
        assert "install the Multi-Cluster Services API CRDs" in gone["message"], gone
        # Back, but its list is slow: no cache is usable yet, and the relay says why.
        slow.hold("serviceexports", "v1beta1", HELD)
        for doc in mcs_crds(resolve().mcs_crd_dir, served=("v1beta1",)):
            await asyncio.to_thread(cp.install_crd, doc)

        async def says_listing() -> dict[str, Any] | None:
            c = await exported(client, ns, "p1")
            return c if c is not None and "has not completed" in c["message"] else None

        async def instead() -> str:
            return f"Exported is {await exported(client, ns, 'p1')}"

        said: dict[str, Any] = await eventually_or(says_listing, instead, timeout=HELD)
        assert said["reason"] == "ExportAPIUnavailable", said
        assert "API at v1beta1, but its list has not completed" in said["message"], said
        assert "install" not in said["message"], said
        # The list completes (held, not refused): the exports are made again.
        await exports_become(client, ns, pool_exports("p1"), BETA, timeout=30)
        await eventually(lambda: _not_unavailable(client, ns, "p1"), timeout=30)
        assert op.running.served.serviceexport_version == "v1beta1"
        late = lines(caplog, "did not complete within 10s", logging.WARNING)
        assert len(late) == 1, late
        await op.settle()
        await writes_nothing(op, ns, "p1")


async def _not_unavailable(client: Client, ns: str, name: str) -> bool:
    return await reason(client, ns, name) not in (None, "ExportAPIUnavailable", "ExportFailed")


# ---------------------------------------------------------------- the About API
async def test_a_cluster_property_version_switch_reads_the_old_cache_until_the_new_one_syncs(
    about_alpha: Slow, caplog: pytest.LogCaptureFixture
) -> None:
    cp, slow = about_alpha
    async with running(cp, fast("mcs"), caplog, start=west_at_alpha) as (client, op, ns):
        assert op.running.served.about_version == "v1alpha1"
        await make_pool(client, ns, clusterId="east")
        await eventually(lambda: mismatch_read_at(client, ns, "about.k8s.io/v1alpha1"))
        slow.hold("clusterproperties", "v1beta1", HELD)
        await asyncio.to_thread(cp.install_crd, cluster_property_crd(("v1alpha1", "v1beta1")))
        await in_effect(lambda: op.running.served.about_version, "v1beta1", 45)
        # The property is read from the new cache once it is in effect...
        await eventually(lambda: mismatch_read_at(client, ns, "about.k8s.io/v1beta1"))
        await op.settle()
        # ...and never, meanwhile, from one that had not synced: no failed read.
        failed = [
            e["note"]
            for e in await events_for(client, ns, "ExportFailed")
            if (e.get("related") or {}).get("kind") == "ClusterProperty"
        ]
        assert failed == [], failed
        late = lines(caplog, "did not complete within 10s", logging.WARNING)
        assert len(late) == 1, late
        assert "v1alpha1 stays in effect" in late[0], late


async def mismatch_read_at(client: Client, ns: str, api_version: str) -> bool:
    """A ClusterIDMismatch whose related ClusterProperty was read at `api_version`."""
    return any(
        (e.get("related") or {}).get("apiVersion") == api_version
        for e in await events_for(client, ns, "ClusterIDMismatch")
    )


def about_served(*, alpha: bool, beta: bool) -> dict[str, Any]:
    """The About CRD with both versions, each served or not (the storage version is a
    served one, v1beta1 if it is)."""
    doc = cluster_property_crd(("v1alpha1", "v1beta1"))
    storage = "v1beta1" if beta else "v1alpha1"
    for version in doc["spec"]["versions"]:
        version["served"] = alpha if version["name"] == "v1alpha1" else beta
        version["storage"] = version["name"] == storage
    return doc


async def takes_cluster_id(client: Client, ns: str, value: str) -> bool:
    """The relay (no spec.clusterId) shows the cluster's ID `value`, and says so."""
    said = await condition(client, ns, POOL, "ClusterIDMatched")
    shown = (await relay_status(client, ns, POOL)).get("clusterId")
    return shown == value and said is not None and repr(value) in said["message"]


async def test_a_cluster_property_version_served_again_is_read_live_again(
    about_alpha: Slow, caplog: pytest.LogCaptureFixture
) -> None:
    """In effect at v1alpha1; the CRD moves to v1beta1 alone, whose list is held past the
    operator's wait, so the last content read at v1alpha1 stays in use (its informer is
    stopped: v1alpha1 is no longer served); the CRD is rolled back to v1alpha1 before
    that list completes. The property must then be read live again: a later change of
    its value reaches the relays."""
    cp, slow = about_alpha
    async with running(cp, fast("mcs"), caplog, start=west_at_alpha) as (client, op, ns):
        await make_pool(client, ns)
        await eventually(lambda: takes_cluster_id(client, ns, "west"))
        slow.hold("clusterproperties", "v1beta1", 25.0)
        await asyncio.to_thread(cp.install_crd, about_served(alpha=False, beta=True))

        async def waited() -> bool:
            return bool(lines(caplog, "did not complete within 10s", logging.WARNING))

        await eventually(waited, timeout=30)
        assert op.running.served.about_version == "v1alpha1"
        # Rolled back while the v1beta1 list is still held.
        await asyncio.to_thread(cp.install_crd, about_served(alpha=True, beta=False))
        await passes(op, 3)
        await set_cluster_id(client, "north", ABOUT_ALPHA)

        async def instead() -> str:
            said = await condition(client, ns, POOL, "ClusterIDMatched")
            shown = (await relay_status(client, ns, POOL)).get("clusterId")
            return (
                f"the property changed to 'north' after the rollback, but the relay shows "
                f"clusterId {shown!r}, ClusterIDMatched {said}"
            )

        await eventually_or(lambda: takes_cluster_id(client, ns, "north"), instead, 15)
        assert op.running.served.about_version == "v1alpha1"
