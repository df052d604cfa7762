"""Which configuration `dynamo-pool-operator check` checks against, said in its first line.

Without --config or --configmap the check used to take the defaults silently: checked
against them, a working install looks broken (no Lease where the defaults put it). Now
it looks for the chart's ConfigMap by the chart's labels, as the caller, in the
namespace of --as's ServiceAccount or else in every namespace, takes it when there is
exactly one, and otherwise says in the first line that the defaults are checked and
why. The API server decides what the caller may list and which ConfigMaps carry the
labels; the searches across all namespaces run on a control plane of their own, so no
other test's ConfigMap is among what they find.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamo_pool_operator import check
from dynamo_pool_operator.config import API_VERSION, KIND
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import CONFIGMAPS
from tests.integration.support.planes import started

pytestmark = pytest.mark.timeout(120)

LEASE = "from-the-configmap"


def configuration(lease: str = LEASE, **more: Any) -> str:
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "multiCluster": {"mcsImplementation": ""},
        "leaderElection": {"name": lease},
        **more,
    }
    return yaml.safe_dump(doc)


def chart_configmap(namespace: str, name: str, text: str) -> dict[str, Any]:
    """A ConfigMap labelled as the chart labels its own (templates/_helpers.tpl)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/name": "dynamo-pool-operator",
                "app.kubernetes.io/instance": name,
                "app.kubernetes.io/part-of": "dynamo-pool-operator",
                "app.kubernetes.io/managed-by": "Helm",
            },
        },
        "data": {"config.yaml": text},
    }


async def run_text(kubeconfig: Path | str, **opts: Any) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = await check.run(
        check.Options(kubeconfig=str(kubeconfig), **opts), out=out, err=io.StringIO()
    )
    return code, out.getvalue().splitlines()


async def run_json(kubeconfig: Path | str, **opts: Any) -> dict[str, Any]:
    out = io.StringIO()
    options = check.Options(kubeconfig=str(kubeconfig), output="json", **opts)
    await check.run(options, out=out, err=io.StringIO())
    doc: dict[str, Any] = json.loads(out.getvalue())
    return doc


def by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in doc["checks"]}


def service_account(namespace: str) -> str:
    return f"system:serviceaccount:{namespace}:operator"


# ====================================================================== --as's namespace
async def test_without_a_configuration_the_first_line_says_the_defaults_are_checked(
    control_plane: ControlPlane, namespace: str
) -> None:
    _, lines = await run_text(control_plane.kubeconfig, as_user=service_account(namespace))
    assert "the configuration's defaults" in lines[0], lines[0]
    assert f"no ConfigMap of the chart in namespace {namespace}" in lines[0], lines[0]


async def test_the_charts_configmap_in_the_service_accounts_namespace_is_checked(
    control_plane: ControlPlane, client: Client, namespace: str
) -> None:
    name = "dpo"
    await client.create(CONFIGMAPS, chart_configmap(namespace, name, configuration()))
    # Not the chart's (no label), and a labelled one without config.yaml: neither counts.
    plain = chart_configmap(namespace, "plain", configuration("not-this-one"))
    plain["metadata"]["labels"] = {}
    await client.create(CONFIGMAPS, plain)
    other = chart_configmap(namespace, "other", "")
    other["data"] = {"values.yaml": "{}"}
    await client.create(CONFIGMAPS, other)

    _, lines = await run_text(control_plane.kubeconfig, as_user=service_account(namespace))
    assert lines[0].endswith(
        f"the configuration in ConfigMap {namespace}/{name} (the chart's, found by its labels)"
    ), lines[0]
    doc = await run_json(control_plane.kubeconfig, as_user=service_account(namespace))
    summary = doc["configuration"].pop("summary")
    assert doc["configuration"] == {
        "source": "configmap",
        "name": f"{namespace}/{name}",
        "found": True,
        "candidates": [f"{namespace}/{name}"],
    }
    assert lines[0].endswith(f": {summary}"), "the JSON says what the first line says"
    # The Lease is looked for where the found configuration puts it: its name, and the
    # ConfigMap's namespace (the release's) as the operator's.
    leader = by_name(doc)["leader"]
    assert f"no Lease {namespace}/{LEASE}" in leader["message"], leader


