"""One object nobody can decode stops nothing for anyone else (docs/operations.md,
"Security model").

A DGD may nest a field its CRD preserves deeper than the operator's decoder follows
(orjson stops at 1,024 levels); the API server stores it. The tenant who wrote it
loses nothing she did not already lose, and every other pool goes on: the informer
skips the object, names it, counts it, keeps its resourceVersion and stays synced.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator

import aiohttp
import pytest

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.planes import scratch_namespace
from tests.integration.support.relay_fixtures import (
    DGDS,
    FRONTEND,
    RELAYS,
    WORKER,
    decision_of,
    dgd_body,
    relay_body,
)
from tests.integration.support.tenants import POOL_AUTHOR_RULES, TENANT, TENANT_GROUP, grant

LEVELS = 1100


@pytest.fixture
def elsewhere(control_plane: ControlPlane) -> Iterator[str]:
    """Another team's namespace."""
    with scratch_namespace(control_plane, "o") as name:
        yield name


async def create_too_deep(cp: ControlPlane, namespace: str, name: str) -> None:
    """Alice creates a DGD with a field nested `LEVELS` deep, sent as text: no encoder
    here follows so deep, the API server's does."""
    grant(cp, namespace, POOL_AUTHOR_RULES)
    cfg = load_kubeconfig(cp.user_kubeconfig(TENANT, groups=(TENANT_GROUP,)))
    body = dgd_body(name, namespace, [FRONTEND, WORKER])
    head = (
        f'{{"apiVersion":"{body["apiVersion"]}","kind":"{body["kind"]}",'
        f'"metadata":{{"name":"{name}","namespace":"{namespace}"}},'
        '"spec":{"components":[{"name":"decode","type":"decode"}],"extra":'
    ).encode()
    raw = head + b'{"a":' * LEVELS + b"{}" + b"}" * LEVELS + b"}}"
    headers = {**(await cfg.credentials.headers()), "Content-Type": "application/json"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            cfg.server + DGDS.path(namespace),
            data=raw,
            headers=headers,
            ssl=await cfg.credentials.ssl_context(),
        ) as resp,
    ):
        assert resp.status == 201, await resp.text()


async def published(client: Client, namespace: str, name: str) -> bool:
    c = await decision_of(client, namespace, name)
    return bool(c and c["status"] == "True")


def undecodable(op: OperatorUnderTest) -> float:
    return sum(
        s.value
        for m in op.registry.collect()
        if m.name == "informer_undecodable_objects"
        for s in m.samples
        if "dynamographdeployments" in s.labels.get("resource", "")
    )


async def test_an_undecodable_dgd_stops_no_other_pool(
    control_plane: ControlPlane, client: Client, namespace: str, elsewhere: str
) -> None:
    """Watched: the operator runs when the object arrives; a pool made after it in
    another namespace is published, and the object is counted."""
    async with OperatorUnderTest(control_plane) as op:
        await create_too_deep(control_plane, namespace, "deep")
        await client.create(RELAYS, relay_body("deep", namespace))
        await client.create(DGDS, dgd_body("fine", elsewhere))
        await client.create(RELAYS, relay_body("fine", elsewhere))
        await eventually(lambda: published(client, elsewhere, "fine"), timeout=30)
        assert undecodable(op) >= 1  # another test's namespace may still be going


async def test_after_a_restart_the_caches_sync_past_an_undecodable_dgd(
    control_plane: ControlPlane, client: Client, namespace: str, elsewhere: str
) -> None:
    """Listed: the object is there before the operator starts; its caches still sync
    (no crash loop), and the other pool is published."""
    await create_too_deep(control_plane, namespace, "deep")
    await client.create(DGDS, dgd_body("fine", elsewhere))
    await client.create(RELAYS, relay_body("fine", elsewhere))
    async with asyncio.timeout(60):
        op = OperatorUnderTest(control_plane)
        await op.start()
    try:
        await eventually(lambda: published(client, elsewhere, "fine"), timeout=30)
        assert undecodable(op) >= 1  # another test's namespace may still be going
    finally:
        await op.stop()


async def test_the_relay_of_an_undecodable_dgd_says_it_cannot_be_read(
    control_plane: ControlPlane, client: Client, namespace: str
) -> None:
    """The DGD's own relay tells the truth: its DGD exists but cannot be read (not
    `DGDNotFound`), and says what to change; it learns so when the DGD arrives, though
    the informer dispatches no object for it."""
    async with OperatorUnderTest(control_plane):
        await client.create(RELAYS, relay_body("deep", namespace))

        async def reason() -> str:
            c = await decision_of(client, namespace, "deep")
            return str(c["reason"]) if c else ""

        await eventually(lambda: _is(reason, "DGDNotFound"))
        await create_too_deep(control_plane, namespace, "deep")
        await eventually(lambda: _is(reason, "DGDUnreadable"), timeout=20)
        published = await decision_of(client, namespace, "deep")
        assert published is not None
        assert published["status"] == "False"
        assert "cannot be decoded" in published["message"], published["message"]
        assert "depth" in published["message"], published["message"]


async def test_deleting_an_undecodable_dgd_tells_its_relay_it_is_gone(
    control_plane: ControlPlane, client: Client, namespace: str
) -> None:
    """The DGD that never could be read is deleted: its relay is decided again and says
    `DGDNotFound` (no event carries the object: the informer tells by its identity)."""
    async with OperatorUnderTest(control_plane):
        await client.create(RELAYS, relay_body("deep", namespace))

        async def reason() -> str:
            c = await decision_of(client, namespace, "deep")
            return str(c["reason"]) if c else ""

        await create_too_deep(control_plane, namespace, "deep")
        await eventually(lambda: _is(reason, "DGDUnreadable"), timeout=20)
        await client.delete(DGDS, "deep", namespace)
        await eventually(lambda: _is(reason, "DGDNotFound"), timeout=20)


async def _is(read: Callable[[], Awaitable[str]], want: str) -> bool:
    return await read() == want
