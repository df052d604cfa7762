"""Relay pods in a world with nodes: kwok, the scheduler stand-in, the pod controllers,
and Pod Security `restricted` enforced on the namespace (localcluster/kwok.py).

The rest of the integration tier has no nodes, so a relay Deployment never gets a pod
and nothing checks its pod template against admission. Here the pods exist: they are
admitted only if the template is `restricted`-compliant, they run, the relay Service's
EndpointSlice lists them, and scaling and namespace deletion work as on a cluster.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.localcluster import kwok
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, EVENTS, NAMESPACES
from tests import endpoints
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.planes import scratch_namespace
from tests.integration.support.relay_fixtures import DGDS, RELAYS, dgd_body, ready, relay_body

pytestmark = pytest.mark.timeout(180)

POOL = "llama"


@pytest.fixture
def pod_namespace(node_plane: ControlPlane) -> Iterator[str]:
    with scratch_namespace(node_plane, "p") as name:
        yield name


def relay_selector() -> str:
    return ",".join(f"{k}={v}" for k, v in names.selector(POOL).items())


async def pods_are(client: Client, namespace: str, count: int) -> bool:
    return len(await kwok.running_pods(client, namespace, relay_selector())) == count


async def endpoints_are(
    client: Client, namespace: str, count: int
) -> tuple[tuple[str, ...]] | None:
    """The relay Service's ready endpoint addresses, once there are `count` (as a tuple,
    truthy even when empty, for `eventually`)."""
    ready = await endpoints.service_endpoints(client, namespace, names.relay_name(POOL))
    return (tuple(ready),) if len(ready) == count else None


async def test_relay_pods_are_admitted_under_restricted_pod_security_and_serve_the_service(
    node_plane: ControlPlane, node_client: Client, pod_namespace: str
) -> None:
    ns = pod_namespace
    async with OperatorUnderTest(node_plane):
        await node_client.create(DGDS, dgd_body(POOL, ns))
        await node_client.create(RELAYS, relay_body(POOL, ns, replicas=2))
        try:
            await eventually(partial(pods_are, node_client, ns, 2), timeout=60)
        except AssertionError:
            deployment = await node_client.get(DEPLOYMENTS, names.relay_name(POOL), ns)
            pytest.fail(f"no 2 running relay pods; Deployment status: {deployment.get('status')}")
        (addresses,) = await eventually(partial(endpoints_are, node_client, ns, 2), timeout=60)
        assert all(a.startswith("10.244.") for a in addresses), addresses

        # Scaling down removes pods (kwok's pod-delete) and their endpoints.
        await node_client.merge_patch(RELAYS, POOL, {"spec": {"replicas": 0}}, ns)
        await eventually(partial(pods_are, node_client, ns, 0), timeout=60)
        await eventually(partial(endpoints_are, node_client, ns, 0), timeout=60)


async def test_a_namespace_with_running_pods_is_deleted(
    node_plane: ControlPlane, node_client: Client
) -> None:
    """kwok removes a pod being deleted (no kubelet grace period), so the namespace
    controller can finish: without the pod-delete stage the namespace stays Terminating."""
    ns = f"p-{uuid.uuid4().hex[:10]}"
    node_plane.create_namespace(ns)
    async with OperatorUnderTest(node_plane):
        await node_client.create(DGDS, dgd_body(POOL, ns))
        await node_client.create(RELAYS, relay_body(POOL, ns, replicas=1))
        await eventually(partial(pods_are, node_client, ns, 1), timeout=60)
    node_plane.delete_namespace(ns)

    async def gone() -> bool:
        try:
            await node_client.get(NAMESPACES, ns)
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


async def all_published(client: Client, namespace: str, pools: list[str]) -> bool:
    for pool in pools:
        condition = await ready(client, namespace, pool)
        if not condition or condition["status"] != "True":
            return False
    return True


#: Each pool is one chance for the namespace controller to delete a relay's Deployment
#: or Service before the relay (its kind-by-kind order decides): with six, the operator
#: met the refusal in 7 of 9 runs.
POOLS_IN_DELETED_NAMESPACE = 6


async def test_deleting_a_namespace_with_a_published_pool_logs_no_error(
    node_plane: ControlPlane, node_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """The namespace controller deletes a namespace's objects kind by kind: the relay's
    Deployment and Service may go before the relay itself. Re-creating them is then
    refused (403, cause NamespaceTerminating) until the relay is gone. That refusal is
    the expected end of the pool, not an error: Kubernetes' own controllers (the
    ReplicaSet controller, for one) drop it silently. The operator must not log it at
    error level."""
    caplog.set_level(logging.DEBUG, logger="dynamo_pool_operator")
    ns = f"p-{uuid.uuid4().hex[:10]}"
    node_plane.create_namespace(ns)
    pools = [f"pool-{i}" for i in range(POOLS_IN_DELETED_NAMESPACE)]
    async with OperatorUnderTest(node_plane) as op:
        for pool in pools:
            await node_client.create(DGDS, dgd_body(pool, ns))
            await node_client.create(RELAYS, relay_body(pool, ns, replicas=1))
        await eventually(partial(all_published, node_client, ns, pools), timeout=60)
        await op.settle()
        caplog.clear()
        node_plane.delete_namespace(ns)
        await eventually(partial(gone, node_client, ns), timeout=90)
        await op.settle()
    logged = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR and r.name.startswith("dynamo_pool_operator")
    ]
    assert logged == [], logged


async def gone(client: Client, namespace: str) -> bool:
    try:
        await client.get(NAMESPACES, namespace)
    except errors.NotFound:
        return True
    return False


async def test_a_deployment_controller_writing_status_during_the_handover_logs_no_error(
    node_plane: ControlPlane,
    node_client: Client,
    pod_namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before its first apply of a relay Deployment the operator hands the create's
    fields over to its apply manager, a patch guarded by the resourceVersion read. The
    Deployment controller writes a changing Deployment's status several times a second
    (seen with kwok). Here each of the first three attempts is made to lose for
    certain: just before it, the Deployment moves on (a write through the API, as the
    controller's). That is a lost race: retried quietly, and the change converges."""
    caplog.set_level(logging.DEBUG, logger="dynamo_pool_operator")
    ns = pod_namespace
    async with OperatorUnderTest(node_plane) as op:
        assert op.client is not None
        real = op.client.merge_patch
        bumped = 0

        async def merge_patch(
            res: Any, name: str, patch: dict[str, Any], *a: Any, **kw: Any
        ) -> Any:
            nonlocal bumped
            handover = "managedFields" in (patch.get("metadata") or {})
            if res == DEPLOYMENTS and handover and bumped < 3:
                bumped += 1
                note = {"metadata": {"annotations": {"test/moved-on": str(bumped)}}}
                await node_client.merge_patch(DEPLOYMENTS, name, note, ns)
            return await real(res, name, patch, *a, **kw)

        op.client.merge_patch = merge_patch  # type: ignore[method-assign]
        await node_client.create(DGDS, dgd_body(POOL, ns))
        await node_client.create(RELAYS, relay_body(POOL, ns, replicas=1))
        await eventually(partial(pods_are, node_client, ns, 1), timeout=60)
        assert bumped == 0, "a create is one write: no handover before a change needs it"
        await node_client.merge_patch(RELAYS, POOL, {"spec": {"replicas": 2}}, ns)
        await eventually(partial(pods_are, node_client, ns, 2), timeout=60)
        await eventually(partial(all_published, node_client, ns, [POOL]), timeout=60)
        assert bumped == 3, "the handover was not attempted three times"
    logged = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR and r.name.startswith("dynamo_pool_operator")
    ]
    assert logged == [], logged


