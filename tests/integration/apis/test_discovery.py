"""Startup discovery when an aggregated API is down, and startup failures in one line.

A real kube-apiserver with an APIService whose Service has no endpoints (what a cluster
with metrics-server down looks like): the server answers 503 for that group version,
and aggregated discovery marks it Stale. Both discovery paths run against it: the
aggregated one, and the legacy per-group one of servers without aggregated discovery
(the client is made to ask for it by leaving the aggregated type out of its Accept
header). An unavailable group the operator does not need is skipped, as client-go's
partial discovery does; one it needs fails startup with one line naming it.

`dynamo-pool-operator run` runs as a real subprocess for the last tests: whatever stops
it at startup, it exits 1 with one error line and never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamo_pool_operator import process
from dynamo_pool_operator.api import crd as relay_crd
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.crds import cluster_property_crd, dgd_crd
from dynamo_pool_operator.runtime.client import discovery as client_discovery
from tests.integration.support.export_fixtures import config
from tests.integration.support.under_test import LEADING, messages, run_until_leading, stop_operator

pytestmark = pytest.mark.timeout(90)

METRICS_GV = "metrics.k8s.io/v1beta1"
MCS_GV = "multicluster.x-k8s.io/v1beta1"
SERVICE_NS = "kube-aggregated"


def _api_service(group_version: str) -> dict[str, Any]:
    group, version = group_version.split("/")
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"{version}.{group}"},
        "spec": {
            "group": group,
            "version": version,
            # A Service with no endpoints: the aggregator answers 503 for the group.
            "service": {"namespace": SERVICE_NS, "name": "absent", "port": 443},
            "insecureSkipTLSVerify": True,
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }


def _register_unavailable(cp: ControlPlane, group_version: str) -> None:
    """An APIService that is registered but down; returns once both discovery paths see it."""
    cp.apply(_api_service(group_version))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status, _ = cp.request("GET", f"/apis/{group_version}")
        if status == 503:
            return
        time.sleep(0.1)
    raise AssertionError(f"{group_version} does not answer 503 after 30 s")


@contextlib.contextmanager
def unavailable(cp: ControlPlane, group_version: str) -> Iterator[None]:
    _register_unavailable(cp, group_version)
    try:
        yield
    finally:
        group, version = group_version.split("/")
        cp.request("DELETE", f"/apis/apiregistration.k8s.io/v1/apiservices/{version}.{group}")


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    """Our CRD, Dynamo's and the About API; no MCS API; metrics.k8s.io down. Its own
    control plane: the session one runs the namespace controller, which cannot delete
    namespaces while a group is unavailable."""
    cp = ControlPlane(
        crds=[relay_crd.crd(), dgd_crd("v1beta1"), cluster_property_crd()],
        garbage_collector=False,
    )
    cp.start()
    try:
        cp.create_namespace(SERVICE_NS)
        status, body = cp.request(
            "POST",
            f"/api/v1/namespaces/{SERVICE_NS}/services",
            {"metadata": {"name": "absent"}, "spec": {"ports": [{"port": 443}]}},
        )
        assert status == 201, body
        _register_unavailable(cp, METRICS_GV)
        yield cp
    finally:
        cp.stop()


@pytest.fixture(params=["aggregated", "legacy"])
def discovery(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which discovery the client uses. Legacy: an Accept header without the aggregated
    type, so the server answers what a server without aggregated discovery does."""
    if request.param == "legacy":
        monkeypatch.setattr(client_discovery, "AGGREGATED_DISCOVERY", "application/json")
    return str(request.param)


def run_config(implementation: str) -> OperatorConfiguration:
    return config(
        implementation,
        leaderElection={"enabled": False},
        server={"metricsAddress": "0", "healthProbeAddress": "0"},
    )


