"""Fixtures the runtime's unit tests share: time that moves only when a test says so,
and metrics that start from zero."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from tests.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    """A clock at its start, advanced by the test alone."""
    return FakeClock()


@pytest.fixture
def registry() -> CollectorRegistry:
    """A registry of the test's own: no sample left by another test."""
    return CollectorRegistry()