async def test_several_chart_configmaps_are_listed_and_the_defaults_checked(
    control_plane: ControlPlane, client: Client, namespace: str
) -> None:
    for name in ("team-a", "team-b"):
        await client.create(CONFIGMAPS, chart_configmap(namespace, name, configuration()))
    _, lines = await run_text(control_plane.kubeconfig, as_user=service_account(namespace))
    assert "the configuration's defaults" in lines[0], lines[0]
    assert (
        f"2 ConfigMaps of the chart in namespace {namespace}: "
        f"{namespace}/team-a, {namespace}/team-b; name one with --configmap"
    ) in lines[0], lines[0]
    doc = await run_json(control_plane.kubeconfig, as_user=service_account(namespace))
    assert doc["configuration"]["source"] == "defaults"
    assert doc["configuration"]["candidates"] == [f"{namespace}/team-a", f"{namespace}/team-b"]


async def test_a_named_source_is_said_too(
    control_plane: ControlPlane, client: Client, namespace: str, tmp_path: Path
) -> None:
    await client.create(CONFIGMAPS, chart_configmap(namespace, "named", configuration()))
    ref = f"{namespace}/named"
    _, lines = await run_text(control_plane.kubeconfig, configmap=ref)
    assert lines[0].endswith(f"the configuration in ConfigMap {ref}"), lines[0]
    path = tmp_path / "config.yaml"
    path.write_text(configuration())
    _, lines = await run_text(control_plane.kubeconfig, config_path=str(path))
    assert lines[0].endswith(f"the configuration in {path}"), lines[0]


async def test_a_caller_who_may_not_list_configmaps_is_told_the_defaults_are_checked(
    control_plane: ControlPlane,
) -> None:
    viewer = control_plane.user_kubeconfig(f"no-configmaps-{uuid.uuid4().hex[:6]}")
    _, lines = await run_text(viewer)
    assert "the configuration's defaults" in lines[0], lines[0]
    assert "ConfigMaps in any namespace could not be listed" in lines[0], lines[0]
    assert "403" in lines[0] or "forbidden" in lines[0].lower(), lines[0]


# ====================================================================== every namespace
@pytest.fixture(scope="module")
def own_plane() -> Iterator[ControlPlane]:
    """No other test's ConfigMaps: the search across namespaces sees only this file's."""
    yield from started(ControlPlane(garbage_collector=False))


async def test_the_charts_configmap_is_found_in_any_namespace(own_plane: ControlPlane) -> None:
    release = f"dpo-{uuid.uuid4().hex[:6]}"
    own_plane.create_namespace(release)
    own_plane.apply(chart_configmap(release, "dynamo-pool-operator", configuration()))
    ref = f"{release}/dynamo-pool-operator"

    _, lines = await run_text(own_plane.kubeconfig)
    assert lines[0].endswith(
        f"the configuration in ConfigMap {ref} (the chart's, found by its labels)"
    ), lines[0]
    found = by_name(await run_json(own_plane.kubeconfig))
    assert f"no Lease {release}/{LEASE}" in found["leader"]["message"], found["leader"]

    # A second release elsewhere: which one is meant is the caller's to say.
    second = f"dpo-{uuid.uuid4().hex[:6]}"
    own_plane.create_namespace(second)
    own_plane.apply(chart_configmap(second, "dynamo-pool-operator", configuration()))
    _, lines = await run_text(own_plane.kubeconfig)
    assert "the configuration's defaults" in lines[0], lines[0]
    both = ", ".join(sorted([ref, f"{second}/dynamo-pool-operator"]))
    assert f"2 ConfigMaps of the chart in any namespace: {both}" in lines[0], lines[0]
    # --operator-namespace narrows the search to that namespace.
    _, lines = await run_text(own_plane.kubeconfig, operator_namespace=second)
    assert lines[0].endswith(
        f"the configuration in ConfigMap {second}/dynamo-pool-operator "
        "(the chart's, found by its labels)"
    ), lines[0]
