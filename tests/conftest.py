"""Shared fixtures: one real control plane per test session, one namespace per test.

Tests under tests/integration, tests/e2e and tests/faults are marked automatically,
so `pytest -m "not integration and not e2e and not faults"` runs only the unit tier.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from dynamo_pool_operator.localcluster.assets import Assets
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from tests.leaks import run_plane

# Every property test runs on shared 2-core boxes (CI, a mutation run's instrumented
# copy): how fast examples are generated or run is never what they check, so neither a
# deadline nor the "too slow" health check may fail them.
settings.register_profile("shared-box", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("shared-box")

_TIERS = {
    "integration": pytest.mark.integration,
    "e2e": pytest.mark.e2e,
    "faults": pytest.mark.faults,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).parts
        for tier, mark in _TIERS.items():
            if tier in parts:
                item.add_marker(mark)


_ASSETS = pytest.StashKey[Assets]()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Resolve (and on a fresh machine build: 10-40 min) the control-plane binaries once,
    before any test runs: not inside a fixture, where the per-test timeout would kill
    the build, and with its progress visible."""
    if not any(any(item.get_closest_marker(tier) for tier in _TIERS) for item in session.items):
        return
    from dynamo_pool_operator.localcluster.assets import resolve

    capture = session.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        session.config.stash[_ASSETS] = resolve()


def _assets(request: pytest.FixtureRequest) -> Assets:
    from dynamo_pool_operator.localcluster.assets import resolve

    return request.config.stash.get(_ASSETS, None) or resolve()


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[object]:
    """etcd + kube-apiserver + GC with every CRD the operator can use installed.

    On teardown it asserts that no process and no temporary directory survive.
    """
    from dynamo_pool_operator.localcluster.controlplane import ControlPlane
    from dynamo_pool_operator.localcluster.crds import default_crds

    assets = _assets(request)
    yield from run_plane(ControlPlane(assets=assets, crds=default_crds(assets.mcs_crd_dir)))


@pytest.fixture(scope="session")
def node_plane(request: pytest.FixtureRequest) -> Iterator[object]:
    """A second control plane, started on first use, where pods run: the same APIs, one
    kwok Node, the scheduler stand-in and the Deployment/ReplicaSet/EndpointSlice/Job
    controllers (localcluster/kwok.py). Skips, saying why, when kwok was not built."""
    from dynamo_pool_operator.localcluster.controlplane import ControlPlane
    from dynamo_pool_operator.localcluster.crds import default_crds

    assets = _assets(request)
    if why := assets.missing_peers("kwok"):
        pytest.skip(why)
    yield from run_plane(
        ControlPlane(assets=assets, crds=default_crds(assets.mcs_crd_dir), nodes=1)
    )


@pytest.fixture
def namespace(control_plane: object) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards (the namespace controller empties it).
    It enforces Pod Security `restricted` (`ControlPlane.create_namespace`)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    control_plane.create_namespace(name)  # type: ignore[attr-defined]
    try:
        yield name
    finally:
        control_plane.delete_namespace(name)  # type: ignore[attr-defined]


@pytest.fixture
async def client(control_plane: object) -> AsyncIterator[Client]:
    """The runtime's own client, authenticated as admin (system:masters)."""
    async with Client(
        load_kubeconfig(control_plane.kubeconfig),  # type: ignore[attr-defined]
        user_agent="dpo-tests",
    ) as c:
        yield c


@pytest.fixture
async def alice(control_plane: object, namespace: str) -> AsyncIterator[Client]:
    """A pool author with less RBAC than the operator (tests/integration/support/tenants.py): her
    pools in the test's namespace, their Events, and nothing else."""
    from tests.integration.support.tenants import tenant_client

    async with tenant_client(control_plane, namespace) as c:  # type: ignore[arg-type]
        yield c
