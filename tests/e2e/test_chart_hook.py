"""The chart's CRD hook Job where pods run: it completes, and it fails in time.

On the control plane with a kwok Node (the `node_plane` the e2e tier shares), the Job
controller makes the hook Job's pod and kwok completes it, so `helm install` finishes
instead of waiting out Helm's timeout with a Job that never gets a pod; Helm then
deletes the Job (`hook-succeeded`), and `helm uninstall` leaves nothing of it behind.
And the Job's deadline passes before Helm's default `--timeout`, so a hook that cannot
finish fails with the Job's own reason, which Helm prints.
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from tests.e2e.chart_helpers import CHART, helm_binary

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

HOOK_LABEL = "app.kubernetes.io/component=crd-upgrade"
#: Helm's default `--timeout`: what `helm install` waits for a hook without one.
HELM_DEFAULT_TIMEOUT = 300


def _helm(cp: ControlPlane | None, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    cmd = [str(helm_binary()), *args, *(["--kubeconfig", str(cp.kubeconfig)] if cp else [])]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=150, check=False)


def _items(cp: ControlPlane, path: str) -> list[dict[str, Any]]:
    status, body = cp.request("GET", path)
    assert status == 200, body
    return list(body["items"])


def test_the_charts_crd_hook_completes_on_a_plane_with_nodes(
    node_plane: ControlPlane, tmp_path: Path
) -> None:
    """`helm install`, given a minute rather than its default five, succeeds: the hook
    Job got its pod, which completed; the Job went once it had, and its pod after
    `helm uninstall`."""
    cp = node_plane
    suffix = uuid.uuid4().hex[:8]
    release, namespace = f"hook-{suffix}", f"dpo-hook-{suffix}"
    cp.create_namespace(namespace)
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    pods = f"/api/v1/namespaces/{namespace}/pods?labelSelector={HOOK_LABEL}"
    # Restricted to its namespace: the release's admission policy binds only there, so
    # the other tests on this plane are not under it meanwhile.
    only_here = (
        f"namespaceRestriction.enabled=true,namespaceRestriction.targetNamespace={namespace}"
    )
    try:
        installed = _helm(
            cp, tmp_path, "install", release, str(CHART), "-n", namespace, "--timeout", "60s",
            "--set", only_here,
        )  # fmt: skip
        assert installed.returncode == 0, f"{installed.stdout}\n{installed.stderr}"
        assert _items(cp, jobs) == [], "the hook Job stayed after it succeeded"
        uninstalled = _helm(cp, tmp_path, "uninstall", release, "-n", namespace)
        assert uninstalled.returncode == 0, uninstalled.stderr
        assert _items(cp, jobs) == []
        deadline = time.monotonic() + 60
        while _items(cp, pods) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _items(cp, pods) == [], "the hook's pod stayed"
    finally:
        cp.delete_namespace(namespace)
        selector = f"labelSelector=app.kubernetes.io/instance%3D{release}"
        for plural in ("clusterroles", "clusterrolebindings"):
            cp.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/{plural}?{selector}")
        for plural in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            cp.request("DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}?{selector}")


def test_the_hook_fails_before_helm_stops_waiting(tmp_path: Path) -> None:
    """With the chart's defaults, the hook Job's deadline passes before Helm's default
    `--timeout`, with a margin for Helm to see the Job fail; the chart's notes say how
    to read such a failure."""
    done = _helm(
        None, tmp_path, "template", "r", str(CHART), "-n", "x",
        "--show-only", "templates/crd-upgrade.yaml",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (job,) = [d for d in yaml.safe_load_all(done.stdout) if d and d["kind"] == "Job"]
    deadline = job["spec"]["activeDeadlineSeconds"]
    assert deadline <= HELM_DEFAULT_TIMEOUT - 60, deadline
    notes = (CHART / "templates" / "NOTES.txt").read_text()
    assert re.search(r"describe job \{\{ \$hook \}\}", notes), "the notes say how to read it"
    assert "DeadlineExceeded" in notes