async def _condition(client: Client, ns: str, type_: str) -> dict[str, Any] | None:
    relay = await client.get(RELAYS, POOL, ns)
    status = relay.get("status") or {}
    if status.get("observedGeneration") != relay["metadata"]["generation"]:
        return None
    return next((c for c in status.get("conditions") or [] if c["type"] == type_), None)


async def _is(client: Client, ns: str, type_: str, status: str, reason: str) -> bool:
    c = await _condition(client, ns, type_)
    return bool(c and (c["status"], c["reason"]) == (status, reason))


async def _events(client: Client, ns: str, reason: str) -> list[dict[str, Any]]:
    items = (await client.list(EVENTS, ns)).items
    return [e for e in items if e.get("reason") == reason]


async def test_ready_follows_the_relay_pods_and_says_why_not(
    node_plane: ControlPlane, node_client: Client, pod_namespace: str
) -> None:
    """`RelayAvailable` from the Deployment's own status: True once a relay pod is
    available (Ready with it), `ScaledToZero` at 0 replicas, True again after; each
    change is written once (a second pass writes nothing), with a Warning for the cause
    and a Normal `PoolReady` when the pool is Ready again."""
    ns = pod_namespace
    async with OperatorUnderTest(node_plane) as op:
        await node_client.create(DGDS, dgd_body(POOL, ns))
        await node_client.create(RELAYS, relay_body(POOL, ns, replicas=2))
        await eventually(
            partial(_is, node_client, ns, "RelayAvailable", "True", "Available"), timeout=60
        )
        assert await _is(node_client, ns, "Ready", "True", "Ready")
        relay = await node_client.get(RELAYS, POOL, ns)
        assert relay["status"]["relayPods"] == "2/2"
        await op.settle()
        assert await op.reconcile_again((ns, POOL)) == []
        await eventually(partial(_events, node_client, ns, "PoolReady"))
        warnings = [
            e["reason"]
            for e in (await node_client.list(EVENTS, ns)).items
            if e["type"] == "Warning"
        ]
        assert warnings == [], "a relay that comes up normally warns of nothing"

        await node_client.merge_patch(RELAYS, POOL, {"spec": {"replicas": 0}}, ns)
        zero = partial(_is, node_client, ns, "RelayAvailable", "False", "ScaledToZero")
        await eventually(zero, timeout=60)
        assert await _is(node_client, ns, "Ready", "False", "ScaledToZero")
        assert await _is(node_client, ns, "Published", "True", "Published"), "still published"
        (warning, *_) = await eventually(partial(_events, node_client, ns, "ScaledToZero"))
        assert (warning["type"], warning["action"]) == ("Warning", "RelayAvailable")
        assert warning["related"]["kind"] == "Deployment"
        await op.settle()
        assert await op.reconcile_again((ns, POOL)) == []

        await node_client.merge_patch(RELAYS, POOL, {"spec": {"replicas": 1}}, ns)
        await eventually(partial(_is, node_client, ns, "Ready", "True", "Ready"), timeout=60)
        assert (await node_client.get(RELAYS, POOL, ns))["status"]["relayPods"] == "1/1"


