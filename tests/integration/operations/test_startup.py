"""Operator startup: gates, missing APIs, configuration errors.

Rules: docs/exports.md, 'Turning it on' (a missing ServiceExport API exits 1, a missing
About API only turns the cluster ID check off), docs/architecture.md, 'Process' (a
startup failure is one error line, exit 1) and docs/configuration.md (an invalid
configuration does not start, exit 2).

The process entry point (`process.run`) runs against real control planes: the
session one (every API served) and a private one that starts without the MCS and
About APIs. The CLI runs as a real subprocess.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from dynamo_pool_operator import process
from dynamo_pool_operator.api import crd as relay_crd
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.localcluster.assets import resolve
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.crds import dgd_crd, mcs_crds
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import DEFAULT_USER_AGENT, Client
from dynamo_pool_operator.runtime.objects.resources import LEASES
from tests.harness import eventually
from tests.integration.support.export_fixtures import config, exports_become
from tests.integration.support.race_fixtures import (
    FRONTEND_SVC,
    OPERATOR_RULES,
    RELAY_SVC,
    Grants,
    make_pool,
)
from tests.integration.support.under_test import LEADING, messages, run_until_leading, stop_operator

pytestmark = pytest.mark.timeout(60)

MCS_CRDS = ("serviceexports.multicluster.x-k8s.io", "serviceimports.multicluster.x-k8s.io")


def run_config(implementation: str, **sections: object) -> OperatorConfiguration:
    """One replica, no listeners: nothing here may collide with another test."""
    return config(
        implementation,
        leaderElection={"enabled": False},
        server={"metricsAddress": "0", "healthProbeAddress": "0"},
        **sections,
    )


@pytest.fixture(scope="module")
def bare_plane() -> Iterator[ControlPlane]:
    """A cluster with Dynamo's and our CRDs only: no MCS API, no About API."""
    cp = ControlPlane(crds=[relay_crd.crd(), dgd_crd("v1beta1")], garbage_collector=False)
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


def _mcs_served(cp: ControlPlane, served: bool) -> None:
    """Install or remove the ServiceExport/ServiceImport CRDs (whatever ran before)."""
    for crd in MCS_CRDS:
        present = cp.request(
            "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}"
        )
        if not served and present[0] == 200:
            cp.delete_crd(crd)
    if served:
        for doc in mcs_crds(resolve().mcs_crd_dir):
            cp.install_crd(doc)


