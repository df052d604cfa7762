"""`dynamo-pool-operator dev` (what `make dev` runs): it shows what it promises and
leaves nothing behind.

One cluster: the sample pool is published and its relay pods run (kwok). Two clusters:
the pool runs in east and the report shows it as west sees it, through Lighthouse.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from dynamo_pool_operator import dev, process
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.localcluster.assets import resolve
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.lighthouse import namespaces_refused
from tests.leaks import surviving

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ControlPlane]]:
    """Every ControlPlane dev starts; afterwards none of their processes or directories
    may survive."""
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
    assert planes, "dev started no control plane"
    alive = surviving(pids)
    assert not alive, f"dev left processes running: {alive}"
    assert not [cp.dir for cp in planes if cp.dir.exists()], "dev left a directory behind"


async def test_dev_publishes_the_sample_pool_and_its_relay_pods_run(
    started: list[ControlPlane], capsys: pytest.CaptureFixture[str]
) -> None:
    if why := resolve().missing_peers("kwok"):
        pytest.skip(why)
    code = await dev.run(OperatorConfiguration(), exit_when_ready=True)
    out = capsys.readouterr().out
    assert code == process.EXIT_OK, out
    assert "Pool dynamo-demo/llama: Ready=True relay Service llama-pool-relay" in out, out
    assert re.search(r"relay pods Running: llama-pool-relay-\S+, llama-pool-relay-\S+ ", out), out


async def test_dev_with_two_clusters_shows_the_pool_as_the_other_cluster_sees_it(
    started: list[ControlPlane], capsys: pytest.CaptureFixture[str]
) -> None:
    if why := resolve().missing_peers() or namespaces_refused():
        pytest.skip(why)
    code = await dev.run(OperatorConfiguration(), exit_when_ready=True, clusters=2)
    out = capsys.readouterr().out
    assert code == process.EXIT_OK, out
    assert "Pool dynamo-demo/llama in east: Ready=True relay Service llama-pool-relay" in out, out
    assert "relay pods Running: llama-pool-relay-" in out, out
    west = out[out.index("As west sees it") :]
    # discover's table as read in west, printed once the pool is live there: keyed by
    # east's cluster ID, its relay Service headless, so imported as the relay pods' IPs
    # (kwok's pod CIDR), both Ready; the frontend's a ClusterIP Service, imported as its
    # ClusterIP.
    assert re.search(
        r"\n  east\s+dynamo-demo\s+llama\s+yes\s+2/2 ready\s+llama-frontend \(1/1 ready\)\n",
        west,
    ), out
    assert re.search(
        r"\n    relay llama-pool-relay: 10\.244\.\d+\.\d+ ready, 10\.244\.\d+\.\d+ ready\n",
        west,
    ), out
    assert re.search(r"\n    frontend llama-frontend: 10\.96\.\d+\.\d+ ready\n", west), out
    assert "problem:" not in west, out
    assert "Not used by the router" not in west, out
    assert len(started) == 3, "broker, east, west"
