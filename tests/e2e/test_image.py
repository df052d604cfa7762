"""The operator image: built from the repository's Dockerfile, then run as the chart runs it.

buildah builds the image with no daemon, on stand-ins for its two bases passed as build
arguments (image_build.py says why and how; the Dockerfile's defaults stay the real
bases). The chart's Deployment then runs from it as a pod would (image_pod.py): the
image's entrypoint with the Deployment's args, as the pod's user (65532), the rendered
ConfigMap mounted, a read-only root with a tmpfs /tmp, and a token of the chart's
ServiceAccount at the in-cluster path, against the test control plane. It must answer
its readiness probe, publish a pool, export it, and stop cleanly on SIGTERM. The CRD
upgrade hook's container runs from it too.

Needs buildah, mmdebstrap and root: skipped, saying why, where they are missing; under
CI=true (where .ci/run installs them) their absence fails the tests instead.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamo_pool_operator import __version__
from dynamo_pool_operator.api import crd
from dynamo_pool_operator.localcluster.controlplane import ControlPlane, free_port
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import LEASES
from tests.e2e import image_build
from tests.e2e.chart_helpers import one, template
from tests.e2e.chart_operator import (
    FRONTEND_SVC,
    RELAY_SVC,
    SERVICEEXPORTS,
    cluster_id,
    exported_status,
    install_as_service_account,
    mint_token,
    new_release,
    publish_pool,
)
from tests.e2e.image_pod import ApiServer, Container

# The first test also builds the bases when they are not cached (mmdebstrap: 1-2 min).
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def built() -> Iterator[tuple[image_build.Buildah, str]]:
    """The image built from the Dockerfile; removed afterwards."""
    if why := image_build.missing():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must build the image: {why}")
        pytest.skip(why)
    b = image_build.Buildah(image_build.cache_root())
    bases = {"PYTHON_IMAGE": image_build.python_standin(b), "UV_IMAGE": image_build.uv_standin(b)}
    tag = f"localhost/dynamo-pool-operator:test-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="dpo-image-") as tmp:
        log = Path(tmp) / "build.log"
        proc = b.build(image_build.ROOT, tag, bases, log)
        if proc.returncode != 0:
            b.remove_image(tag)
            tail = "\n".join(log.read_text().splitlines()[-25:])
            pytest.fail(f"the image does not build (buildah exit {proc.returncode}):\n{tail}")
    try:
        yield b, tag
    finally:
        b.remove_image(tag)


def plain_pod(args: list[str]) -> dict[str, Any]:
    """A pod spec of one container running the image with `args`, as the chart's pods
    run (65532, read-only root), with no volumes and no service account."""
    return {
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532},
        "containers": [
            {"name": "c", "args": args, "securityContext": {"readOnlyRootFilesystem": True}}
        ],
    }


def test_the_image_is_the_operator_from_the_dockerfile_and_nothing_more(
    built: tuple[image_build.Buildah, str], tmp_path: Path
) -> None:
    b, tag = built
    # The stand-ins came in as build arguments: the defaults are the real bases (pinned
    # by digest or not: tests/unit/repository/test_base_images.py checks the pin).
    defaults = image_build.dockerfile_defaults()
    assert defaults["PYTHON_IMAGE"].partition("@")[0] == "python:3.11-slim"
    assert defaults["UV_IMAGE"].startswith("ghcr.io/astral-sh/uv:")

    config = b.image_config(tag)
    assert config["Entrypoint"] == ["dynamo-pool-operator"]
    assert config["Cmd"] == ["run"]
    assert config["User"] == "65532:65532"
    assert sorted(config["ExposedPorts"]) == ["8080/tcp", "8081/tcp"]
    with b.mounted(tag) as rootfs:
        (site,) = rootfs.glob("opt/venv/lib/python3.*/site-packages")
        package = site / "dynamo_pool_operator"
        assert (package / "process.py").is_file()
        assert not (package / "localcluster").exists(), "the local control plane is in the image"
        assert (site / f"dynamo_pool_operator-{__version__}.dist-info").is_dir()
        # Compiled at build time: the pod's root filesystem is read-only.
        assert list((package / "__pycache__").glob("process.cpython-3*.pyc"))
        # The image runs the sources, as the tests do (decision 0014): no extension module.
        assert not list(package.rglob("*.so")), "a compiled module is in the image"
        for absent in ("usr/local/bin/uv", "src", "tmp/dist", "tmp/requirements.txt"):
            assert not (rootfs / absent).exists(), f"/{absent} is in the runtime image"

        ctr = Container(
            rootfs, config, plain_pod(["manifests", "crds"]), "manifests", "default", {},
            ApiServer(0, b"", ""), tmp_path,
        )  # fmt: skip
        done = ctr.run()
        assert done.returncode == 0, done.stderr
        assert yaml.safe_load(done.stdout) == crd.crd()

        whoami = Container(
            rootfs, {**config, "Entrypoint": ["sh", "-c"]},
            plain_pod(["id -u; id -g; touch /written 2>/dev/null || echo read-only"]),
            "whoami", "default", {}, ApiServer(0, b"", ""), tmp_path,
        )  # fmt: skip
        done = whoami.run()
        assert done.stdout.split() == ["65532", "65532", "read-only"], done


async def until(
    probe: Callable[[], Awaitable[Any]], what: str, proc: subprocess.Popen[bytes], log: Path,
    timeout: float = 90,
) -> Any:  # fmt: skip
    """Poll `probe` until truthy; fail at once, with the operator's log, if it exits."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the operator exited with {proc.returncode} before {what}:\n{tail(log)}")
        try:
            last = await probe()
        except Exception as e:
            last = e
        if last and not isinstance(last, Exception):
            return last
        await asyncio.sleep(0.2)
    pytest.fail(f"{what}: not within {timeout}s; last {last!r}\n{tail(log)}")


def tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_the_chart_deployment_runs_from_the_image_and_exports_a_pool(
    built: tuple[image_build.Buildah, str],
    control_plane: ControlPlane,
    namespace: str,
    tmp_path: Path,
) -> None:
    b, tag = built
    cp = control_plane
    health = free_port()
    values = {
        "multiCluster": {"mcsImplementation": "mcs"},
        # The pod shares the host's network here: ports of its own, not :8080/:8081.
        "metrics": {"port": free_port()},
        "health": {"port": health},
    }
    with new_release(cp, "image") as rel, cluster_id(cp) as cluster, b.mounted(tag) as rootfs:
        installed = install_as_service_account(cp, rel, values)
        deployment = one(installed.docs, "Deployment")
        pod = deployment["spec"]["template"]["spec"]
        configmap = one(installed.docs, "ConfigMap")
        token = mint_token(cp, rel.namespace, pod["serviceAccountName"])
        ctr = Container(
            rootfs, b.image_config(tag), pod, f"{deployment['metadata']['name']}-0", rel.namespace,
            {configmap["metadata"]["name"]: configmap["data"]},
            ApiServer(cp.port, cp.serving_ca_pem, token), tmp_path,
        )  # fmt: skip
        assert ctr.user() == (65532, 65532)
        assert ctr.command()[:2] == ["dynamo-pool-operator", "run"]
        log = tmp_path / "operator.log"
        proc = ctr.start(log)
        try:
            asyncio.run(
                publish_and_export(cp, namespace, cluster, health, proc, log, rel.namespace)
            )
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=pod["terminationGracePeriodSeconds"] + 5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                code = None
    assert code == 0, f"the operator did not stop cleanly on SIGTERM ({code}):\n{tail(log)}"
    assert '"level": "error"' not in log.read_text(), tail(log)


async def publish_and_export(
    cp: ControlPlane, namespace: str, cluster: str, health: int,
    proc: subprocess.Popen[bytes], log: Path, lease_namespace: str,
) -> None:  # fmt: skip
    async with Client(load_kubeconfig(cp.kubeconfig), user_agent="dpo-image-e2e") as admin:
        # The kubelet's readiness probe (the chart's: GET /readyz on the health port).
        readyz = f"http://127.0.0.1:{health}/readyz"
        await until(
            lambda: asyncio.to_thread(lambda: http_status(readyz) == 200),
            "/readyz answering 200", proc, log,
        )  # fmt: skip
        await publish_pool(admin, namespace, cluster)
        status = await until(
            lambda: exported_status(admin, namespace), "the pool published and exported", proc, log
        )
        assert status["clusterId"] == cluster
        exports = {
            e["metadata"]["name"] for e in (await admin.list(SERVICEEXPORTS, namespace)).items
        }
        assert exports == {RELAY_SVC, FRONTEND_SVC}
        leases = (await admin.list(LEASES, lease_namespace)).items
        assert [
            lease["spec"].get("holderIdentity")
            for lease in leases
            if lease["spec"].get("holderIdentity")
        ]


def test_the_crd_upgrade_hook_runs_from_the_image(
    built: tuple[image_build.Buildah, str], control_plane: ControlPlane, tmp_path: Path
) -> None:
    """The hook Job's container, from the image, as the hook's ServiceAccount: the CRD
    the session installed is this version's, so the hook finds nothing to change."""
    b, tag = built
    cp = control_plane
    with new_release(cp, "hook") as rel, b.mounted(tag) as rootfs:
        docs = template(release=rel.name, namespace=rel.namespace)
        hook = [d for d in docs if d["metadata"].get("annotations", {}).get("helm.sh/hook")]
        for doc in hook:
            if doc["kind"] != "Job":
                cp.apply(doc)
        job = one(hook, "Job")
        pod = job["spec"]["template"]["spec"]
        token = mint_token(cp, rel.namespace, pod["serviceAccountName"])
        ctr = Container(
            rootfs, b.image_config(tag), pod, f"{job['metadata']['name']}-x", rel.namespace, {},
            ApiServer(cp.port, cp.serving_ca_pem, token), tmp_path,
        )  # fmt: skip
        done = ctr.run()
    name = f"{crd.PLURAL}.{crd.GROUP}"
    assert done.returncode == 0, done.stderr
    assert f"customresourcedefinition.apiextensions.k8s.io/{name} established" in done.stdout
