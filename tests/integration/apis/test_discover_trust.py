"""`discover` takes no slice Kubernetes' own controllers made for an import.

Kubernetes' EndpointSlice controller copies a Service's labels onto the slices it makes.
A user who may create only Services and Pods labels her Service with the MCS import
labels: without the rule, `discover` (and a router reading the same labels) lists a live
pool from a cluster of her choosing, with her pod's IP. Here the user, her pod (kwok),
and the controller that makes the slice are all real (the `node_plane`): the rule is
judged on the slice as Kubernetes writes it (docs/exports.md, "As the Global Router
sees it").
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from dynamo_pool_operator.discover import command
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.dynamo import RESTRICTED_CONTAINER
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects import Resource
from dynamo_pool_operator.runtime.objects.resources import SERVICES
from tests.harness import eventually
from tests.integration.support.planes import scratch_namespace
from tests.integration.support.tenants import grant

pytestmark = pytest.mark.timeout(180)

PODS = Resource("", "v1", "pods", "Pod")
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")

MALLORY = "mallory"
#: All she holds, in her namespace: Services and Pods.
SERVICE_AUTHOR_RULES = [
    {
        "apiGroups": [""],
        "resources": ["services", "pods"],
        "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"],
    }
]
#: The import labels she puts on her Service, and the manager she would like to claim.
FORGED_LABELS = {
    "multicluster.kubernetes.io/service-name": "x-pool-relay",
    "multicluster.kubernetes.io/source-cluster": "prod-west",
    "endpointslice.kubernetes.io/managed-by": "lighthouse-agent.submariner.io",
}


@pytest.fixture
def pod_namespace(node_plane: ControlPlane) -> Iterator[str]:
    with scratch_namespace(node_plane, "trust") as name:
        yield name


def pod(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "mine", "namespace": ns, "labels": {"app": "mine"}},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "example.com/mine:1",
                    "securityContext": RESTRICTED_CONTAINER,
                }
            ]
        },
    }


def service(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "innocent", "namespace": ns, "labels": FORGED_LABELS},
        "spec": {"selector": {"app": "mine"}, "ports": [{"port": 9000, "protocol": "TCP"}]},
    }


async def her_ready_slice(client: Client, ns: str) -> dict[str, Any] | None:
    """The slice Kubernetes made for her Service, once it lists a ready endpoint."""
    slices = (
        await client.list(ENDPOINT_SLICES, ns, label_selector="kubernetes.io/service-name=innocent")
    ).items
    for s in slices:
        if any((e.get("conditions") or {}).get("ready") for e in s.get("endpoints") or ()):
            return dict(s)
    return None


async def discover(kubeconfig: str, **options: Any) -> tuple[int, str, str]:
    """`discover` as run from the command line: its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    code = await command.run(command.Options(kubeconfig=kubeconfig, **options), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


async def test_a_service_author_cannot_make_discover_list_a_pool(
    node_plane: ControlPlane, node_client: Client, pod_namespace: str
) -> None:
    ns = pod_namespace
    grant(node_plane, ns, SERVICE_AUTHOR_RULES, user=MALLORY)
    kubeconfig = load_kubeconfig(node_plane.user_kubeconfig(MALLORY))
    async with Client(kubeconfig, user_agent="dpo-tests-mallory") as mallory:
        # She may not write an EndpointSlice herself ...
        forged = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "forged", "labels": FORGED_LABELS},
            "addressType": "IPv4",
            "endpoints": [],
        }
        with pytest.raises(errors.Forbidden):
            await mallory.create(ENDPOINT_SLICES, forged, ns)
        # ... but she may create a pod and a Service carrying the import labels.
        await mallory.create(PODS, pod(ns), ns)
        await mallory.create(SERVICES, service(ns), ns)

    made = await eventually(partial(her_ready_slice, node_client, ns), timeout=60)
    labels = made["metadata"]["labels"]
    # Kubernetes copied her labels, all but the manager, which is its own.
    assert labels["multicluster.kubernetes.io/service-name"] == "x-pool-relay"
    assert labels["multicluster.kubernetes.io/source-cluster"] == "prod-west"
    assert labels["endpointslice.kubernetes.io/managed-by"] == "endpointslice-controller.k8s.io"
    address = made["endpoints"][0]["addresses"][0]

    admin = str(node_plane.kubeconfig)
    code, out, err = await discover(admin, namespace=ns, output="json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["pools"] == [], f"her pod {address} was taken for a pool: {doc['pools']}"
    (skipped,) = doc["skipped"]
    assert skipped["service"] == "x-pool-relay"
    assert skipped["why"] == (
        f"EndpointSlice {made['metadata']['name']} is managed by "
        "endpointslice-controller.k8s.io: Kubernetes' own controllers copy a Service's (or "
        "an Endpoints') labels onto the slices they make, so anyone who may create a Service "
        "can make one carrying the import labels; an implementation's import never is"
    )
    code, _, err = await discover(admin, namespace=ns, pool=f"prod-west/{ns}/x")
    assert code == 1
    assert f"pool prod-west/{ns}/x is not found" in err

    # An implementation's import beside hers is taken; `--implementation` takes only the
    # slices of the implementation it names.
    lighthouse = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "y-pool-relay-east",
            "labels": {
                "multicluster.kubernetes.io/service-name": "y-pool-relay",
                "multicluster.kubernetes.io/source-cluster": "east",
                "endpointslice.kubernetes.io/managed-by": "lighthouse-agent.submariner.io",
            },
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.245.0.4"], "conditions": {"ready": True}}],
    }
    await node_client.create(ENDPOINT_SLICES, lighthouse, ns)
    for implementation, pools in (
        (None, ["east"]),
        ("lighthouse", ["east"]),
        ("cilium", []),
    ):
        code, out, err = await discover(
            admin, namespace=ns, output="json", implementation=implementation
        )
        doc = json.loads(out)
        assert [p["cluster"] for p in doc["pools"]] == pools, (implementation, err)
        assert {s["service"] for s in doc["skipped"]} >= {"x-pool-relay"}
    assert (
        "EndpointSlice y-pool-relay-east is managed by lighthouse-agent.submariner.io, not "
        "endpointslice-mesh-controller.cilium.io: not imported by cilium (--implementation "
        "cilium)"
    ) in [s["why"] for s in doc["skipped"]]
