"""Fixtures shared by the runtime tests."""

from __future__ import annotations

import pytest

from dynamo_pool_operator.runtime.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
