"""The local control plane is a real Kubernetes API server.

Each test asserts something only a real kube-apiserver (+ etcd + the garbage
collector) does, so a fake could not pass them.
"""

from __future__ import annotations

import asyncio
import socket
import uuid

import pytest

from dynamo_pool_operator.api.mcs import serviceexports
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import CONFIGMAPS, SECRETS
from tests.integration.support.objects import config_map

SERVICEEXPORTS = serviceexports("v1beta1")


async def test_version_endpoint_reports_the_pinned_release(client: Client) -> None:
    from dynamo_pool_operator.localcluster.assets import pinned_versions

    info = await client.request("GET", "/version")
    assert info["gitVersion"] == "v" + pinned_versions()["KUBERNETES_VERSION"]


async def test_server_side_apply_records_managed_fields(client: Client, namespace: str) -> None:
    obj = await client.apply(CONFIGMAPS, config_map("ssa", namespace, a="1"), field_manager="smoke")
    managers = {m["manager"]: m for m in obj["metadata"]["managedFields"]}
    assert managers["smoke"]["operation"] == "Apply"
    assert "f:a" in managers["smoke"]["fieldsV1"]["f:data"]


async def test_delete_with_stale_resource_version_is_refused(
    client: Client, namespace: str
) -> None:
    first = await client.create(CONFIGMAPS, config_map("rv", namespace, a="1"))
    await client.merge_patch(CONFIGMAPS, "rv", {"data": {"a": "2"}}, namespace)
    with pytest.raises(errors.Conflict):
        await client.delete(
            CONFIGMAPS, "rv", namespace, resource_version=first["metadata"]["resourceVersion"]
        )
    assert (await client.get(CONFIGMAPS, "rv", namespace))["data"] == {"a": "2"}


async def test_apply_with_uid_of_deleted_object_does_not_recreate_it(
    client: Client, namespace: str
) -> None:
    made = await client.create(CONFIGMAPS, config_map("gone", namespace))
    await client.delete(CONFIGMAPS, "gone", namespace)
    body = config_map("gone", namespace, a="1")
    body["metadata"]["uid"] = made["metadata"]["uid"]
    with pytest.raises(errors.Conflict):
        await client.apply(CONFIGMAPS, body, field_manager="smoke")
    with pytest.raises(errors.NotFound):
        await client.get(CONFIGMAPS, "gone", namespace)


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
async def test_serviceexport_round_trips_at_each_served_version(
    client: Client, namespace: str, version: str
) -> None:
    res = SERVICEEXPORTS.at_version(version)
    name = f"svc-{version}"
    body = {
        "apiVersion": res.api_version,
        "kind": "ServiceExport",
        "metadata": {"name": name, "namespace": namespace, "labels": {"k": "v"}},
    }
    made = await client.create(res, body)
    assert made["apiVersion"] == f"multicluster.x-k8s.io/{version}"
    other = "v1beta1" if version == "v1alpha1" else "v1alpha1"
    read = await client.get(SERVICEEXPORTS.at_version(other), name, namespace)
    assert read["metadata"]["uid"] == made["metadata"]["uid"]
    assert read["metadata"]["labels"] == {"k": "v"}


async def test_garbage_collector_deletes_dependents_of_a_deleted_owner(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    assert control_plane.garbage_collector, "kube-controller-manager is not running"
    owner = await client.create(CONFIGMAPS, config_map("owner", namespace))
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    dep = {
        "apiVersion": "multicluster.x-k8s.io/v1beta1",
        "kind": "ServiceExport",
        "metadata": {"name": "dep", "namespace": namespace, "ownerReferences": [ref]},
    }
    await client.create(SERVICEEXPORTS, dep)
    await client.delete(CONFIGMAPS, "owner", namespace)
    for _ in range(600):  # a new CRD kind can take the GC's discovery resync (~30 s)
        try:
            await client.get(SERVICEEXPORTS, "dep", namespace)
        except errors.NotFound:
            return
        await asyncio.sleep(0.1)
    pytest.fail("the garbage collector did not delete the dependent ServiceExport in 60 s")


async def test_restricted_user_is_forbidden_where_rbac_says_so(
    control_plane: ControlPlane, namespace: str
) -> None:
    user = f"reader-{uuid.uuid4().hex[:6]}"
    control_plane.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "cm-reader", "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
        }
    )
    control_plane.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "cm-reader", "namespace": namespace},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "cm-reader",
            },
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        }
    )
    path = control_plane.user_kubeconfig(user, groups=("dpo-test-users",))
    async with Client(load_kubeconfig(path)) as c:
        await c.list(CONFIGMAPS, namespace)  # allowed
        with pytest.raises(errors.Forbidden):
            await c.list(SECRETS, namespace)
        with pytest.raises(errors.Forbidden):
            await c.create(CONFIGMAPS, config_map("nope", namespace))


async def test_audit_log_records_each_write_with_its_user_agent(
    control_plane: ControlPlane, namespace: str
) -> None:
    since = control_plane.audit.offset()
    async with Client(load_kubeconfig(control_plane.kubeconfig), user_agent="audit-probe/1") as c:
        await c.create(CONFIGMAPS, config_map("audited", namespace))
        await c.get(CONFIGMAPS, "audited", namespace)  # a read: not recorded
        await c.delete(CONFIGMAPS, "audited", namespace)
    writes = control_plane.audit.writes(since, user_agent_prefix="audit-probe/")
    assert [(w.verb, w.name, w.user) for w in writes] == [
        ("create", "audited", "admin"),
        ("delete", "audited", "admin"),
    ]


def test_a_port_taken_after_it_was_picked_is_picked_again() -> None:
    """A free port is free only when looked at: something may bind it before the API
    server and etcd start (another cluster starting in parallel, a client's outgoing
    connection). Each then starts on a newly picked port instead of failing."""
    cp = ControlPlane(garbage_collector=False)
    holders = []
    try:
        for port in (cp.etcd_port, cp.port):
            s = socket.socket()
            s.bind(("127.0.0.1", port))
            s.listen()
            holders.append(s)
        taken = (cp.etcd_port, cp.port)
        with cp:
            assert cp.etcd_port != taken[0]
            assert cp.port != taken[1]
            assert cp.url.endswith(f":{cp.port}")
            cfg = load_kubeconfig(cp.kubeconfig)
            assert cfg.server == cp.url, "the kubeconfig names the port in use"
            status, version = cp.request("GET", "/version")
            assert (status, version["major"]) == (200, "1")
    finally:
        for s in holders:
            s.close()


def test_etcd_answers_only_a_client_with_its_certificate(control_plane: ControlPlane) -> None:
    """Whoever shares the machine reaches etcd's loopback port: without a client
    certificate it must not read what the API server stores (`dev` runs for hours, and
    its Secrets and tokens are in etcd)."""
    import http.client
    import json
    import ssl

    body = json.dumps({"key": "AA==", "range_end": "AA=="})
    for conn in (
        http.client.HTTPConnection("127.0.0.1", control_plane.etcd_port, timeout=5),
        http.client.HTTPSConnection(
            "127.0.0.1",
            control_plane.etcd_port,
            timeout=5,
            context=ssl._create_unverified_context(),  # no certificate of ours
        ),
    ):
        try:
            conn.request("POST", "/v3/kv/range", body, {"Content-Type": "application/json"})
            status = conn.getresponse().status
        except (OSError, http.client.HTTPException):
            continue  # refused at the TLS handshake (or the plain request): as it must be
        finally:
            conn.close()
        raise AssertionError(f"etcd answered {status} to a client without a certificate")
    assert control_plane.etcd_revision() > 0, "the control plane's own client still reads"
