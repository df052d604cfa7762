"""The DynamoPoolRelay controller against a real API server (rules: docs/crd.md).

Each case lets the running operator converge, then reconciles the relay once
more by hand and checks in the audit log that the second pass wrote nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.race_fixtures import published_pool
from tests.integration.support.race_fixtures import (
    writes_nothing as assert_second_pass_writes_nothing,
)
from tests.integration.support.relay_fixtures import (
    DGDS,
    FRONTEND,
    RELAYS,
    WORKER,
    absent,
    decision_of,
    dgd_body,
    published,
    relay_body,
    relay_owner,
    withdrawn,
)

POOL = "llama"
RELAY_OBJ = f"{POOL}-pool-relay"


async def test_publish_creates_owned_deployment_and_service(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    await client.create(DGDS, dgd_body(POOL, namespace))
    relay = await client.create(RELAYS, relay_body(POOL, namespace, clusterId="east-1", port=9000))
    cond = await published(client, namespace)
    assert cond["reason"] == "Published"

    owner = relay_owner(relay)
    assert owner["name"] == POOL
    dep = await client.get(DEPLOYMENTS, RELAY_OBJ, namespace)
    svc = await client.get(SERVICES, RELAY_OBJ, namespace)
    for obj in (dep, svc):
        assert obj["metadata"]["ownerReferences"] == [owner]
        assert obj["metadata"]["labels"][names.DGD_NAME] == POOL
    container = dep["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["DYN_NAMESPACE"] == f"{namespace}-{POOL}"
    assert env["DYN_DISCOVERY_BACKEND"] == "kubernetes"
    assert env["DYN_CLUSTER_ID"] == "east-1"
    assert env["DYN_PARENT_DGD_K8S_NAME"] == POOL
    assert {"POD_NAME", "POD_NAMESPACE", "POD_UID"} <= env.keys()
    assert container["ports"] == [{"name": "relay", "containerPort": 9000, "protocol": "TCP"}]
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == f"{POOL}-k8s-service-discovery"
    assert svc["spec"]["ports"][0]["port"] == 9000
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]

    status = (await client.get(RELAYS, POOL, namespace))["status"]
    assert status["serviceName"] == RELAY_OBJ
    assert status["clusterId"] == "east-1"
    await assert_second_pass_writes_nothing(operator, namespace)


async def test_printer_columns_show_the_decision(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    await client.create(RELAYS, relay_body(POOL, namespace))
    await withdrawn(client, namespace, "DGDNotFound")
    table = await client.request(
        "GET", RELAYS.path(namespace), accept="application/json;as=Table;v=v1;g=meta.k8s.io"
    )
    columns = [c["name"] for c in table["columnDefinitions"]]
    row = dict(zip(columns, table["rows"][0]["cells"], strict=True))
    assert row["Ready"] == "False"
    assert row["Reason"] == "DGDNotFound"


def _no_workers(ns: str) -> dict[str, Any]:
    return dgd_body(POOL, ns, components=[FRONTEND])


def _etcd(ns: str) -> dict[str, Any]:
    return dgd_body(POOL, ns, annotations={"nvidia.com/dynamo-discovery-backend": "etcd"})


def _global(ns: str) -> dict[str, Any]:
    return dgd_body(POOL, ns, components=[FRONTEND, {**WORKER, "globalDynamoNamespace": True}])


@pytest.mark.parametrize(
    ("reason", "broken"),
    [
        ("NoWorkers", _no_workers),
        ("KubernetesDiscoveryDisabled", _etcd),
        ("GlobalDynamoNamespace", _global),
    ],
)
async def test_each_dgd_reason_withdraws_and_fixing_it_publishes_again(
    client: Client, namespace: str, operator: OperatorUnderTest, reason: str, broken: Any
) -> None:
    relay = await published_pool(client, namespace)

    # A merge patch replaces the components list whole (an apply would keep the
    # entries the creator owns).
    body = broken(namespace)
    patch = {"metadata": {"annotations": body["metadata"].get("annotations")}, "spec": body["spec"]}
    await client.merge_patch(DGDS, POOL, patch, namespace)
    await withdrawn(client, namespace, reason)
    assert (await client.get(RELAYS, POOL, namespace))["metadata"]["uid"] == relay["metadata"][
        "uid"
    ]
    await assert_second_pass_writes_nothing(operator, namespace)

    fixed = {"metadata": {"annotations": None}, "spec": dgd_body(POOL, namespace)["spec"]}
    await client.merge_patch(DGDS, POOL, fixed, namespace)
    await published(client, namespace)
    await assert_second_pass_writes_nothing(operator, namespace)


async def test_dgd_missing_then_terminating_withdraws_and_keeps_the_relay(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    await client.create(RELAYS, relay_body(POOL, namespace))
    await withdrawn(client, namespace, "DGDNotFound")
    await assert_second_pass_writes_nothing(operator, namespace)

    await client.create(DGDS, dgd_body(POOL, namespace, finalizers=["test.example/hold"]))
    await published(client, namespace)
    await client.delete(DGDS, POOL, namespace)  # held by the finalizer: terminating
    await withdrawn(client, namespace, "DGDTerminating")
    await assert_second_pass_writes_nothing(operator, namespace)
    await client.merge_patch(DGDS, POOL, {"metadata": {"finalizers": None}}, namespace)
    await withdrawn(client, namespace, "DGDNotFound")


async def test_invalid_relay_name_is_invalid_configuration(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    name = "llama.v2"  # a valid DGD name, not a valid Service name
    await client.create(DGDS, dgd_body(name, namespace))
    await client.create(RELAYS, relay_body(name, namespace))
    cond = await eventually(lambda: decision_of(client, namespace, name))
    assert (cond["status"], cond["reason"]) == ("False", "InvalidConfiguration")
    assert "llama.v2-pool-relay" in cond["message"]
    await assert_second_pass_writes_nothing(operator, namespace, name)


async def test_invalid_spec_names_the_field(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    await client.create(DGDS, dgd_body(POOL, namespace))
    # What only the operator judges (the CRD refuses a reserved pod label at the API).
    bad = {"requests": {"CPU": "1"}}
    await client.create(RELAYS, relay_body(POOL, namespace, resources=bad))
    cond = await withdrawn(client, namespace, "InvalidConfiguration")
    assert "spec.resources.requests[CPU]" in cond["message"]


async def test_replaced_dgd_is_published_again(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    first = await client.create(DGDS, dgd_body(POOL, namespace))
    await client.create(RELAYS, relay_body(POOL, namespace))
    await published(client, namespace)
    await client.delete(DGDS, POOL, namespace)
    await withdrawn(client, namespace, "DGDNotFound")
    second = await client.create(DGDS, dgd_body(POOL, namespace))
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    await published(client, namespace)
    await assert_second_pass_writes_nothing(operator, namespace)


async def test_dgd_replaced_while_the_operator_was_stopped(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    await client.create(DGDS, dgd_body(POOL, namespace))
    await client.create(RELAYS, relay_body(POOL, namespace))
    async with OperatorUnderTest(control_plane):
        await published(client, namespace)
    # Stopped: the operator never sees the delete, only a new DGD with no workers...
    await client.delete(DGDS, POOL, namespace)
    await client.create(DGDS, dgd_body(POOL, namespace, components=[FRONTEND]))
    async with OperatorUnderTest(control_plane) as op:
        await withdrawn(client, namespace, "NoWorkers")
        # ...and once more replaced by a good one, again while stopped.
        await assert_second_pass_writes_nothing(op, namespace)
    await client.delete(DGDS, POOL, namespace)
    await client.create(DGDS, dgd_body(POOL, namespace))
    async with OperatorUnderTest(control_plane) as op:
        await published(client, namespace)
        await assert_second_pass_writes_nothing(op, namespace)


@pytest.mark.parametrize("foreign_kind", ["Deployment", "Service"])
async def test_ownership_conflict_withdraws_ours_and_never_touches_the_foreign_one(
    client: Client,
    namespace: str,
    operator: OperatorUnderTest,
    control_plane: ControlPlane,
    foreign_kind: str,
) -> None:
    await published_pool(client, namespace)
    res = DEPLOYMENTS if foreign_kind == "Deployment" else SERVICES
    since = control_plane.audit.offset()
    # A user takes our object over (removes our controller reference): it is theirs now.
    taken = await client.merge_patch(
        res,
        RELAY_OBJ,
        {"metadata": {"ownerReferences": None, "labels": {"owner": "user"}}},
        namespace,
    )
    cond = await withdrawn_except(client, namespace, foreign_kind)
    assert foreign_kind in cond["message"]
    assert "no controller" in cond["message"]
    still = await client.get(res, RELAY_OBJ, namespace)
    assert still["metadata"]["resourceVersion"] == taken["metadata"]["resourceVersion"]
    await assert_no_write_to(operator, since, res.plural, namespace)
    await assert_second_pass_writes_nothing(operator, namespace)

    await client.delete(res, RELAY_OBJ, namespace)
    await published(client, namespace)
    await assert_second_pass_writes_nothing(operator, namespace)


async def test_foreign_object_created_before_the_relay_is_never_adopted(
    client: Client, namespace: str, operator: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    since = control_plane.audit.offset()
    await client.create(DGDS, dgd_body(POOL, namespace))
    foreign = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": RELAY_OBJ, "namespace": namespace},
        "spec": {"ports": [{"port": 80}]},
    }
    made = await client.create(SERVICES, foreign)
    await client.create(RELAYS, relay_body(POOL, namespace))
    cond = await withdrawn_except(client, namespace, "Service")
    assert "Service" in cond["message"]
    assert (await client.get(SERVICES, RELAY_OBJ, namespace))["metadata"]["resourceVersion"] == (
        made["metadata"]["resourceVersion"]
    )
    await assert_no_write_to(operator, since, "services", namespace)
    await assert_second_pass_writes_nothing(operator, namespace)


async def assert_no_write_to(
    op: OperatorUnderTest, since: int, resource: str, namespace: str
) -> None:
    """No write attempt by the operator on `<D>-pool-relay` of `resource`, except a refused
    exclusive create (409 from a cache that had not seen the object yet), which changes
    nothing."""
    touched = [
        (w.verb, w.code)
        for w in await op.writes_since(since)
        if w.name == RELAY_OBJ
        and w.namespace == namespace
        and w.resource == resource
        and not (w.verb == "create" and w.code == 409)
    ]
    assert touched == [], f"the operator wrote (or tried to write) the foreign {resource}"


async def withdrawn_except(client: Client, ns: str, foreign_kind: str) -> dict[str, Any]:
    """OwnershipConflict, with our object of the *other* kind deleted."""
    ours = SERVICES if foreign_kind == "Deployment" else DEPLOYMENTS

    async def probe() -> dict[str, Any] | None:
        cond = await decision_of(client, ns, POOL)
        if (
            cond
            and cond["reason"] == "OwnershipConflict"
            and await absent(client, ours, ns, RELAY_OBJ)
        ):
            return cond
        return None

    cond: dict[str, Any] = await eventually(probe)
    return cond


async def test_manual_edit_of_an_owned_field_is_reverted_and_others_fields_kept(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    await published_pool(client, namespace, port=9000)
    # Someone else changes fields we own (a label, the target port) and adds a label.
    await client.merge_patch(
        SERVICES,
        RELAY_OBJ,
        {
            "metadata": {"labels": {names.DGD_NAME: "other", "team": "infra"}},
            "spec": {
                "ports": [{"name": "relay", "port": 9000, "targetPort": 1234, "protocol": "TCP"}]
            },
        },
        namespace,
    )

    async def reverted() -> bool:
        svc = await client.get(SERVICES, RELAY_OBJ, namespace)
        return (
            svc["spec"]["ports"][0]["targetPort"] == "relay"
            and svc["metadata"]["labels"][names.DGD_NAME] == POOL
            and svc["metadata"]["labels"].get("team") == "infra"
        )

    await eventually(reverted)
    await assert_second_pass_writes_nothing(operator, namespace)


async def test_relay_spec_change_is_applied(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    await published_pool(client, namespace, replicas=2, podLabels={"tier": "a"})
    await client.merge_patch(RELAYS, POOL, {"spec": {"replicas": 3, "podLabels": None}}, namespace)

    async def applied() -> bool:
        dep = await client.get(DEPLOYMENTS, RELAY_OBJ, namespace)
        tmpl_labels = dep["spec"]["template"]["metadata"]["labels"]
        return dep["spec"]["replicas"] == 3 and "tier" not in tmpl_labels

    await eventually(applied)
    await assert_second_pass_writes_nothing(operator, namespace)


async def test_deleting_the_relay_lets_gc_remove_its_objects(
    client: Client, namespace: str, operator: OperatorUnderTest
) -> None:
    await published_pool(client, namespace)
    await client.delete(RELAYS, POOL, namespace)

    async def collected() -> bool:
        return all([await absent(client, r, namespace, RELAY_OBJ) for r in (DEPLOYMENTS, SERVICES)])

    await eventually(collected, timeout=30)
    assert not await absent(client, DGDS, namespace, POOL), "the DGD must never be touched"
