"""`dynamo-pool-operator dev` (what `make dev` runs): it shows what it promises and
leaves nothing behind.

One cluster: the sample pool is published and its relay pods run (kwok). Two clusters:
the pool runs in east and the report shows it as west sees it, through Lighthouse, and
the lines it prints run as printed. (With one cluster they run in test_first_steps.py,
with the README's install steps.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dynamo_pool_operator import dev, process
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.localcluster.assets import resolve
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.lighthouse import namespaces_refused
from tests.e2e.user_shell import Shell, printed_lines, running_dev

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


async def test_dev_publishes_the_sample_pool_and_its_relay_pods_run(
    started: list[ControlPlane], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if why := resolve().missing_peers("kwok"):
        pytest.skip(why)
    kubeconfig = tmp_path / "dev" / "kubeconfig"
    code = await dev.run(OperatorConfiguration(), exit_when_ready=True, kubeconfig=kubeconfig)
    out = capsys.readouterr().out
    assert code == process.EXIT_OK, out
    assert "Pool dynamo-demo/llama: Ready=True relay Service llama-pool-relay" in out, out
    assert re.search(r"relay pods Running: llama-pool-relay-\S+, llama-pool-relay-\S+ ", out), out
    assert f"export KUBECONFIG={kubeconfig}" in out, out
    assert not kubeconfig.exists(), "dev left its kubeconfig behind"


async def test_dev_with_two_clusters_shows_the_pool_as_the_other_cluster_sees_it(
    started: list[ControlPlane], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if why := resolve().missing_peers() or namespaces_refused():
        pytest.skip(why)
    kubeconfig = tmp_path / "kubeconfig"
    async with running_dev(capsys, kubeconfig, clusters=2) as out:
        # What it prints runs as printed, in both contexts of its one kubeconfig:
        # `status`, a `check` that is green in each, `discover` in west, kubectl's.
        export, commands = printed_lines(out)
        shell = Shell(tmp_path / "home", export)
        assert [c for c in commands if " check --context " in c], commands
        for command in commands:
            ran = await shell.run(command)
            assert ran.code == 0, str(ran)
            assert "✘" not in ran.out, str(ran)
            if " discover " in command:
                assert re.search(r"\beast\s+dynamo-demo\s+llama\s+yes\b", ran.out), str(ran)
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
