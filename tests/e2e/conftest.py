"""Fixtures of the e2e tier's `dev` tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from tests.leaks import surviving


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ControlPlane]]:
    """Every ControlPlane the test starts (dev's); afterwards none of their processes or
    directories may survive."""
    planes: list[ControlPlane] = []
    real_start = ControlPlane.start

    def start(self: ControlPlane) -> None:
        planes.append(self)
        real_start(self)

    monkeypatch.setattr(ControlPlane, "start", start)
    pids: list[int] = []
    real_stop = ControlPlane.stop

    def stop(self: ControlPlane) -> None:
        pids.extend(self.pids)
        real_stop(self)

    monkeypatch.setattr(ControlPlane, "stop", stop)
    yield planes
    assert planes, "no control plane was started"
    alive = surviving(pids)
    assert not alive, f"processes left running: {alive}"
    assert not [cp.dir for cp in planes if cp.dir.exists()], "a directory was left behind"
