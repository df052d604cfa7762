"""Unit tests for runtime.cache.optional: optional checks and their degraded gauge."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.cache.informer import Informer
from dynamo_pool_operator.runtime.cache.optional import DegradedChecks
from tests.unit.runtime.cache.support import RES, Silent


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
