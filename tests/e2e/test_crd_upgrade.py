"""CRD upgrades through the chart: `helm upgrade` from a chart without the hook, with an
older CRD, to this chart, against a real API server.

Helm installs a chart's crds/ once and never upgrades them; this chart's pre-install /
pre-upgrade hook Job runs `dynamo-pool-operator manifests crds --apply` as a
ServiceAccount of its own. The control plane has no nodes (no kubelet, no Job
controller), so the test plays both for the hook: when Helm has created the Job, it
runs the Job's own command, with the Job's own arguments, as the Job's ServiceAccount
(a TokenRequest token, what the kubelet mounts), then marks the Job complete, which is
what Helm waits for. Everything else is real: Helm's hook ordering and deletion
policies, the hook's RBAC as rendered, the API server's validation of the new CRD.

Not covered here: the image's entrypoint and the pod spec actually running on a node
(that needs the kwok-based world).
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamo_pool_operator.api import crd
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.crds import dgd_crd
from dynamo_pool_operator.runtime import errors
from dynamo_pool_operator.runtime.auth import load_kubeconfig
from dynamo_pool_operator.runtime.client import Client
from dynamo_pool_operator.runtime.resources import CRDS
from tests.e2e.chart_helpers import CHART, helm, helm_binary
from tests.e2e.chart_operator import mint_token

pytestmark = pytest.mark.timeout(240)

CRD_NAME = f"{crd.PLURAL}.{crd.GROUP}"
CRD_PATH = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"
HOOK = "templates/crd-upgrade.yaml"


def older_crd() -> dict[str, Any]:
    """Our CRD as an earlier release might have shipped it: a spec property and a
    printer column this version dropped, and no `Cluster` column."""
    old = copy.deepcopy(crd.crd())
    version = old["spec"]["versions"][0]
    version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["legacyMode"] = {
        "type": "string",
        "description": "Dropped since.",
    }
    version["additionalPrinterColumns"] = [
        c for c in version["additionalPrinterColumns"] if c["name"] != "Cluster"
    ] + [{"name": "Legacy", "type": "string", "jsonPath": ".spec.legacyMode"}]
    return old


def stored_version(cp: ControlPlane) -> dict[str, Any]:
    status, body = cp.request("GET", CRD_PATH)
    assert status == 200, body
    (version,) = body["spec"]["versions"]
    return dict(version)


def is_current(cp: ControlPlane) -> bool:
    want = crd.crd()["spec"]["versions"][0]
    got = stored_version(cp)
    return bool(
        got["schema"] == want["schema"]
        and got["additionalPrinterColumns"] == want["additionalPrinterColumns"]
    )


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    """Dynamo's CRD only: our CRD is what these tests install and upgrade."""
    cp = ControlPlane(crds=[dgd_crd("v1beta1")], garbage_collector=False)
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def release_ns(plane: ControlPlane) -> Iterator[str]:
    ns = f"dpo-{uuid.uuid4().hex[:8]}"
    plane.create_namespace(ns)
    try:
        yield ns
    finally:
        plane.delete_crd(CRD_NAME)  # waits until it is gone: the next test starts bare
        plane.delete_namespace(ns)


