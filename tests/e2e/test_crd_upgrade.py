"""Upgrades through the chart, against a real API server: `helm upgrade` from a chart
without the hook to this chart upgrades the CRD; to an older chart it is refused unless
asked; a CRD that would strand objects at a stored version is never applied; the hook's
identity is gone after it ran, succeeded or failed; `--skip-crds` with the documented
value installs no CRD; the upgrade's NOTES warn that ClusterIP relay Services go.

The test plays the kubelet and the Job controller for the hook (crd_hook.py says how).
The image's entrypoint running the hook's container is tests/e2e/test_image.py's.
"""

from __future__ import annotations

import asyncio
import copy
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dynamo_pool_operator import __version__
from dynamo_pool_operator.api import crd
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.crds import dgd_crd
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import CRDS
from tests.e2e.chart_helpers import CHART, helm
from tests.e2e.chart_operator import mint_token
from tests.e2e.crd_hook import (
    CRD_NAME,
    CRD_PATH,
    HOOK,
    VERSION_ANNOTATION,
    Operators,
    chart_copy,
    helm_with_hook,
    hook_docs,
    hook_objects_left,
    is_current,
    job_command,
    made_by,
    older_crd,
    older_operator,
    releases,
    run_job_command,
    stored_crd,
)

pytestmark = pytest.mark.timeout(240)


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


def previous_chart(into: Path) -> Path:
    """This chart as released before the hook: no crd-upgrade template, version 0.1.0,
    and the older CRD (with no version annotation: made before it existed) in crds/."""
    old = older_crd()
    del old["metadata"]["annotations"][VERSION_ANNOTATION]
    chart = chart_copy(into, "0.1.0", __version__, old)
    (chart / HOOK).unlink()
    return chart


# ====================================================================== the hook's command
def hook_job(cp: ControlPlane, release_ns: str) -> dict[str, Any]:
    """The hook's objects applied but its Job, which is returned (its command is run
    here, not by a kubelet)."""
    docs = hook_docs("dpo", release_ns)
    for doc in docs:
        if doc["kind"] != "Job":
            cp.apply(doc)
    (job,) = [d for d in docs if d["kind"] == "Job"]
    return job


def test_the_hook_command_upgrades_the_crd_as_the_hooks_service_account(
    plane: ControlPlane, release_ns: str
) -> None:
    cp = plane
    cp.install_crd(older_crd())
    assert not is_current(cp)
    job = hook_job(cp, release_ns)
    out = run_job_command(cp, job, release_ns)
    assert f"{CRD_NAME} configured" in out, out
    assert f"{CRD_NAME} established" in out, out
    assert is_current(cp), "the stored CRD is not this version's"
    props = stored_crd(cp)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"
    ]["properties"]
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
    job = hook_job(cp, release_ns)
    out = run_job_command(cp, job, release_ns)
    assert f"{CRD_NAME} created" in out, out
    assert is_current(cp)


# ====================================================================== helm upgrade
OLDER = "0.0.9"


@pytest.fixture(scope="module")
def operators() -> Iterator[Operators]:
    """This checkout at its own version, and built as the older OLDER."""
    with tempfile.TemporaryDirectory(prefix="dpo-older-operator-") as tmp:
        yield Operators({__version__: "", OLDER: older_operator(OLDER, Path(tmp))})


def helm_env_args(cp: ControlPlane) -> list[str]:
    return ["--kubeconfig", str(cp.kubeconfig)]