# ---------------------------------------------------------------- in process
async def test_an_unavailable_group_it_does_not_need_is_skipped_with_one_warning(
    plane: ControlPlane, discovery: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    stop, task = await run_until_leading(run_config(""), plane, caplog)
    assert await stop_operator(stop, task) == process.EXIT_OK
    skipped = [m for m in messages(caplog, logging.WARNING) if METRICS_GV in m]
    assert len(skipped) == 1, messages(caplog, logging.WARNING)
    assert "unavailable" in skipped[0]
    assert not messages(caplog, logging.ERROR)


async def test_an_unavailable_group_it_needs_fails_startup_with_one_line_naming_it(
    plane: ControlPlane, discovery: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with unavailable(plane, MCS_GV):
        code = await asyncio.wait_for(
            process.run(run_config("mcs"), kubeconfig=str(plane.kubeconfig), stop=asyncio.Event()),
            30,
        )
    assert code == process.EXIT_FAILURE
    errors = messages(caplog, logging.ERROR)
    assert len(errors) == 1, errors
    assert MCS_GV in errors[0]
    assert "unavailable" in errors[0]
    assert "v1beta1.multicluster.x-k8s.io" in errors[0], "name the APIService to look at"
    assert "\n" not in errors[0]
    assert not any(r.exc_info for r in caplog.records)
    assert LEADING not in messages(caplog, logging.INFO)


# ---------------------------------------------------------------- the CLI, as a process
def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kubeconfig_to(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
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


def _run_cli(
    tmp_path: Path, kubeconfig: Path, implementation: str, health: str = "0"
) -> tuple[int, list[str]]:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "operator.config.dynamo.nvidia.com/v1alpha1",
                "kind": "OperatorConfiguration",
                "multiCluster": {"mcsImplementation": implementation},
                "leaderElection": {"enabled": False},
                "server": {"metricsAddress": "0", "healthProbeAddress": health},
                "logging": {"format": "json"},
            }
        )
    )
    args = ["run", "--config", str(cfg), "--kubeconfig", str(kubeconfig)]
    done = subprocess.run(
        [sys.executable, "-m", "dynamo_pool_operator.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout == ""
    return done.returncode, done.stderr.splitlines()


@pytest.mark.parametrize(
    ("case", "implementation", "reason"),
    [
        ("connection-refused", "", "was refused - did you specify the right host or port?"),
        ("unauthorized", "", "401"),
        ("no-rbac", "", "`dynamo-pool-operator check --as dpo-norbac-"),
        ("needed-group-unavailable", "mcs", MCS_GV),
        ("needed-api-missing", "karmada", "serviceexports.multicluster.x-k8s.io"),
        ("probe-address-taken", "", "address already in use"),
    ],
)
def test_run_exits_1_with_one_line_and_no_traceback(
    plane: ControlPlane, tmp_path: Path, case: str, implementation: str, reason: str
) -> None:
    if case == "connection-refused":
        kubeconfig = _kubeconfig_to(tmp_path, f"https://127.0.0.1:{_closed_port()}")
    elif case == "unauthorized":
        kubeconfig = plane.token_kubeconfig("not-a-token", user=f"nobody-{tmp_path.name}")
    elif case == "no-rbac":  # authenticated, granted nothing
        kubeconfig = plane.user_kubeconfig(f"dpo-norbac-{tmp_path.name}")
    else:
        kubeconfig = plane.kubeconfig
    with contextlib.ExitStack() as stack:
        health = "0"
        if case == "needed-group-unavailable":
            stack.enter_context(unavailable(plane, MCS_GV))
        if case == "probe-address-taken":
            taken = stack.enter_context(socket.socket())
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            health = f"127.0.0.1:{taken.getsockname()[1]}"
        code, lines = _run_cli(tmp_path, kubeconfig, implementation, health)
    assert code == 1, lines
    assert not any("Traceback" in line for line in lines), "\n".join(lines)
    records = [json.loads(line) for line in lines]
    errors = [r for r in records if r["level"] == "error"]
    assert len(errors) == 1, lines
    assert reason in errors[0]["msg"], errors[0]["msg"]
    assert "error" not in errors[0], "a traceback was logged"
