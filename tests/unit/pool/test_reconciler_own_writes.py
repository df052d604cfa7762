"""The relay's status as the server shows it after our own write (pool/reconciler.py
with the relay cache's `Store.latest`): a pass the cache has not caught up with
compares with what we wrote, so it writes nothing again and is never kept as quiet."""

from __future__ import annotations

import copy
from typing import Any

from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.objects.resources import Resource
from tests.unit.pool.support import reconciler
from tests.unit.runtime.client.fake import FakeClient

NS, POOL, UID = "ns", "p", "relay-uid"
REQUEST = (NS, POOL)


def relay(rv: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoPoolRelay",
        "metadata": {"name": POOL, "namespace": NS, "uid": UID, "resourceVersion": rv},
        "spec": {},
    }
    if status is not None:
        obj["status"] = status
    return obj


class Server(FakeClient):
    """Answers each status apply as the API server would: the relay at a new version;
    has no relay object (the relay has no DGD: its withdrawal reads each name once)."""

    def __init__(self) -> None:
        super().__init__()
        self.applied: list[dict[str, Any]] = []

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Any:
        raise errors.NotFound(f"{res.kind} {name} not found")

    async def apply(
        self,
        res: Resource,
        body: dict[str, Any],
        *,
        field_manager: str | None = None,
        force: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        self.applied.append(body)
        return relay(str(1 + len(self.applied)), copy.deepcopy(body["status"]))


async def test_a_pass_before_the_cache_shows_our_status_write_compares_with_it() -> None:
    server = Server()
    r = reconciler(server)
    store = r.caches.relays.store
    store.put(relay("1"))
    await r.reconcile(REQUEST)
    assert len(server.applied) == 1
    await r.reconcile(REQUEST)  # the cache still shows no status: ours is the truth
    assert len(server.applied) == 1
    assert REQUEST not in r._quiet  # our write is no version read: never quiet
    store.put(relay("2", copy.deepcopy(server.applied[0]["status"])))  # its event
    assert not store.shows_own_write(*REQUEST)
    await r.reconcile(REQUEST)
    assert len(server.applied) == 1
    assert REQUEST in r._quiet


async def test_a_status_someone_else_wrote_after_ours_is_written_again() -> None:
    server = Server()
    r = reconciler(server)
    store = r.caches.relays.store
    store.put(relay("1"))
    await r.reconcile(REQUEST)
    store.put(relay("3", {}))  # a later change, without our status
    await r.reconcile(REQUEST)
    assert len(server.applied) == 2