def hook_docs(release: str, namespace: str) -> list[dict[str, Any]]:
    proc = helm("template", release, str(CHART), "-n", namespace, "--show-only", HOOK)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def run_job_command(cp: ControlPlane, job: dict[str, Any], namespace: str) -> str:
    """What the kubelet would run for `job`: its container's args, as its ServiceAccount
    (the image's entrypoint is `dynamo-pool-operator`). Returns stdout; fails on exit 1."""
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    token = mint_token(cp, namespace, pod["serviceAccountName"])
    kubeconfig = cp.token_kubeconfig(token, user=f"{namespace}-crd-upgrade")
    proc = subprocess.run(
        [sys.executable, "-m", "dynamo_pool_operator.cli", *container["args"]],
        # In the pod it finds its in-cluster credentials; here the same identity's token.
        env={"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert proc.returncode == 0, f"the hook's command failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def mark_complete(cp: ControlPlane, job: dict[str, Any]) -> None:
    """The Job controller's part: a succeeded Job, as Helm waits for it."""
    meta = job["metadata"]
    path = f"/apis/batch/v1/namespaces/{meta['namespace']}/jobs/{meta['name']}/status"
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "startTime": now,
        "completionTime": now,
        "succeeded": 1,
        "active": 0,
        "ready": 0,
        "conditions": [
            {"type": t, "status": "True", "lastProbeTime": now, "lastTransitionTime": now}
            for t in ("SuccessCriteriaMet", "Complete")
        ],
    }
    code, body = cp.request("PATCH", path, {"status": status}, "application/merge-patch+json")
    assert code == 200, body


def previous_chart(into: Path) -> Path:
    """This chart as released before the hook: no crd-upgrade template, version 0.1.0,
    and the older CRD in crds/."""
    chart = into / "dynamo-pool-operator"
    shutil.copytree(CHART, chart)
    (chart / HOOK).unlink()
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    meta["version"] = "0.1.0"
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta))
    (crd_file,) = (chart / "crds").iterdir()
    crd_file.write_text(yaml.safe_dump(older_crd()))
    return chart


