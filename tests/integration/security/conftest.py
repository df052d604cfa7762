"""The secure metrics tests' scene (tests/integration/support/metrics_scene.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from dynamo_pool_operator import rbac
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from tests.integration.support.metrics_scene import SERIES, Scene


@pytest.fixture
async def scene(control_plane: ControlPlane, namespace: str) -> AsyncIterator[Scene]:
    s = Scene(control_plane, namespace)
    await s.grant("operator", "auth", rbac.metrics_auth_rules())
    await s.grant("scraper", "reader", rbac.metrics_reader_rules())
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    Counter(SERIES.removesuffix("_total"), "a series to find in the scrape", registry=reg).inc()
    return reg
