"""The runtime's REST client against the real API server: server-side apply and field
ownership, delete preconditions, pagination, status writes, discovery, the user agent,
and the error classes every failure is mapped to."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any

import pytest

from dynamo_pool_operator import __version__
from dynamo_pool_operator.api import crd
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.discovery import served_versions, server_resources
from dynamo_pool_operator.runtime.client.rest import DEFAULT_USER_AGENT, Client
from dynamo_pool_operator.runtime.objects.resources import CONFIGMAPS, DEPLOYMENTS
from tests.harness import eventually
from tests.integration.support.objects import config_map, deployment


def _owners(obj: dict[str, Any]) -> dict[str, set[str]]:
    """manager -> the data keys it owns, from managedFields."""
    out: dict[str, set[str]] = {}
    for entry in obj["metadata"].get("managedFields") or []:
        keys = (entry.get("fieldsV1") or {}).get("f:data") or {}
        out.setdefault(entry["manager"], set()).update(k.removeprefix("f:") for k in keys)
    return out


async def test_server_side_apply_tracks_field_managers_refuses_conflicts_unless_forced(
    client: Client, namespace: str
) -> None:
    """Two managers apply to one ConfigMap: each owns what it applied; applying another
    manager's field is a Conflict unless forced, and forcing moves the ownership.
    Re-applying the same intent is a no-op (same resourceVersion)."""
    a = await client.apply(CONFIGMAPS, config_map("ssa", namespace, x="1"), field_manager="mgr-a")
    b = await client.apply(CONFIGMAPS, config_map("ssa", namespace, y="1"), field_manager="mgr-b")
    assert b["data"] == {"x": "1", "y": "1"}
    assert _owners(b) == {"mgr-a": {"x"}, "mgr-b": {"y"}}
    again = await client.apply(
        CONFIGMAPS, config_map("ssa", namespace, x="1"), field_manager="mgr-a"
    )
    assert again["metadata"]["resourceVersion"] == b["metadata"]["resourceVersion"]

    with pytest.raises(errors.Conflict) as refused:
        await client.apply(CONFIGMAPS, config_map("ssa", namespace, x="2"), field_manager="mgr-b")
    assert refused.value.status == 409
    assert (await client.get(CONFIGMAPS, "ssa", namespace))["data"]["x"] == "1"

    forced = await client.apply(
        CONFIGMAPS, config_map("ssa", namespace, x="2", y="1"), field_manager="mgr-b", force=True
    )
    assert forced["data"] == {"x": "2", "y": "1"}
    assert _owners(forced).get("mgr-a", set()) == set()
    assert _owners(forced)["mgr-b"] == {"x", "y"}
    assert a["metadata"]["uid"] == forced["metadata"]["uid"]


async def test_delete_with_a_uid_precondition_never_deletes_another_incarnation(
    client: Client, namespace: str
) -> None:
    """A delete carrying the uid of an object that was since re-created under the same
    name is refused with Conflict and the new object survives; the right uid deletes."""
    old = await client.create(CONFIGMAPS, config_map("pre", namespace))
    await client.delete(CONFIGMAPS, "pre", namespace)
    new = await client.create(CONFIGMAPS, config_map("pre", namespace))
    with pytest.raises(errors.Conflict):
        await client.delete(CONFIGMAPS, "pre", namespace, uid=old["metadata"]["uid"])
    assert (await client.get(CONFIGMAPS, "pre", namespace))["metadata"]["uid"] == new["metadata"][
        "uid"
    ]
    await client.delete(
        CONFIGMAPS, "pre", namespace, uid=new["metadata"]["uid"], propagation_policy="Foreground"
    )

    async def gone() -> bool:
        try:
            await client.get(CONFIGMAPS, "pre", namespace)
        except errors.NotFound:
            return True
        return False

    await eventually(gone, timeout=10)


class CountingClient(Client):
    """Counts the requests it sends, by method and path."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.sent: list[tuple[str, str, dict[str, str]]] = []

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        self.sent.append((method, path, dict(kw.get("params") or {})))
        return await super().request(method, path, **kw)