# ====================================================================== the hook's command
def test_the_hook_command_upgrades_the_crd_as_the_hooks_service_account(
    plane: ControlPlane, release_ns: str
) -> None:
    cp = plane
    cp.install_crd(older_crd())
    assert not is_current(cp)
    docs = hook_docs("dpo", release_ns)
    for doc in docs:
        if doc["kind"] != "Job":
            cp.apply(doc)
    (job,) = [d for d in docs if d["kind"] == "Job"]

    out = run_job_command(cp, job, release_ns)
    assert f"{CRD_NAME} configured" in out, out
    assert f"{CRD_NAME} established" in out, out
    assert is_current(cp), "the stored CRD is not this version's"
    props = stored_version(cp)["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert "legacyMode" not in props, "a dropped field survived the upgrade"

    # Again: nothing to change, nothing written.
    assert f"{CRD_NAME} unchanged" in run_job_command(cp, job, release_ns)

    # The hook's identity may write this CRD and no other.
    token = mint_token(cp, release_ns, job["spec"]["template"]["spec"]["serviceAccountName"])
    refused = asyncio.run(refused_as(cp.token_kubeconfig(token, user=f"{release_ns}-probe")))
    assert refused == [True] * 4, refused


async def refused_as(kubeconfig: Path) -> list[bool]:
    """Whether each write or read the hook must not make is refused (403)."""
    other = "dynamographdeployments.nvidia.com"
    async with Client(load_kubeconfig(kubeconfig), user_agent="dpo-hook-probe") as sa:
        calls = [
            sa.get(CRDS, other),
            sa.replace(CRDS, {**dgd_crd("v1beta1"), "metadata": {"name": other}}),
            sa.delete(CRDS, CRD_NAME),
            sa.list(CRDS),
        ]
        out = []
        for call in calls:
            try:
                await call
            except errors.Forbidden:
                out.append(True)
            else:
                out.append(False)
        return out


def test_the_hook_command_creates_a_missing_crd(plane: ControlPlane, release_ns: str) -> None:
    """`helm install --skip-crds`, or a CRD someone deleted: the hook creates it."""
    cp = plane
    assert cp.request("GET", CRD_PATH)[0] == 404
    docs = hook_docs("dpo", release_ns)
    for doc in docs:
        if doc["kind"] != "Job":
            cp.apply(doc)
    (job,) = [d for d in docs if d["kind"] == "Job"]
    out = run_job_command(cp, job, release_ns)
    assert f"{CRD_NAME} created" in out, out
    assert is_current(cp)


# ====================================================================== helm upgrade
def helm_env_args(cp: ControlPlane) -> list[str]:
    return ["--kubeconfig", str(cp.kubeconfig)]


def test_helm_upgrade_from_the_previous_chart_upgrades_the_changed_crd(
    plane: ControlPlane, release_ns: str
) -> None:
    cp = plane
    name = "dpo"
    with tempfile.TemporaryDirectory(prefix="dpo-prev-chart-") as tmp:
        prev = previous_chart(Path(tmp))
        proc = helm("install", name, str(prev), "-n", release_ns, *helm_env_args(cp))
        assert proc.returncode == 0, proc.stderr
    assert not is_current(cp), "the previous chart should have installed the older CRD"

    # Without hooks, `helm upgrade` leaves the old CRD: the problem the hook solves.
    proc = helm("upgrade", name, str(CHART), "-n", release_ns, "--no-hooks", *helm_env_args(cp))
    assert proc.returncode == 0, proc.stderr
    assert not is_current(cp), "helm upgraded crds/ by itself: the hook would be moot"

    # With hooks: Helm creates the hook's ServiceAccount and RBAC, then the Job, and
    # waits for it; the test runs the Job and completes it.
    with tempfile.TemporaryDirectory(prefix="dpo-helm-") as home:
        upgrade = subprocess.Popen(
            [str(helm_binary()), "upgrade", name, str(CHART), "-n", release_ns,
             "--timeout", "3m", *helm_env_args(cp)],
            env={"HOME": home, "HELM_CACHE_HOME": f"{home}/cache",
                 "HELM_CONFIG_HOME": f"{home}/config", "HELM_DATA_HOME": f"{home}/data",
                 "PATH": "/usr/bin:/bin"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            job = wait_for_job(cp, release_ns, upgrade)
            # Hook ordering: the Job comes after the objects it runs as (weight -10).
            sa = job["spec"]["template"]["spec"]["serviceAccountName"]
            sa_path = f"/api/v1/namespaces/{release_ns}/serviceaccounts/{sa}"
            assert cp.request("GET", sa_path)[0] == 200
            # Pre-upgrade: revision 3 is pending while the hook runs.
            pending = {1: "superseded", 2: "deployed", 3: "pending-upgrade"}
            assert releases(cp, release_ns, name) == pending
            run_job_command(cp, job, release_ns)
            mark_complete(cp, job)
            out, err = upgrade.communicate(timeout=120)
        finally:
            if upgrade.poll() is None:
                upgrade.kill()
                upgrade.communicate()
    assert upgrade.returncode == 0, f"helm upgrade failed:\n{out}\n{err}"
    assert is_current(cp), "the CRD was not upgraded by the hook"
    assert releases(cp, release_ns, name)[3] == "deployed"
    # hook-succeeded: the hook's objects are gone, cluster-scoped ones too.
    for path in (
        f"/apis/batch/v1/namespaces/{release_ns}/jobs/{job['metadata']['name']}",
        f"/api/v1/namespaces/{release_ns}/serviceaccounts/{sa}",
        f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{sa}.{release_ns}",
        f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{sa}.{release_ns}",
    ):
        assert cp.request("GET", path)[0] == 404, f"{path} survived the hook"
    helm("uninstall", name, "-n", release_ns, "--no-hooks", *helm_env_args(cp))


def test_crds_upgrade_false_renders_no_hook() -> None:
    proc = helm("template", "x", str(CHART), "--set", "crds.upgrade=false")
    assert proc.returncode == 0, proc.stderr
    assert "crd-upgrade" not in proc.stdout


def wait_for_job(
    cp: ControlPlane, namespace: str, upgrade: subprocess.Popen[str], timeout: float = 90
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if upgrade.poll() is not None:
            out, err = upgrade.communicate()
            pytest.fail(f"helm upgrade ended before its hook Job appeared:\n{out}\n{err}")
        status, body = cp.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs")
        assert status == 200, body
        for job in body["items"]:
            if job["metadata"]["name"].endswith("crd-upgrade"):
                return dict(job)
        time.sleep(0.2)
    pytest.fail("helm created no crd-upgrade Job")


def releases(cp: ControlPlane, namespace: str, name: str) -> dict[int, str]:
    """Revision -> status, as Helm records them (its release Secrets)."""
    status, body = cp.request(
        "GET", f"/api/v1/namespaces/{namespace}/secrets?labelSelector=owner%3Dhelm,name%3D{name}"
    )
    assert status == 200, body
    return {
        int(s["metadata"]["labels"]["version"]): s["metadata"]["labels"]["status"]
        for s in body["items"]
    }