async def test_ready_waits_for_the_rollout_of_a_change(
    node_plane: ControlPlane, node_client: Client, pod_namespace: str
) -> None:
    """A spec change that rolls the relay pods (here: the cluster ID they get) is not
    Ready until its rollout completed (`kubectl rollout status`'s rule: the Deployment
    observed its generation, and every replica is updated and available). Every version
    of the relay and of its Deployment is watched, so a Ready written for a moment is
    seen too; resourceVersions of one etcd order them."""
    import asyncio

    ns = pod_namespace
    relay_name = names.relay_name(POOL)
    async with OperatorUnderTest(node_plane) as op:
        await node_client.create(DGDS, dgd_body(POOL, ns))
        await node_client.create(RELAYS, relay_body(POOL, ns, replicas=2, clusterId="east"))
        await eventually(partial(_is, node_client, ns, "Ready", "True", "Ready"), timeout=60)
        await op.settle()
        relay = await node_client.get(RELAYS, POOL, ns)
        deployment = await node_client.get(DEPLOYMENTS, relay_name, ns)
        relays: list[dict[str, Any]] = []
        deployments: list[dict[str, Any]] = []

        async def record(res: Any, since: str, into: list[dict[str, Any]], name: str) -> None:
            async for event in node_client.watch(res, ns, resource_version=since):
                if event["object"].get("metadata", {}).get("name") == name:
                    into.append(event["object"])

        watching = [
            asyncio.create_task(record(RELAYS, relay["metadata"]["resourceVersion"], relays, POOL)),
            asyncio.create_task(
                record(
                    DEPLOYMENTS, deployment["metadata"]["resourceVersion"], deployments, relay_name
                )
            ),
        ]
        try:
            await node_client.merge_patch(RELAYS, POOL, {"spec": {"clusterId": "west"}}, ns)
            generation = relay["metadata"]["generation"] + 1

            def rolled_out(dep: dict[str, Any]) -> bool:
                st, spec = dep.get("status") or {}, dep["spec"]
                env = {
                    e["name"]: e.get("value")
                    for e in spec["template"]["spec"]["containers"][0]["env"]
                }
                return (
                    env.get("DYN_CLUSTER_ID") == "west"
                    and st.get("observedGeneration") == dep["metadata"]["generation"]
                    and st.get("updatedReplicas") == spec["replicas"]
                    and st.get("replicas") == spec["replicas"]
                    and st.get("availableReplicas") == spec["replicas"]
                )

            async def done() -> bool:
                return rolled_out(await node_client.get(DEPLOYMENTS, relay_name, ns))

            await eventually(done, timeout=60)
            await eventually(partial(_is, node_client, ns, "Ready", "True", "Ready"), timeout=60)
            await op.settle()
            await asyncio.sleep(0.5)  # the watches deliver what is written up to now
        finally:
            for task in watching:
                task.cancel()
        completed = min(int(d["metadata"]["resourceVersion"]) for d in deployments if rolled_out(d))
        new = [r for r in relays if (r.get("status") or {}).get("observedGeneration") == generation]
        assert new, "no status of the new generation was written"
        said = [
            (int(r["metadata"]["resourceVersion"]), c["status"], c["reason"])
            for r in new
            for c in r["status"]["conditions"]
            if c["type"] == "Ready"
        ]
        early = [s for s in said if s[1] == "True" and s[0] < completed]
        assert early == [], f"Ready before the rollout completed at {completed}: {said}"
        assert said[-1][1:] == ("True", "Ready"), said


