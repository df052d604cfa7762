"""Unit tests for pool.exports.cleanup: with the feature off, only the exports this
operator made are withdrawn, guarded, and every refusal is a reported failure."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.pool.exports.cleanup import ours, withdraw_leftover_exports
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import ListResult
from dynamo_pool_operator.runtime.objects.resources import Resource
from tests.unit.runtime.client.fake import FakeClient

RELAY_REF = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "DynamoPoolRelay",
    "name": "pool",
    "uid": "relay-uid",
    "controller": True,
}


def export(
    name: str, *, controller: dict[str, Any] | None = RELAY_REF, **meta: Any
) -> dict[str, Any]:
    owners = [controller] if controller is not None else []
    return {
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": f"{name}-uid",
            "resourceVersion": "5",
            "labels": {names.DGD_NAME: "dgd"},
            "ownerReferences": owners,
            **meta,
        }
    }


class Exports(FakeClient):
    """Lists `items`; each delete is answered by `on_delete` (None: done); a get
    returns `reread`."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        super().__init__()
        self.items = items
        self.list_error: Exception | None = None
        self.on_delete: Callable[[str], Exception | None] = lambda name: None
        self.reread: dict[str, Any] | None = None
        self.deleted: list[tuple[str, str | None, str | None]] = []

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 500,
        each: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> ListResult:
        assert label_selector == names.DGD_NAME
        if self.list_error is not None:
            raise self.list_error
        return ListResult(copy.deepcopy(self.items), "10")

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation_policy: str | None = None,
    ) -> dict[str, Any] | None:
        self.deleted.append((name, uid, resource_version))
        error = self.on_delete(name)
        if error is not None:
            raise error
        return None

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        assert self.reread is not None
        return copy.deepcopy(self.reread)


def test_ours_needs_a_relay_controller_our_label_and_not_terminating() -> None:
    assert ours(export("a"))
    assert not ours(export("a", controller={**RELAY_REF, "kind": "Deployment"}))
    assert not ours(export("a", controller=None))
    assert not ours(export("a", labels={}))
    assert not ours(export("a", deletionTimestamp="2026-01-01T00:00:00Z"))


async def test_only_our_exports_are_withdrawn_with_preconditions() -> None:
    client = Exports([export("ours"), export("foreign", controller=None)])
    out = await withdraw_leftover_exports(client, "v1beta1", "team")
    assert (out.withdrawn, out.failures) == (1, [])
    assert client.deleted == [("ours", "ours-uid", "5")]


async def test_a_refused_list_is_a_failure_not_an_error() -> None:
    client = Exports([])
    client.list_error = errors.ApiError("forbidden", status=403)
    out = await withdraw_leftover_exports(client, "v1beta1", None)
    assert (out.withdrawn, out.failures) == (0, ["list ServiceExports: 403: forbidden"])


async def test_a_refused_delete_names_the_export_and_the_rest_go_on() -> None:
    client = Exports([export("a"), export("b")])
    client.on_delete = lambda name: errors.ApiError("boom", status=500) if name == "a" else None
    out = await withdraw_leftover_exports(client, "v1beta1", "team")
    said = "delete ServiceExport team/a: 500: boom"
    assert (out.withdrawn, out.failures) == (1, [said])
    assert [(e["metadata"]["name"], s) for e, s in out.refused] == [("a", said)]


async def test_an_export_that_stops_being_ours_after_a_lost_race_is_left() -> None:
    client = Exports([export("a")])
    client.on_delete = lambda name: errors.Conflict("changed", status=409)
    client.reread = export("a", controller=None)
    out = await withdraw_leftover_exports(client, "v1beta1", "team")
    assert (out.withdrawn, out.failures, len(client.deleted)) == (0, [], 1)


async def test_three_lost_races_in_a_row_are_a_failure() -> None:
    client = Exports([export("a")])
    client.on_delete = lambda name: errors.Conflict("changed", status=409)
    client.reread = export("a")
    out = await withdraw_leftover_exports(client, "v1beta1", "team")
    assert len(client.deleted) == 3
    assert out.failures == [
        "delete ServiceExport team/a: it changed under each of 3 guarded deletes (retried)"
    ]
