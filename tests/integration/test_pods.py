"""Relay pods in a world with nodes: kwok, the scheduler stand-in, the pod controllers,
and Pod Security `restricted` enforced on the namespace (testing/kwok.py).

The rest of the integration tier has no nodes, so a relay Deployment never gets a pod
and nothing checks its pod template against admission. Here the pods exist: they are
admitted only if the template is `restricted`-compliant, they run, the relay Service's
EndpointSlice lists them, and scaling and namespace deletion work as on a cluster.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from functools import partial

import pytest
from relay_fixtures import DGDS, RELAYS, dgd_body, relay_body

from dynamo_pool_operator.api import labels, names
from dynamo_pool_operator.runtime import errors
from dynamo_pool_operator.runtime.auth import load_kubeconfig
from dynamo_pool_operator.runtime.client import Client
from dynamo_pool_operator.runtime.resources import DEPLOYMENTS, NAMESPACES
from dynamo_pool_operator.testing import kwok
from dynamo_pool_operator.testing.controlplane import ControlPlane
from dynamo_pool_operator.testing.harness import OperatorUnderTest, eventually

pytestmark = pytest.mark.timeout(180)

POOL = "llama"


@pytest.fixture
def pod_namespace(node_plane: ControlPlane) -> Iterator[str]:
    name = f"p-{uuid.uuid4().hex[:10]}"
    node_plane.create_namespace(name)
    try:
        yield name
    finally:
        node_plane.delete_namespace(name)


@pytest.fixture
async def admin(node_plane: ControlPlane) -> AsyncIterator[Client]:
    async with Client(load_kubeconfig(node_plane.kubeconfig), user_agent="dpo-tests") as c:
        yield c


def relay_selector() -> str:
    return ",".join(f"{k}={v}" for k, v in labels.selector(POOL).items())


async def pods_are(client: Client, namespace: str, count: int) -> bool:
    return len(await kwok.running_pods(client, namespace, relay_selector())) == count


async def endpoints_are(
    client: Client, namespace: str, count: int
) -> tuple[tuple[str, ...]] | None:
    """The relay Service's ready endpoint addresses, once there are `count` (as a tuple,
    truthy even when empty, for `eventually`)."""
    ready = await kwok.service_endpoints(client, namespace, names.relay_name(POOL))
    return (tuple(ready),) if len(ready) == count else None


async def test_relay_pods_are_admitted_under_restricted_pod_security_and_serve_the_service(
    node_plane: ControlPlane, admin: Client, pod_namespace: str
) -> None:
    ns = pod_namespace
    async with OperatorUnderTest(node_plane):
        await admin.create(DGDS, dgd_body(POOL, ns))
        await admin.create(RELAYS, relay_body(POOL, ns, replicas=2))
        try:
            await eventually(partial(pods_are, admin, ns, 2), timeout=60)
        except AssertionError:
            deployment = await admin.get(DEPLOYMENTS, names.relay_name(POOL), ns)
            pytest.fail(f"no 2 running relay pods; Deployment status: {deployment.get('status')}")
        (addresses,) = await eventually(partial(endpoints_are, admin, ns, 2), timeout=60)
        assert all(a.startswith("10.244.") for a in addresses), addresses

        # Scaling down removes pods (kwok's pod-delete) and their endpoints.
        await admin.merge_patch(RELAYS, POOL, {"spec": {"replicas": 0}}, ns)
        await eventually(partial(pods_are, admin, ns, 0), timeout=60)
        await eventually(partial(endpoints_are, admin, ns, 0), timeout=60)


async def test_a_namespace_with_running_pods_is_deleted(
    node_plane: ControlPlane, admin: Client
) -> None:
    """kwok removes a pod being deleted (no kubelet grace period), so the namespace
    controller can finish: without the pod-delete stage the namespace stays Terminating."""
    ns = f"p-{uuid.uuid4().hex[:10]}"
    node_plane.create_namespace(ns)
    async with OperatorUnderTest(node_plane):
        await admin.create(DGDS, dgd_body(POOL, ns))
        await admin.create(RELAYS, relay_body(POOL, ns, replicas=1))
        await eventually(partial(pods_are, admin, ns, 1), timeout=60)
    node_plane.delete_namespace(ns)

    async def gone() -> bool:
        try:
            await admin.get(NAMESPACES, ns)
        except errors.NotFound:
            return True
        return False

    await eventually(gone, timeout=90)


async def test_test_namespaces_refuse_a_pod_that_is_not_restricted(
    client: Client, namespace: str
) -> None:
    """Every test namespace enforces Pod Security `restricted`, nodes or not: admission
    happens at create."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "root", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    with pytest.raises(errors.ApiError) as refused:
        await client.create(kwok.PODS, pod)
    assert refused.value.status == 403
    assert 'violates PodSecurity "restricted:latest"' in str(refused.value)
