"""The create-to-apply handover of managed fields (runtime/objects/meta.py, its
requests in runtime/writes/guarded.py).

The pure rules here; that the API server accepts the patch and that a later apply
then replaces list entries is shown against the real server in
tests/integration/relay/test_relay_updates.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.objects import meta as handover
from dynamo_pool_operator.runtime.objects.resources import SERVICES, Resource
from dynamo_pool_operator.runtime.writes import guarded
from tests.unit.runtime.client.fake import FakeClient, Obj

ME = "dynamo-pool-operator"


def entry(manager: str, operation: str, fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": "2026-12-01T00:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        **extra,
    }


PORTS = {"f:spec": {"f:ports": {".": {}, 'k:{"port":8000,"protocol":"TCP"}': {".": {}}}}}
LABELS = {"f:metadata": {"f:labels": {".": {}, "f:a": {}}}}


def test_an_update_entry_becomes_the_apply_entry() -> None:
    out = handover.handed_over([entry(ME, "Update", PORTS)], ME)
    assert out == [entry(ME, "Apply", PORTS)]


def test_an_existing_apply_entry_gets_the_union_of_both_field_sets() -> None:
    out = handover.handed_over([entry(ME, "Update", PORTS), entry(ME, "Apply", LABELS)], ME)
    assert out is not None
    assert [(e["manager"], e["operation"]) for e in out] == [(ME, "Apply")]
    assert out[0]["fieldsV1"] == {**PORTS, **LABELS}


def test_union_merges_nested_sets() -> None:
    a = {"f:spec": {"f:ports": {"k:1": {}}}}
    b = {"f:spec": {"f:ports": {"k:2": {}}, "f:type": {}}}
    assert handover.union(a, b) == {"f:spec": {"f:ports": {"k:1": {}, "k:2": {}}, "f:type": {}}}


def test_other_managers_and_our_status_entry_are_kept_in_order() -> None:
    kcm = entry("kube-controller-manager", "Update", {"f:status": {}}, subresource="status")
    ours_status = entry(ME, "Update", {"f:status": {}}, subresource="status")
    user = entry("kubectl", "Update", LABELS)
    out = handover.handed_over([kcm, entry(ME, "Update", PORTS), user, ours_status], ME)
    assert out == [kcm, user, ours_status, entry(ME, "Apply", PORTS)]


def test_nothing_to_hand_over() -> None:
    assert (
        handover.handed_over([entry(ME, "Apply", PORTS), entry("kubectl", "Update", {})], ME)
        is None
    )
    assert not handover.needs_handover({"metadata": {}}, ME)
    assert handover.needs_handover({"metadata": {"managedFields": [entry(ME, "Update", {})]}}, ME)
    status_only = entry(ME, "Update", {}, subresource="status")
    assert not handover.needs_handover({"metadata": {"managedFields": [status_only]}}, ME)


def test_the_input_is_not_modified() -> None:
    managed = [entry(ME, "Update", PORTS), entry(ME, "Apply", LABELS)]
    before = repr(managed)
    handover.handed_over(managed, ME)
    assert repr(managed) == before


def test_summarize_keeps_who_wrote_how_and_drops_the_field_sets() -> None:
    obj = {"metadata": {"managedFields": [entry(ME, "Update", PORTS, subresource="status")]}}
    assert handover.summarize_managed_fields(obj)["metadata"]["managedFields"] == [
        {"manager": ME, "operation": "Update", "subresource": "status"}
    ]
    assert handover.needs_handover(
        handover.summarize_managed_fields(
            {"metadata": {"managedFields": [entry(ME, "Update", PORTS)]}}
        ),
        ME,
    )


def created(rv: str = "10", uid: str = "u1", controller: str = "r1") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "x-pool-relay",
            "namespace": "ns",
            "uid": uid,
            "resourceVersion": rv,
            "ownerReferences": [{"uid": controller, "controller": True}],
            "managedFields": [entry(ME, "Update", PORTS)],
        }
    }


class Server(FakeClient):
    """Answers the handover's two requests from a script; records what was sent."""

    def __init__(self, patches: list[Any], gets: list[Any] | None = None) -> None:
        super().__init__()
        self.patches, self.gets = patches, gets or []
        self.sent: list[dict[str, Any]] = []

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        answer = self.gets.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)

    async def merge_patch(
        self, res: Resource, name: str, patch: Obj, namespace: str | None = None, **_: Any
    ) -> Obj:
        self.sent.append(patch)
        answer = self.patches.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)


def ours(obj: Any) -> bool:
    return bool(obj["metadata"]["ownerReferences"][0]["uid"] == "r1")


async def test_the_patch_carries_uid_and_resource_version_read() -> None:
    server = Server([{"metadata": {"resourceVersion": "11"}}])
    out = await guarded.hand_over(server, SERVICES, created(), ME, still_ours=ours)
    assert out == {"metadata": {"resourceVersion": "11"}}
    (patch,) = server.sent
    assert patch["metadata"]["uid"] == "u1"
    assert patch["metadata"]["resourceVersion"] == "10"
    assert patch["metadata"]["managedFields"] == [entry(ME, "Apply", PORTS)]
    assert set(patch) == {"metadata"}, "nothing but managedFields (and its guards) changes"


async def test_a_conflict_reads_again_and_hands_over_from_the_fresh_version() -> None:
    server = Server([errors.Conflict("changed"), {"ok": 1}], gets=[created(rv="12")])
    assert await guarded.hand_over(server, SERVICES, created(), ME, still_ours=ours) == {"ok": 1}
    assert [p["metadata"]["resourceVersion"] for p in server.sent] == ["10", "12"]


@pytest.mark.parametrize(
    "fresh",
    [created(uid="u2"), created(controller="someone-else"), errors.NotFound("gone")],
    ids=["replaced", "taken over", "deleted"],
)
async def test_a_changed_hand_is_lost_not_patched(fresh: Any) -> None:
    server = Server([errors.Conflict("changed")], gets=[fresh])
    with pytest.raises(guarded.HandoverLost):
        await guarded.hand_over(server, SERVICES, created(), ME, still_ours=ours)
    assert len(server.sent) == 1


async def test_a_deleted_object_is_lost() -> None:
    server = Server([errors.NotFound("gone")])
    with pytest.raises(guarded.HandoverLost):
        await guarded.hand_over(server, SERVICES, created(), ME, still_ours=ours)


async def test_conflicts_are_bounded() -> None:
    server = Server([errors.Conflict("a"), errors.Conflict("b")], gets=[created(rv="12")])
    with pytest.raises(errors.Conflict):
        await guarded.hand_over(server, SERVICES, created(), ME, still_ours=ours, attempts=2)


async def test_an_object_already_handed_over_is_not_patched() -> None:
    obj = created()
    obj["metadata"]["managedFields"] = [entry(ME, "Apply", PORTS)]
    server = Server([])
    assert await guarded.hand_over(server, SERVICES, obj, ME, still_ours=ours) == obj
    assert server.sent == []