def test_helm_upgrade_from_the_previous_chart_upgrades_the_changed_crd(
    plane: ControlPlane, release_ns: str, operators: Operators
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
    run = helm_with_hook(cp, release_ns, name, ["upgrade", name, str(CHART)], operators)
    assert run.returncode == 0, f"helm upgrade failed:\n{run.stdout}\n{run.stderr}"
    assert run.hook.returncode == 0, run.hook.stderr
    # Hook ordering: the Job comes after the objects it runs as (weight -10).
    assert run.objects_during == dict.fromkeys(
        ("Job", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"), True
    )
    # Pre-upgrade: revision 3 is pending while the hook runs.
    assert run.during == {1: "superseded", 2: "deployed", 3: "pending-upgrade"}
    assert is_current(cp), "the CRD was not upgraded by the hook"
    assert made_by(cp) == __version__
    assert releases(cp, release_ns, name)[3] == "deployed"
    # hook-succeeded: the hook's objects are gone, cluster-scoped ones too.
    assert not any(hook_objects_left(cp, release_ns, run.job).values())
    helm("uninstall", name, "-n", release_ns, "--no-hooks", *helm_env_args(cp))


def test_helm_upgrade_to_an_older_chart_keeps_the_newer_crd_unless_asked(
    plane: ControlPlane, release_ns: str, operators: Operators
) -> None:
    """The hook of an older chart refuses to replace this version's CRD: the upgrade
    fails before anything else of the release changes, the hook's identity is gone, the
    failed Job stays for its logs. `crds.allowDowngrade=true` applies it."""
    cp = plane
    name = "dpo"
    run = helm_with_hook(cp, release_ns, name, ["install", name, str(CHART)], operators)
    assert run.returncode == 0, f"helm install failed:\n{run.stdout}\n{run.stderr}"
    assert made_by(cp) == __version__
    before = stored_crd(cp)["metadata"]["resourceVersion"]

    with tempfile.TemporaryDirectory(prefix="dpo-older-chart-") as tmp:
        older = chart_copy(Path(tmp), "0.1.9", OLDER, older_crd(OLDER))
        run = helm_with_hook(cp, release_ns, name, ["upgrade", name, str(older)], operators)
        assert run.returncode != 0, "helm upgrade to an older chart downgraded the CRD"
        assert "BackoffLimitExceeded" in run.stderr, run.stderr
        assert run.hook.returncode == 1
        # What `kubectl logs job/dpo-...-crd-upgrade` shows.
        assert (
            f"error: the installed {CRD_NAME} is from dynamo-pool-operator {__version__}, "
            f"newer than this binary ({OLDER})"
        ) in run.hook.stderr, run.hook.stderr
        assert "crds.allowDowngrade=true" in run.hook.stderr
        assert stored_crd(cp)["metadata"]["resourceVersion"] == before, "the CRD was written"
        assert releases(cp, release_ns, name) == {1: "deployed", 2: "failed"}
        left = hook_objects_left(cp, release_ns, run.job)
        assert left == {
            "Job": True, "ServiceAccount": False, "ClusterRole": False, "ClusterRoleBinding": False
        }, left  # fmt: skip

        # Asked for: the older CRD is applied (the next attempt replaces the failed Job).
        args = ["upgrade", name, str(older), "--set", "crds.allowDowngrade=true"]
        run = helm_with_hook(cp, release_ns, name, args, operators)
    assert run.returncode == 0, f"helm upgrade failed:\n{run.stdout}\n{run.stderr}"
    assert "--allow-downgrade" in run.job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert made_by(cp) == OLDER
    assert not any(hook_objects_left(cp, release_ns, run.job).values())
    helm("uninstall", name, "-n", release_ns, "--no-hooks", *helm_env_args(cp))


def with_stored_version(base: dict[str, Any], extra: str, made: str) -> dict[str, Any]:
    """`base` serving `extra` as well, stored at `extra`, made by operator `made`."""
    newer = copy.deepcopy(base)
    newer["metadata"].setdefault("annotations", {})[VERSION_ANNOTATION] = made
    (version,) = newer["spec"]["versions"]
    version["storage"] = False
    newer["spec"]["versions"].append({**copy.deepcopy(version), "name": extra, "storage": True})
    return newer


@pytest.mark.parametrize("allow_downgrade", [False, True], ids=["plain", "allow-downgrade"])
def test_a_crd_that_would_strand_stored_objects_is_never_applied(
    plane: ControlPlane, release_ns: str, allow_downgrade: bool
) -> None:
    """A newer operator's CRD stores relays at v1beta1: this binary's CRD, which serves
    v1alpha1 only, would leave them unreadable. The hook says so and what to do, before
    any write; --allow-downgrade does not lift it."""
    cp = plane
    cp.install_crd(crd.crd())
    cp.install_crd(with_stored_version(crd.crd(), "v1beta1", "9.0.0"))
    relay = {
        "apiVersion": f"{crd.GROUP}/v1beta1",
        "kind": crd.KIND,
        "metadata": {"name": "llama", "namespace": release_ns},
        "spec": {"clusterId": "east"},
    }
    cp.apply(relay)
    stored = stored_crd(cp)
    assert stored["status"]["storedVersions"] == [crd.VERSION, "v1beta1"]

    args = ["--set", "crds.allowDowngrade=true"] if allow_downgrade else []
    docs = hook_docs("dpo", release_ns, *args)
    for doc in docs:
        if doc["kind"] != "Job":
            cp.apply(doc)
    (job,) = [d for d in docs if d["kind"] == "Job"]
    proc = job_command(cp, job, release_ns)
    assert proc.returncode == 1, proc.stdout
    assert (
        f"error: objects of {CRD_NAME} are stored at v1beta1 (status.storedVersions), which "
        f"the CRD of dynamo-pool-operator {__version__} does not serve"
    ) in proc.stderr, proc.stderr
    assert "remove v1beta1 from the CRD's status.storedVersions first" in proc.stderr
    assert stored_crd(cp)["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    path = f"/apis/{crd.GROUP}/v1beta1/namespaces/{release_ns}/{crd.PLURAL}/llama"
    assert cp.request("GET", path)[0] == 200


def test_crds_upgrade_false_renders_no_hook() -> None:
    proc = helm("template", "x", str(CHART), "--set", "crds.upgrade=false")
    assert proc.returncode == 0, proc.stderr
    assert "crd-upgrade" not in proc.stdout


def test_helm_install_with_the_documented_skip_crds_flags_installs_no_crd(
    plane: ControlPlane, release_ns: str
) -> None:
    """docs/operations.md names the value that goes with `helm install --skip-crds`: the
    hook would create the CRD otherwise. That command, for real, leaves the CRD absent."""
    doc = (CHART.parents[2] / "docs" / "operations.md").read_text()
    (line,) = [
        ln.strip()
        for ln in doc.splitlines()
        if ln.strip().startswith("helm install") and "--skip-crds" in ln
    ]
    args = line.split()[2:]  # after `helm install`
    assert "--set" in args, line
    flags = [a for a in args if a.startswith("crds.")]
    assert flags, f"the documented --skip-crds command sets no crds.* value: {line}"
    assert cp_request_absent(plane)
    set_args = [x for f in flags for x in ("--set", f)]
    proc = helm(
        "install", "dpo", str(CHART), "-n", release_ns, "--skip-crds", *set_args,
        "--timeout", "60s", *helm_env_args(plane),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert cp_request_absent(plane), "the CRD was installed despite --skip-crds"
    helm("uninstall", "dpo", "-n", release_ns, "--no-hooks", *helm_env_args(plane))


def cp_request_absent(cp: ControlPlane) -> bool:
    return cp.request("GET", CRD_PATH)[0] == 404


def test_upgrade_notes_say_clusterip_relay_services_will_be_replaced(
    plane: ControlPlane, release_ns: str
) -> None:
    """The headless default is an upgrade event for a release whose relay Services are
    ClusterIP: `helm upgrade`'s NOTES say so and how to avoid it, unless the upgrade
    keeps ClusterIP; the section they point to exists."""
    cp = plane
    name = "dpo"
    with tempfile.TemporaryDirectory(prefix="dpo-prev-chart-") as tmp:
        proc = helm("install", name, str(previous_chart(Path(tmp))), "-n", release_ns,
                    "--no-hooks", *helm_env_args(cp))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "replaces every relay Service" not in proc.stdout, "an install replaces nothing"

    upgrade = ["upgrade", name, str(CHART), "-n", release_ns, "--no-hooks", *helm_env_args(cp)]
    proc = helm(*upgrade)
    assert proc.returncode == 0, proc.stderr
    notes = " ".join(proc.stdout.split())
    assert "the operator replaces every relay Service" in notes, proc.stdout
    assert "cannot be imported for that pause plus the MCS implementation's delay" in notes
    assert "upgrade with --set poolRelay.headless=false" in notes
    assert 'see docs/operations.md ("Upgrading from 0.1")' in notes
    doc = (CHART.parents[2] / "docs" / "operations.md").read_text()
    assert "\n### Upgrading from 0.1: relay Services become headless\n" in doc

    proc = helm(*upgrade, "--set", "poolRelay.headless=false")
    assert proc.returncode == 0, proc.stderr
    assert "replaces every relay Service" not in proc.stdout
    helm("uninstall", name, "-n", release_ns, "--no-hooks", *helm_env_args(cp))
