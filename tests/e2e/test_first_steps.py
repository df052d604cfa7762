"""The README's first hour, on `make dev`'s cluster, as the README writes it.

`make dev`'s cluster is started as the CLI starts it (`dev.run` with the default
configuration) and keeps running while a user's shell works against it: bash, in the
checkout, with `helm`, `kubectl` and `dynamo-pool-operator` on PATH and the KUBECONFIG
that dev printed exported. What runs is read from the README and from what dev printed,
so a README that drifts from what works fails here:

- the README's "First steps" block: the chart's install, its CRD hook Job included (the
  Job controller makes its pod, kwok completes it; without them `helm install` waited
  out its 5 minutes), then `check` of the release and `status`;
- every line dev printed under "Look at it" (its `status`, a `check` that is green);
- the README's "Uninstall" block: the relays' objects go with them (owner references,
  the real garbage collector), the release leaves nothing behind, its hook Job neither,
  and Helm keeps the CRD, as the README says.

The chart's hook alone, on the plane with nodes the other e2e tests share, and its
deadline against Helm's timeout are tested in test_chart_hook.py, in less time.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from dynamo_pool_operator import dev
from dynamo_pool_operator.api import crd, names
from dynamo_pool_operator.localcluster.assets import resolve
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from tests.e2e.chart_helpers import ROOT
from tests.e2e.user_shell import Shell, printed_lines, running_dev

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

README = ROOT / "README.md"
RELEASE_NAMESPACE = "dynamo-pool-operator"
HOOK_JOB = "dynamo-pool-operator-crd-upgrade"
HOOK_LABEL = "app.kubernetes.io/component=crd-upgrade"


def readme_block(heading: str, text: str | None = None) -> list[str]:
    """The commands of the first ```bash block under the README's `heading` line, each
    with its continuation lines joined."""
    lines = (text if text is not None else README.read_text()).splitlines()
    at = lines.index(heading)
    start = next(i for i in range(at + 1, len(lines)) if lines[i].startswith("```bash"))
    end = lines.index("```", start + 1)
    return joined(lines[start + 1 : end])


def joined(lines: list[str]) -> list[str]:
    """Shell lines with a trailing backslash joined to the next, blank lines dropped."""
    out: list[str] = []
    pending = ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1].rstrip() + " "
            continue
        command = (pending + line.strip()).strip()
        pending = ""
        if command:
            out.append(command)
    return out


async def _until(probe: Callable[[], Awaitable[bool]], what: str, timeout: float = 60) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await probe():
            return
        await asyncio.sleep(0.5)
    pytest.fail(f"{what}: not within {timeout:.0f}s")


def _items(cp: ControlPlane, path: str) -> list[dict[str, Any]]:
    status, body = cp.request("GET", path)
    assert status == 200, body
    return list(body["items"])


async def test_the_readme_first_steps_run_on_the_dev_cluster(
    started: list[ControlPlane], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if why := resolve().missing_peers("kwok"):
        pytest.skip(why)
    first_steps = readme_block("### First steps")
    uninstall = readme_block("### Uninstall")
    assert any(c.startswith("helm install ") for c in first_steps), first_steps
    kubeconfig = tmp_path / "dev" / "kubeconfig"
    async with running_dev(capsys, kubeconfig) as report:
        (cp,) = started
        export, dev_commands = printed_lines(report)
        assert export == f"export KUBECONFIG={shlex.quote(str(kubeconfig))}", export
        shell = Shell(tmp_path / "home", export)
        audit_from = cp.audit.offset()

        # The README's first steps, as written.
        for command in first_steps:
            ran = await shell.run(command)
            assert ran.code == 0, str(ran)
            if command.startswith("dynamo-pool-operator check"):
                assert "✘" not in ran.out, str(ran)
            if command.startswith("helm install "):
                notes = ran.out[ran.out.index("NOTES:") :]
                # The chart's notes say how to check the release, with paths that exist.
                assert "dynamo-pool-operator check --configmap " in notes, notes
                for path in re.findall(r"\bdocs/[\w./-]+\.md\b", notes):
                    assert (ROOT / path).is_file(), path
        # The hook ran: Helm made its Job, the Job controller its pod; the Job went once
        # it succeeded (hook-succeeded), and its pod with it.
        writes = cp.audit.writes(audit_from)
        made = {(e.verb, e.resource, e.name) for e in writes if e.namespace == RELEASE_NAMESPACE}
        assert ("create", "jobs", HOOK_JOB) in made, sorted(made)
        assert ("delete", "jobs", HOOK_JOB) in made, sorted(made)
        pods_made = [
            e.user_agent
            for e in writes
            if (e.verb, e.resource, e.namespace) == ("create", "pods", RELEASE_NAMESPACE)
        ]
        assert any(a.endswith("job-controller") for a in pods_made), pods_made
        jobs = f"/apis/batch/v1/namespaces/{RELEASE_NAMESPACE}/jobs"
        assert _items(cp, jobs) == [], "the hook Job stayed after a successful install"

        # dev's own lines, as printed: its `status`, a green `check`, kubectl's.
        assert any(" check " in c for c in dev_commands), dev_commands
        for command in dev_commands:
            ran = await shell.run(command)
            assert ran.code == 0, str(ran)
            if " check " in command:
                assert "✘" not in ran.out, str(ran)
                assert f"ConfigMap {dev.OPERATOR_NAMESPACE}/{dev.CONFIGMAP}" in ran.out, str(ran)

        # The README's uninstall, as written.
        ns = dev.NAMESPACE
        relay_deployment = f"/apis/apps/v1/namespaces/{ns}/deployments/{names.relay_name(dev.POOL)}"
        exports = f"/apis/multicluster.x-k8s.io/v1beta1/namespaces/{ns}/serviceexports"
        assert cp.request("GET", relay_deployment)[0] == 200
        assert _items(cp, exports), "the pool is exported before the uninstall"
        for command in uninstall:
            ran = await shell.run(command)
            assert ran.code == 0, str(ran)
        left = [
            exports,
            f"/api/v1/namespaces/{RELEASE_NAMESPACE}/pods?labelSelector={HOOK_LABEL}",
            f"/api/v1/namespaces/{RELEASE_NAMESPACE}/secrets?labelSelector=owner%3Dhelm",
            jobs,
        ]

        async def all_gone() -> bool:
            gone = cp.request("GET", relay_deployment)[0] == 404
            return gone and all(not _items(cp, path) for path in left)

        await _until(all_gone, "the relay's objects, the hook's pod and the release gone")
        crd_path = (
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd.PLURAL}.{crd.GROUP}"
        )
        assert cp.request("GET", crd_path)[0] == 200, "Helm keeps the CRD, as the README says"