async def test_list_follows_continue_tokens_page_by_page(
    control_plane: ControlPlane, client: Client, namespace: str
) -> None:
    """limit=2 over 5 objects: three pages, the 2nd and 3rd asked with the server's
    continue token, and all 5 objects (once each) in the result."""
    names = [f"page-{i}" for i in range(5)]
    for name in names:
        await client.create(CONFIGMAPS, config_map(name, namespace))
    async with CountingClient(load_kubeconfig(control_plane.kubeconfig)) as counting:
        result = await counting.list(CONFIGMAPS, namespace, limit=2)
    assert sorted(o["metadata"]["name"] for o in result.items) == names
    assert result.resource_version
    pages = [params for method, _, params in counting.sent if method == "GET"]
    assert len(pages) == 3
    assert all(p["limit"] == "2" for p in pages)
    assert "continue" not in pages[0]
    assert pages[1]["continue"]
    assert pages[2]["continue"] != pages[1]["continue"]


async def test_list_maps_each_item_as_its_page_arrives(
    control_plane: ControlPlane, client: Client, namespace: str
) -> None:
    """`each` sees every item once, page by page (before the next page is asked), and
    an item it maps to None is dropped: how an informer trims a relist without
    holding every untrimmed object at once."""
    names = [f"each-{i}" for i in range(5)]
    for name in names:
        await client.create(CONFIGMAPS, config_map(name, namespace))
    async with CountingClient(load_kubeconfig(control_plane.kubeconfig)) as counting:
        seen: list[tuple[str, int]] = []  # (item, pages asked when it was mapped)

        def each(obj: dict[str, Any]) -> dict[str, Any] | None:
            name = obj["metadata"]["name"]
            seen.append((name, len(counting.sent)))
            return None if name == "each-3" else {"name": name}

        result = await counting.list(CONFIGMAPS, namespace, limit=2, each=each)
    assert result.items == [{"name": n} for n in names if n != "each-3"]
    assert seen == [(n, i // 2 + 1) for i, n in enumerate(names)]


async def test_status_subresource_write_changes_only_status(client: Client, namespace: str) -> None:
    """A status written through /status sticks; status sent to the main resource is ignored
    (the Deployment's status subresource is the server's rule, not the client's)."""
    body = deployment("dep", namespace, "dep", {"name": "c", "image": "example.invalid/c:1"})
    await client.create(DEPLOYMENTS, body)
    await client.merge_patch(
        DEPLOYMENTS, "dep", {"status": {"observedGeneration": 7}}, namespace, field_manager="t"
    )
    assert (await client.get(DEPLOYMENTS, "dep", namespace)).get("status", {}).get(
        "observedGeneration"
    ) != 7
    status = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "dep", "namespace": namespace},
        "status": {"observedGeneration": 7},
    }
    out = await client.apply(DEPLOYMENTS, status, field_manager="t", subresource="status")
    assert out["status"]["observedGeneration"] == 7
    assert out["metadata"]["generation"] == 1


async def test_discovery_lists_core_resources_and_every_installed_crd_with_its_versions(
    client: Client,
) -> None:
    served = await server_resources(client)
    index = {(r.group, r.version, r.plural): r for r in served}
    cm = index[("", "v1", "configmaps")]
    assert (cm.kind, cm.namespaced) == ("ConfigMap", True)
    assert ("apps", "v1", "deployments") in index
    assert index[(crd.GROUP, crd.VERSION, crd.PLURAL)].kind == crd.KIND
    assert ("nvidia.com", "v1beta1", "dynamographdeployments") in index
    props = [r for r in served if r.group == "about.k8s.io" and r.plural == "clusterproperties"]
    assert props
    assert not any(p.namespaced for p in props)
    assert not any("/" in r.plural for r in served), "subresources must be left out"
    versions = await served_versions(client, "multicluster.x-k8s.io", "serviceexports")
    assert sorted(versions) == ["v1alpha1", "v1beta1"]
    assert len(versions) == 2
    imports = await served_versions(client, "multicluster.x-k8s.io", "serviceimports")
    assert sorted(imports) == ["v1alpha1", "v1beta1"]
    assert await served_versions(client, "multicluster.x-k8s.io", "nonexistent") == []


