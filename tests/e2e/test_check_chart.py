"""`dynamo-pool-operator check` as the README tells a platform engineer to run it after
`helm install`: the configuration from the chart's ConfigMap, RBAC asked as the chart's
ServiceAccount, against the operator running as that ServiceAccount."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from dynamo_pool_operator import check
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client.rest import Client
from tests.e2e.chart_helpers import one, restricted_values
from tests.e2e.chart_operator import (
    Release,
    exporting,
    install_as_service_account,
    new_release,
    relay_ready,
)


@pytest.fixture
def control_plane(node_plane: ControlPlane) -> ControlPlane:
    """The plane with a (kwok) Node: a check that passes needs relays that are Ready, and
    a relay is Ready only when its pods run (`RelayAvailable`)."""
    return node_plane


@pytest.fixture
def release(control_plane: ControlPlane) -> Iterator[Release]:
    with new_release(control_plane, "check") as rel:
        yield rel


async def test_check_of_a_chart_install_passes_with_the_readme_command(
    control_plane: ControlPlane, client: Client, namespace: str, release: Release
) -> None:
    cp = control_plane
    # Restricted to the test's namespace, so relays of other tests (in namespaces being
    # deleted) are not this check's business.
    # No MCS implementation writes conditions here: `confirmation: none`, so the exports
    # count as existing (Exported=True ExportExists) and the relay can be Ready.
    values = {
        "multiCluster": {"mcsImplementation": "mcs", "confirmation": "none"}
    } | restricted_values(namespace)
    installed = install_as_service_account(cp, release, values)
    configmap = one(installed.docs, "ConfigMap")["metadata"]["name"]
    opts = check.Options(
        kubeconfig=str(cp.kubeconfig),
        configmap=f"{release.namespace}/{configmap}",
        as_user=installed.user,
        output="json",
    )

    async def run() -> dict[str, str]:
        out = io.StringIO()
        await check.run(opts, out=out, err=io.StringIO())
        return {c["name"]: c["status"] for c in json.loads(out.getvalue())["checks"]}

    before = await run()
    assert before["leader"] == "fail", "nothing runs yet: no leader"
    assert before["rbac"] == "ok", "the chart's RBAC is what the operator needs"

    cfg = installed.configuration()
    async with exporting(cp, installed, cfg, client, namespace) as (op, _, _):
        await op.until(lambda: relay_ready(client, namespace), "the relay Ready", 120)
        found = await run()
    karmada_only = {"karmada-names": "skip", "karmada-collection": "skip"}
    assert {n: s for n, s in found.items() if s != "ok"} == karmada_only, found


async def test_check_without_configmap_finds_the_charts_and_says_so(
    control_plane: ControlPlane, namespace: str, release: Release
) -> None:
    """The chart's own labels are what the search finds: the rendered chart, installed."""
    installed = install_as_service_account(
        control_plane,
        release,
        {"multiCluster": {"mcsImplementation": "mcs"}} | restricted_values(namespace),
    )
    ref = f"{release.namespace}/{one(installed.docs, 'ConfigMap')['metadata']['name']}"

    async def run(**more: str) -> tuple[str, dict[str, str]]:
        """The first line of the text, and each check's status."""
        text, doc = io.StringIO(), io.StringIO()
        opts = {"kubeconfig": str(control_plane.kubeconfig), "as_user": installed.user, **more}
        await check.run(check.Options(**opts), out=text, err=io.StringIO())
        await check.run(check.Options(output="json", **opts), out=doc, err=io.StringIO())
        checks = json.loads(doc.getvalue())["checks"]
        return text.getvalue().splitlines()[0], {c["name"]: c["status"] for c in checks}

    first, found = await run()
    assert first.endswith(
        f"the configuration in ConfigMap {ref} (the chart's, found by its labels)"
    )
    named_first, named = await run(configmap=ref)
    assert named_first.endswith(f"the configuration in ConfigMap {ref}"), named_first
    assert found == named, "found or named, the same configuration is checked"
    assert found["rbac"] == "ok", "the chart's RBAC, asked for in the chart's namespaces"