async def test_a_metadata_only_repair_of_the_deployment_is_no_rollout(
    node_plane: ControlPlane, node_client: Client, pod_namespace: str
) -> None:
    """Restoring only the relay Deployment's metadata (here: the DGD label a user removed)
    changes no pod template and no generation: every pod keeps serving, so Ready must
    not flap (no `Ready=False Progressing`, no second `PoolReady`)."""
    import asyncio

    ns = pod_namespace
    relay_name = names.relay_name(POOL)
    async with OperatorUnderTest(node_plane) as op:
        await node_client.create(DGDS, dgd_body(POOL, ns))
        await node_client.create(RELAYS, relay_body(POOL, ns, replicas=2))
        await eventually(partial(_is, node_client, ns, "Ready", "True", "Ready"), timeout=60)
        await op.settle()
        await op.running.recorder.wait_idle()
        ready_events = _occurrences(await _events(node_client, ns, "PoolReady"))
        relay = await node_client.get(RELAYS, POOL, ns)
        generation = (await node_client.get(DEPLOYMENTS, relay_name, ns))["metadata"]["generation"]
        relays: list[dict[str, Any]] = []

        async def record() -> None:
            since = relay["metadata"]["resourceVersion"]
            async for event in node_client.watch(RELAYS, ns, resource_version=since):
                relays.append(event["object"])

        watching = asyncio.create_task(record())
        try:
            await node_client.merge_patch(
                DEPLOYMENTS, relay_name, {"metadata": {"labels": {names.DGD_NAME: None}}}, ns
            )

            async def repaired() -> bool:
                dep = await node_client.get(DEPLOYMENTS, relay_name, ns)
                return dep["metadata"].get("labels", {}).get(names.DGD_NAME) == POOL

            await eventually(repaired, timeout=30)
            await op.settle()
            await op.running.recorder.wait_idle()
            await asyncio.sleep(0.5)  # the watch delivers what is written up to now
        finally:
            watching.cancel()
        dep = await node_client.get(DEPLOYMENTS, relay_name, ns)
        assert dep["metadata"]["generation"] == generation, "the repair changed the template"
        said = [
            (c["type"], c["status"], c["reason"])
            for r in relays
            for c in (r.get("status") or {}).get("conditions") or []
            if c["type"] in ("Ready", "RelayAvailable") and c["status"] != "True"
        ]
        assert said == [], f"a metadata-only repair flapped the relay: {said}"
        assert _occurrences(await _events(node_client, ns, "PoolReady")) == ready_events


def _occurrences(events: list[dict[str, Any]]) -> int:
    """How often the Events were emitted: repeats fold into a series' count."""
    return sum(int((e.get("series") or {}).get("count") or 1) for e in events)