# ---------------------------------------------------------------- served APIs
async def test_the_served_apis_are_logged(
    control_plane: ControlPlane, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    cfg = run_config("mcs", namespace={"restricted": namespace})
    stop, task = await run_until_leading(cfg, control_plane, caplog)
    assert await stop_operator(stop, task) == process.EXIT_OK
    resolved = [m for m in messages(caplog, logging.INFO) if m.startswith("APIs served")]
    assert resolved == [
        "APIs served: dynamographdeployments.nvidia.com=v1beta1 "
        "multiClusterExport=v1beta1 clusterIDCheck=v1beta1"
    ]
    assert not [m for m in messages(caplog, logging.WARNING) if "cluster ID check" in m]


@pytest.mark.parametrize("implementation", ["mcs", "karmada"])
async def test_implementation_without_the_serviceexport_api_fails_startup(
    bare_plane: ControlPlane, caplog: pytest.LogCaptureFixture, implementation: str
) -> None:
    await asyncio.to_thread(_mcs_served, bare_plane, False)
    caplog.set_level(logging.INFO)
    code = await asyncio.wait_for(
        process.run(
            run_config(implementation),
            kubeconfig=str(bare_plane.kubeconfig),
            stop=asyncio.Event(),
        ),
        30,
    )
    assert code == process.EXIT_FAILURE
    errors = messages(caplog, logging.ERROR)
    assert len(errors) == 1, errors
    assert "serviceexports.multicluster.x-k8s.io" in errors[0]
    assert "multiCluster.mcsImplementation" in errors[0]
    assert repr(implementation) in errors[0]
    assert LEADING not in messages(caplog, logging.INFO)


async def test_feature_off_starts_without_the_serviceexport_api(
    bare_plane: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    await asyncio.to_thread(_mcs_served, bare_plane, False)
    caplog.set_level(logging.INFO)
    stop, task = await run_until_leading(run_config(""), bare_plane, caplog)
    assert await stop_operator(stop, task) == process.EXIT_OK
    assert any("multiClusterExport=off" in m for m in messages(caplog, logging.INFO))


async def test_about_api_absent_turns_the_cluster_id_check_off_with_one_warning(
    bare_plane: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    await asyncio.to_thread(_mcs_served, bare_plane, True)
    ns = f"t-{uuid.uuid4().hex[:10]}"
    await asyncio.to_thread(bare_plane.create_namespace, ns)
    caplog.set_level(logging.INFO)
    stop, task = await run_until_leading(run_config("mcs"), bare_plane, caplog)
    try:
        # The operator runs: a pool is published and exported.
        async with Client(load_kubeconfig(bare_plane.kubeconfig), user_agent="dpo-tests") as c:
            await make_pool(c, ns, clusterId="whatever")
            await exports_become(c, ns, {RELAY_SVC, FRONTEND_SVC})
    finally:
        code = await stop_operator(stop, task)
    assert code == process.EXIT_OK
    off = [m for m in messages(caplog, logging.WARNING) if "cluster ID check" in m]
    assert len(off) == 1, off
    assert "clusterproperties.about.k8s.io" in off[0]
    assert "is off" in off[0]
    assert any(
        "multiClusterExport=v1beta1 clusterIDCheck=off" in m for m in messages(caplog, logging.INFO)
    )


# ---------------------------------------------------------------- RBAC at start
async def _run_as(
    cp: ControlPlane, user: str, cfg: OperatorConfiguration, timeout: float = 20
) -> tuple[int, float]:
    """`process.run` as `user` (a client certificate, no RBAC but what a test grants),
    expected to exit by itself within `timeout`: its code and how long it took."""
    kubeconfig = await asyncio.to_thread(cp.user_kubeconfig, user)
    started = time.monotonic()
    task = asyncio.create_task(process.run(cfg, kubeconfig=str(kubeconfig), stop=asyncio.Event()))
    try:
        code = await asyncio.wait_for(task, timeout)
    except TimeoutError:
        raise AssertionError(f"run as {user} did not exit within {timeout}s") from None
    return code, time.monotonic() - started


async def test_run_without_rbac_exits_at_once_naming_what_is_missing(
    control_plane: ControlPlane, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An identity the API server grants nothing: `run` asks (SelfSubjectAccessReviews,
    as `check` does) and exits 1 in seconds with one line naming every missing
    permission by resource and `check`, instead of retrying Forbidden lists (dozens of
    warnings) until its caches' sync times out 120 s later."""
    caplog.set_level(logging.INFO)
    user = f"dpo-norbac-{namespace}"
    cfg = config(
        "mcs",
        leaderElection={"enabled": True, "namespace": namespace, "name": "dpo-norbac"},
        server={"metricsAddress": "0", "healthProbeAddress": "0"},
    )
    code, took = await _run_as(control_plane, user, cfg)
    assert code == process.EXIT_FAILURE
    assert took < 10, f"took {took:.1f}s"
    errors = messages(caplog, logging.ERROR)
    assert len(errors) == 1, errors
    said = errors[0]
    assert said.startswith(f"{user} lacks 43 of the 43 permissions the operator needs: "), said
    for missing in (
        "dynamopoolrelays.nvidia.com cluster-wide: get, list, watch (manager)",
        "dynamopoolrelays.nvidia.com/status cluster-wide: patch (manager)",
        "deployments.apps cluster-wide: get, list, watch, create, patch, delete (manager)",
        f"leases.coordination.k8s.io in {namespace}: create (leader election)",
        f"leases.coordination.k8s.io dpo-norbac in {namespace}: get, update (leader election)",
        "clusterproperties.about.k8s.io cluster-wide: get, list, watch (cluster ID)",
    ):
        assert missing in said, missing
    assert f"`dynamo-pool-operator check --as {user}`" in said
    assert not [r for r in caplog.records if "Forbidden" in r.getMessage()], "no cache started"
    assert LEADING not in messages(caplog, logging.INFO)


async def test_run_lacking_one_rule_names_that_rule_only(
    control_plane: ControlPlane, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The shipped manager rules in the namespace it is restricted to, and no Lease
    Role: the line names the Lease's rules and nothing the identity holds."""
    caplog.set_level(logging.INFO)
    user = f"dpo-nolease-{namespace}"
    grants = Grants(control_plane, user)
    await grants.grant(user, OPERATOR_RULES, namespace)
    cfg = config(
        "",
        namespace={"restricted": namespace},
        leaderElection={"enabled": True, "namespace": namespace, "name": "dpo-nolease"},
        server={"metricsAddress": "0", "healthProbeAddress": "0"},
    )
    try:
        code, _ = await _run_as(control_plane, user, cfg)
    finally:
        await grants.revoke_all()
    assert code == process.EXIT_FAILURE
    errors = messages(caplog, logging.ERROR)
    assert len(errors) == 1, errors
    lease = "leases.coordination.k8s.io"
    assert errors[0].startswith(
        f"{user} lacks 3 of the 40 permissions the operator needs: {lease} in {namespace}: "
        f"create (leader election); {lease} dpo-nolease in {namespace}: get, update "
        "(leader election). "
    ), errors[0]


async def test_run_lacking_only_the_cluster_id_read_starts_with_one_warning(
    control_plane: ControlPlane, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """What the operator runs without, degraded and saying so on each relay (the
    ClusterProperty reader role: `ClusterPropertyUnreadable`), does not stop it: one
    warning at start names it."""
    caplog.set_level(logging.INFO)
    user = f"dpo-noprops-{namespace}"
    grants = Grants(control_plane, user)
    await grants.grant(user, OPERATOR_RULES)
    cfg = run_config("mcs", namespace={"restricted": namespace})
    kubeconfig = await asyncio.to_thread(control_plane.user_kubeconfig, user)
    stop = asyncio.Event()
    task = asyncio.create_task(process.run(cfg, kubeconfig=str(kubeconfig), stop=stop))

    async def leading_or_done() -> bool:
        return task.done() or LEADING in messages(caplog, logging.INFO)

    try:
        # It leads once the optional cache's grace (10 s) is over.
        await eventually(leading_or_done, timeout=40)
        assert not task.done(), f"the operator exited with {task.result()}"
    finally:
        code = await stop_operator(stop, task)
        await grants.revoke_all()
    assert code == process.EXIT_OK
    assert not messages(caplog, logging.ERROR)
    said = [m for m in messages(caplog, logging.WARNING) if m.startswith(user)]
    assert said == [
        f"{user} lacks clusterproperties.about.k8s.io cluster-wide: get, list, watch "
        f"(cluster ID): those run degraded until granted (`dynamo-pool-operator check --as "
        f"{user}`)"
    ]


# ---------------------------------------------------------------- Ctrl-C while starting
#: The CLI as a shell runs it in the foreground: SIGINT raises KeyboardInterrupt (a
#: process started in the background inherits SIGINT ignored, and so would its child).
_CLI = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('dynamo_pool_operator.cli', run_name='__main__', alter_sys=True)"
)


def _kubeconfig_to(path: Path, server: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return path


@pytest.mark.parametrize("command", ["run", "status", "discover", "check"])
async def test_ctrl_c_while_waiting_on_the_cluster_exits_130_with_one_line(
    tmp_path: Path, command: str
) -> None:
    """An API server that accepts the connection and never answers (its TLS handshake
    hangs): the command waits on it, and Ctrl-C then stops it at once with exit 130
    and one line, never a traceback (asyncio's cancellation, then KeyboardInterrupt)."""
    connected = asyncio.Event()
    held: list[asyncio.StreamWriter] = []

    async def mute(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        connected.set()

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    kubeconfig = _kubeconfig_to(tmp_path / "kubeconfig", f"https://127.0.0.1:{port}")
    args = [command, "--kubeconfig", str(kubeconfig)]
    if command == "run":
        cfg = tmp_path / "config.yaml"
        cfg.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "operator.config.dynamo.nvidia.com/v1alpha1",
                    "kind": "OperatorConfiguration",
                    "leaderElection": {"enabled": False},
                    "server": {"metricsAddress": "0", "healthProbeAddress": "0"},
                    "logging": {"format": "console"},
                }
            )
        )
        args += ["--config", str(cfg)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CLI,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await asyncio.wait_for(connected.wait(), 30)
        await asyncio.sleep(0.2)  # well inside the 10 s the handshake may take
        proc.send_signal(signal.SIGINT)
        started = time.monotonic()
        _, err = await asyncio.wait_for(proc.communicate(), 15)
        took = time.monotonic() - started
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        for writer in held:
            writer.transport.abort()
        server.close()
        await server.wait_closed()
    lines = err.decode().splitlines()
    assert proc.returncode == 130, lines
    assert took < 5, f"stopped {took:.1f}s after Ctrl-C"
    assert len(lines) == 1, "\n".join(lines)
    assert "interrupted" in lines[0], lines[0]


# ---------------------------------------------------------------- shutdown
async def test_a_stopped_leader_has_released_its_lease_when_run_returns(
    control_plane: ControlPlane, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """SIGTERM hands over in about a second because the leader releases its Lease
    (holder emptied) before `run` returns, with its client still open. Several
    start/stop cycles, since the release once raced the rest of the shutdown: a
    second cancellation cut it short and it ran on after the client had closed."""
    caplog.set_level(logging.INFO)
    cfg = config(
        "mcs",
        namespace={"restricted": namespace},
        leaderElection={"enabled": True, "namespace": namespace, "name": "dpo-release"},
        server={"metricsAddress": "0", "healthProbeAddress": "0"},
    )
    async with Client(load_kubeconfig(control_plane.kubeconfig), user_agent="dpo-tests") as c:
        for cycle in range(4):
            caplog.clear()
            stop, task = await run_until_leading(cfg, control_plane, caplog)
            assert await stop_operator(stop, task) == process.EXIT_OK
            lease = await c.get(LEASES, "dpo-release", namespace)
            assert lease["spec"].get("holderIdentity") in ("", None), (cycle, lease["spec"])
            released = [m for m in messages(caplog, logging.INFO) if "released lease" in m]
            assert len(released) == 1, (cycle, messages(caplog, logging.WARNING))


# ---------------------------------------------------------------- client pacing
async def test_client_connection_qps_paces_every_request_of_the_operator(
    control_plane: ControlPlane, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`clientConnection.qps` reaches the one client the process shares: with qps 4 and
    burst 1, its writes publishing a pool (Deployment, Service, exports, status,
    Events) reach the server about 1/4 s apart. Unpaced, they land milliseconds
    apart."""
    caplog.set_level(logging.INFO)
    cfg = run_config(
        "mcs", namespace={"restricted": namespace}, clientConnection={"qps": 4, "burst": 1}
    )
    since = control_plane.audit.offset()
    stop, task = await run_until_leading(cfg, control_plane, caplog)
    try:
        async with Client(load_kubeconfig(control_plane.kubeconfig), user_agent="dpo-tests") as c:
            await make_pool(c, namespace)
            await exports_become(c, namespace, {RELAY_SVC, FRONTEND_SVC})
    finally:
        code = await stop_operator(stop, task)
    assert code == process.EXIT_OK
    writes = [
        w
        for w in await asyncio.to_thread(
            control_plane.audit.writes, since, user_agent_prefix=DEFAULT_USER_AGENT
        )
        if w.namespace == namespace
    ]
    assert len(writes) >= 5, [(w.verb, w.resource, w.name) for w in writes]
    received = sorted(datetime.fromisoformat(w.raw["requestReceivedTimestamp"]) for w in writes)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(received)]
    # 1/4 s per token. One send delayed after its token (a busy loop) shortens one gap;
    # unpaced, most gaps are milliseconds.
    short = [round(g, 3) for g in gaps if g < 0.15]
    assert len(short) <= 1, f"writes under 0.15 s apart at qps 4: {short} of {gaps}"


# ---------------------------------------------------------------- configuration
BAD_CONFIG = """\
apiVersion: operator.config.dynamo.nvidia.com/v1alpha1
kind: OperatorConfiguration
multiCluster:
  mcsImplementation: submariner
discovery:
  backend: consul
  extra: 1
poolRelay:
  replicas: two
  port: 70000
leaderElection:
  leaseDuration: soon
server:
  metricsAddress: nope
"""
#: Every problem in BAD_CONFIG, by its field path.
BAD_PATHS = (
    "multiCluster.mcsImplementation",
    "discovery.backend",
    "discovery.extra",
    "poolRelay.replicas",
    "poolRelay.port",
    "leaderElection.leaseDuration",
    "server.metricsAddress",
)


async def test_bad_configuration_file_is_reported_in_full_and_nothing_starts(
    tmp_path: Path,
) -> None:
    # A "cluster" that counts connections: the CLI must not even reach it.
    connections = 0

    async def count(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        writer.close()

    server = await asyncio.start_server(count, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": f"https://127.0.0.1:{port}",
                            "insecure-skip-tls-verify": True,
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_CONFIG)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "dynamo_pool_operator.cli",
            "run",
            "--config",
            str(bad),
            "--kubeconfig",
            str(kubeconfig),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        server.close()
        await server.wait_closed()
    assert proc.returncode == 2
    assert out == b""
    lines = err.decode().splitlines()
    assert lines[0] == f"invalid configuration in {bad}: {len(BAD_PATHS)} problems"
    reported = sorted(line.split(":")[0].removeprefix("  - ") for line in lines[1:])
    assert reported == sorted(BAD_PATHS)
    assert connections == 0