async def test_writes_carry_a_user_agent_naming_the_operator_and_its_version(
    control_plane: ControlPlane, namespace: str
) -> None:
    assert f"dynamo-pool-operator/{__version__}" == DEFAULT_USER_AGENT
    since = control_plane.audit.offset()
    async with Client(load_kubeconfig(control_plane.kubeconfig)) as c:
        await c.create(CONFIGMAPS, config_map("ua", namespace))
    writes = await asyncio.to_thread(
        control_plane.audit.writes, since, user_agent_prefix=DEFAULT_USER_AGENT
    )
    assert [(w.verb, w.name, w.user_agent) for w in writes] == [
        ("create", "ua", DEFAULT_USER_AGENT)
    ]


async def test_qps_paces_requests_after_the_burst(
    control_plane: ControlPlane, namespace: str
) -> None:
    """With `qps` set, requests beyond `burst` wait for a token, also when sent at
    once: the server receives 10 concurrent creates over about 8 / 4 = 2 s. (A
    lower bound only: a slow machine stretches it further, never shortens it.)"""
    agent = f"qps-probe/{uuid.uuid4().hex[:6]}"
    since = control_plane.audit.offset()
    cfg = load_kubeconfig(control_plane.kubeconfig)
    async with Client(cfg, user_agent=agent, qps=4, burst=2) as c:
        await asyncio.gather(
            *(c.create(CONFIGMAPS, config_map(f"paced-{i}", namespace)) for i in range(10))
        )
    writes = await asyncio.to_thread(control_plane.audit.writes, since, user_agent_prefix=agent)
    assert len(writes) == 10
    received = sorted(datetime.fromisoformat(w.raw["requestReceivedTimestamp"]) for w in writes)
    span = (received[-1] - received[0]).total_seconds()
    # 2 s on the client; the margin covers the first send being delayed after its token.
    assert span >= 1.5, f"10 requests at qps 4 after a burst of 2 took only {span:.2f}s"


async def test_errors_are_classified_from_the_servers_answers(
    control_plane: ControlPlane, client: Client, namespace: str
) -> None:
    """NotFound, AlreadyExists, Conflict (stale resourceVersion), Invalid (a bad name and
    a bad data key), Forbidden (a user without RBAC): one class each, with the server's
    status code and reason kept."""
    with pytest.raises(errors.NotFound) as nf:
        await client.get(CONFIGMAPS, "missing", namespace)
    assert (nf.value.status, nf.value.reason) == (404, "NotFound")

    made = await client.create(CONFIGMAPS, config_map("dup", namespace))
    with pytest.raises(errors.AlreadyExists) as ae:
        await client.create(CONFIGMAPS, config_map("dup", namespace))
    assert (ae.value.status, ae.value.reason) == (409, "AlreadyExists")
    assert not isinstance(ae.value, errors.Conflict)

    await client.merge_patch(CONFIGMAPS, "dup", {"data": {"v": "1"}}, namespace)
    with pytest.raises(errors.Conflict) as cf:
        await client.replace(CONFIGMAPS, {**made, "data": {"v": "stale"}})
    assert (cf.value.status, cf.value.reason) == (409, "Conflict")

    with pytest.raises(errors.Invalid) as bad_name:
        await client.create(CONFIGMAPS, config_map("Not_A_Name", namespace))
    assert (bad_name.value.status, bad_name.value.reason) == (422, "Invalid")
    with pytest.raises(errors.Invalid):
        await client.create(CONFIGMAPS, config_map("badkey", namespace, **{"no spaces": "x"}))
    assert bad_name.value.details.get("name") == "Not_A_Name"
    assert not bad_name.value.retryable

    user = f"nobody-{uuid.uuid4().hex[:6]}"
    async with Client(load_kubeconfig(control_plane.user_kubeconfig(user))) as restricted:
        with pytest.raises(errors.Forbidden) as fb:
            await restricted.get(CONFIGMAPS, "dup", namespace)
        with pytest.raises(errors.Forbidden):
            await restricted.create(CONFIGMAPS, config_map("nope", namespace))
    assert (fb.value.status, fb.value.reason) == (403, "Forbidden")
    assert user in fb.value.message
