"""Playing the kubelet and the Job controller for the chart's CRD upgrade hook.

The control plane of these tests has no nodes (no kubelet, no Job controller). When
Helm has created the hook's Job, the test runs the Job's own command with the Job's own
arguments as the Job's ServiceAccount (a TokenRequest token, what the kubelet mounts),
then marks the Job complete or failed by the command's exit code, which is what Helm
waits for. Everything else is real: Helm's hook ordering and deletion policies, the
hook's RBAC as rendered, the API server's validation of the CRD.

"The image" the Job names is a build of this checkout: the tag of this version runs
this checkout's code; an older chart's tag runs `older_operator`, this checkout's code
built as a wheel of that older version (its CRD then says that version). That is what
any release from now on looks like to the hook's rules.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamo_pool_operator import __version__
from dynamo_pool_operator.api import crd
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from tests.e2e.chart_helpers import CHART, ROOT, helm, helm_binary
from tests.e2e.chart_operator import mint_token

CRD_NAME = f"{crd.PLURAL}.{crd.GROUP}"
CRD_PATH = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"
HOOK = "templates/crd-upgrade.yaml"
#: The annotation naming the operator version that made the CRD, as the docs name it.
VERSION_ANNOTATION = "nvidia.com/dynamo-pool-operator-version"


def older_crd(version: str = "0.0.1") -> dict[str, Any]:
    """Our CRD as an earlier release might have shipped it: a spec property and a
    printer column this version dropped, no `Cluster` column, and made by `version`."""
    old = copy.deepcopy(crd.crd())
    old["metadata"].setdefault("annotations", {})[VERSION_ANNOTATION] = version
    v = old["spec"]["versions"][0]
    v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["legacyMode"] = {
        "type": "string",
        "description": "Dropped since.",
    }
    v["additionalPrinterColumns"] = [
        c for c in v["additionalPrinterColumns"] if c["name"] != "Cluster"
    ] + [{"name": "Legacy", "type": "string", "jsonPath": ".spec.legacyMode"}]
    return old


def stored_crd(cp: ControlPlane) -> dict[str, Any]:
    status, body = cp.request("GET", CRD_PATH)
    assert status == 200, body
    return dict(body)


def is_current(cp: ControlPlane) -> bool:
    """The stored CRD's schema and columns are this version's."""
    want = crd.crd()["spec"]["versions"][0]
    (got,) = stored_crd(cp)["spec"]["versions"]
    return bool(
        got["schema"] == want["schema"]
        and got["additionalPrinterColumns"] == want["additionalPrinterColumns"]
    )


def made_by(cp: ControlPlane) -> str | None:
    annotations = stored_crd(cp)["metadata"].get("annotations") or {}
    return annotations.get(VERSION_ANNOTATION)


@dataclasses.dataclass(frozen=True)
class Operators:
    """Image tag -> the PYTHONPATH that runs that version ("" is this checkout)."""

    paths: dict[str, str]

    def env(self, image: str) -> dict[str, str]:
        tag = image.rpartition(":")[2]
        assert tag in self.paths, f"no build of {image} (have {sorted(self.paths)})"
        return {"PYTHONPATH": self.paths[tag]} if self.paths[tag] else {}


def older_operator(version: str, into: Path) -> str:
    """This checkout built as a wheel of `version`, unpacked into `into`: its PYTHONPATH."""
    src = into / "src-tree"
    src.mkdir()
    for name in ("README.md", "uv.lock"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__"))
    meta = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{__version__}"' in meta
    (src / "pyproject.toml").write_text(
        meta.replace(f'version = "{__version__}"', f'version = "{version}"', 1)
    )
    uv = str(ROOT / "tools" / "uv")

    def run(*cmd: str) -> None:
        done = subprocess.run([uv, *cmd], capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, f"uv {' '.join(cmd[:2])}: {done.stderr}"

    run("build", "--wheel", "--out-dir", str(into / "dist"), str(src))
    (wheel,) = (into / "dist").glob("*.whl")
    run(
        "pip",
        "install",
        "--python",
        sys.executable,
        "--no-deps",
        "--target",
        str(into / "site"),
        str(wheel),
    )
    return str(into / "site")


def hook_docs(release: str, namespace: str, *args: str) -> list[dict[str, Any]]:
    proc = helm("template", release, str(CHART), "-n", namespace, "--show-only", HOOK, *args)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def job_command(
    cp: ControlPlane, job: dict[str, Any], namespace: str, operators: Operators | None = None
) -> subprocess.CompletedProcess[str]:
    """What the kubelet would run for `job`: its container's args, as its ServiceAccount
    (the image's entrypoint is `dynamo-pool-operator`), from the build its image names."""
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    token = mint_token(cp, namespace, pod["serviceAccountName"])
    kubeconfig = cp.token_kubeconfig(token, user=f"{namespace}-crd-upgrade")
    env = operators.env(container["image"]) if operators else {}
    return subprocess.run(
        [sys.executable, "-m", "dynamo_pool_operator.cli", *container["args"]],
        # In the pod it finds its in-cluster credentials; here the same identity's token.
        env={"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def run_job_command(cp: ControlPlane, job: dict[str, Any], namespace: str) -> str:
    """`job_command`, which must succeed; its stdout."""
    proc = job_command(cp, job, namespace)
    assert proc.returncode == 0, f"the hook's command failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def mark_ended(cp: ControlPlane, job: dict[str, Any], succeeded: bool) -> None:
    """The Job controller's part: a Job that succeeded, or failed (its backoff spent)."""
    meta = job["metadata"]
    path = f"/apis/batch/v1/namespaces/{meta['namespace']}/jobs/{meta['name']}/status"
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def conditions(*types: str, reason: str | None = None) -> list[dict[str, str]]:
        extra = {"reason": reason, "message": "the hook's command exited 1"} if reason else {}
        return [
            {"type": t, "status": "True", "lastProbeTime": now, "lastTransitionTime": now} | extra
            for t in types
        ]

    status: dict[str, Any] = {"startTime": now, "active": 0, "ready": 0}
    if succeeded:
        status |= {"completionTime": now, "succeeded": 1}
        status["conditions"] = conditions("SuccessCriteriaMet", "Complete")
    else:
        status["failed"] = 1
        status["conditions"] = conditions("FailureTarget", "Failed", reason="BackoffLimitExceeded")
    code, body = cp.request("PATCH", path, {"status": status}, "application/merge-patch+json")
    assert code == 200, body


def mark_complete(cp: ControlPlane, job: dict[str, Any]) -> None:
    mark_ended(cp, job, succeeded=True)


@dataclasses.dataclass(frozen=True)
class HookedRun:
    """A `helm install`/`upgrade` whose hook Job the test ran."""

    returncode: int
    stdout: str
    stderr: str
    job: dict[str, Any]
    hook: subprocess.CompletedProcess[str]
    #: Revision -> status while the hook ran.
    during: dict[int, str]
    #: Which of the hook's objects existed when the Job ran.
    objects_during: dict[str, bool]


def helm_with_hook(
    cp: ControlPlane, namespace: str, release: str, args: list[str], operators: Operators
) -> HookedRun:
    """`helm ARGS` (install or upgrade), playing the kubelet and the Job controller for
    its hook Job: the Job ends as its command did."""
    with tempfile.TemporaryDirectory(prefix="dpo-helm-") as home:
        proc = subprocess.Popen(
            [str(helm_binary()), *args, "-n", namespace, "--timeout", "3m",
             "--kubeconfig", str(cp.kubeconfig)],
            env={"HOME": home, "HELM_CACHE_HOME": f"{home}/cache",
                 "HELM_CONFIG_HOME": f"{home}/config", "HELM_DATA_HOME": f"{home}/data",
                 "PATH": "/usr/bin:/bin"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            job = wait_for_job(cp, namespace, proc)
            during = releases(cp, namespace, release)
            objects_during = hook_objects_left(cp, namespace, job)
            hook = job_command(cp, job, namespace, operators)
            mark_ended(cp, job, succeeded=hook.returncode == 0)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return HookedRun(proc.returncode, out, err, job, hook, during, objects_during)


def wait_for_job(
    cp: ControlPlane, namespace: str, helm_run: subprocess.Popen[str], timeout: float = 90
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if helm_run.poll() is not None:
            out, err = helm_run.communicate()
            pytest.fail(f"helm ended before its hook Job appeared:\n{out}\n{err}")
        status, body = cp.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs")
        assert status == 200, body
        for job in body["items"]:
            if job["metadata"]["name"].endswith("crd-upgrade") and not job.get("status", {}).get(
                "conditions"
            ):
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


def hook_objects_left(cp: ControlPlane, namespace: str, job: dict[str, Any]) -> dict[str, bool]:
    """Which of the hook's objects still exist."""
    sa = job["spec"]["template"]["spec"]["serviceAccountName"]
    paths = {
        "Job": f"/apis/batch/v1/namespaces/{namespace}/jobs/{job['metadata']['name']}",
        "ServiceAccount": f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}",
        "ClusterRole": f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{sa}.{namespace}",
        "ClusterRoleBinding": (
            f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{sa}.{namespace}"
        ),
    }
    return {kind: cp.request("GET", path)[0] == 200 for kind, path in paths.items()}


def chart_copy(into: Path, version: str, app_version: str, crd_doc: dict[str, Any]) -> Path:
    """This chart as another release of it: its version, image tag and crds/."""
    chart = into / "dynamo-pool-operator"
    shutil.copytree(CHART, chart)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    meta |= {"version": version, "appVersion": app_version}
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta))
    (crd_file,) = (chart / "crds").iterdir()
    crd_file.write_text(yaml.safe_dump(crd_doc))
    return chart
