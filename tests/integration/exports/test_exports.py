"""Pool exports against a real API server (rules: docs/exports.md).

Each case lets the operator converge, then reconciles once more by hand and
checks in the audit log that the second pass wrote nothing (docs/testing.md, 'Tiers').
"""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.export_fixtures import (
    CLUSTER_ID,
    CLUSTER_PROPERTIES,
    SE,
    conditions_of,
    config,
    events_for,
    existing_export,
    export_obj,
    exports_become,
    set_cluster_id,
    states_become,
    stopped_after_exporting,
    wait_event,
)
from tests.integration.support.race_fixtures import (
    FRONTEND_SVC,
    POOL,
    RELAY_SVC,
    exported_pool,
    mismatches,
)
from tests.integration.support.race_fixtures import make_pool as pool
from tests.integration.support.race_fixtures import writes_nothing as second_pass_writes_nothing
from tests.integration.support.relay_fixtures import (
    DGDS,
    FRONTEND,
    RELAYS,
    WORKER,
    dgd_body,
    dynamos_services,
    relay_body,
    relay_owner,
)


def user_export(ns: str, name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": SE.api_version,
        "kind": "ServiceExport",
        "metadata": {"name": name, "namespace": ns, **meta},
    }


# ---------------------------------------------------------------- what is exported
async def test_publish_exports_relay_and_each_frontend_under_its_own_name(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    relay = await pool(
        client, namespace, [FRONTEND, {"name": "ChatV2", "type": "frontend"}, WORKER]
    )
    await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC, f"{POOL}-chatv2"})
    e = await existing_export(client, namespace, FRONTEND_SVC)
    assert e["metadata"]["labels"][names.DGD_NAME] == POOL
    assert e["metadata"]["ownerReferences"] == [relay_owner(relay)]
    assert relay["metadata"]["name"] == POOL
    created = await wait_event(client, namespace, "ExportCreated", name=FRONTEND_SVC)
    assert created["related"]["uid"] == e["metadata"]["uid"]
    want = {RELAY_SVC: "Exported", FRONTEND_SVC: "Exported", f"{POOL}-chatv2": "Exported"}
    states = await states_become(client, namespace, POOL, want)
    assert set(states) == set(want)
    await second_pass_writes_nothing(mcs, namespace)


async def test_renamed_frontend_moves_its_export(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    await exported_pool(client, namespace)
    renamed = await client.merge_patch(
        DGDS,
        POOL,
        {"spec": {"components": [{"name": "Gateway", "type": "frontend"}, WORKER]}},
        namespace,
    )
    await dynamos_services(client, renamed)  # the new name's, once Dynamo's operator made it
    await exports_become(client, namespace, {RELAY_SVC, f"{POOL}-gateway"})
    await wait_event(client, namespace, "ExportDeleted", name=FRONTEND_SVC)
    await second_pass_writes_nothing(mcs, namespace)


async def test_no_frontend_exports_the_relay_and_warns(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    await pool(client, namespace, [WORKER])
    await exports_become(client, namespace, {RELAY_SVC})
    dgd = await client.get(DGDS, POOL, namespace)
    warning = await wait_event(client, namespace, "NoFrontend", kind="DynamoGraphDeployment")
    assert warning["related"]["uid"] == dgd["metadata"]["uid"]
    assert warning["related"]["resourceVersion"] == dgd["metadata"]["resourceVersion"]
    assert warning["type"] == "Warning"
    await second_pass_writes_nothing(mcs, namespace)


async def test_invalid_frontend_service_name_is_not_exported(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    long_frontend = {"name": "f" * 60, "type": "frontend"}  # llama-fff... > 63 characters
    await pool(client, namespace, [long_frontend, WORKER])
    await exports_become(client, namespace, {RELAY_SVC})
    warning = await wait_event(client, namespace, "InvalidServiceName")
    assert "f" * 60 in warning["note"]
    await states_become(client, namespace, POOL, {f"{POOL}-{'f' * 60}": "Skipped"})
    await second_pass_writes_nothing(mcs, namespace)


# ---------------------------------------------------------------- ownership
async def test_users_export_is_neither_adopted_nor_deleted(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    mine = await client.create(SE, user_export(namespace, FRONTEND_SVC, labels={"team": "x"}))
    since = control_plane.audit.offset()
    await exported_pool(client, namespace)
    await mcs.settle()
    after = await existing_export(client, namespace, FRONTEND_SVC)
    assert after["metadata"]["resourceVersion"] == mine["metadata"]["resourceVersion"]
    touched = [
        w
        for w in await mcs.writes_since(since)
        if w.name == FRONTEND_SVC and w.namespace == namespace and w.resource == "serviceexports"
    ]
    assert touched == []
    await states_become(client, namespace, POOL, {FRONTEND_SVC: "Foreign"})
    # Withdrawal leaves it too.
    await client.delete(DGDS, POOL, namespace)
    await exports_become(client, namespace, {FRONTEND_SVC})
    await second_pass_writes_nothing(mcs, namespace)
    # Once the user deletes theirs (and the pool is back), the relay creates its own.
    await dynamos_services(client, await client.create(DGDS, dgd_body(POOL, namespace)))
    await client.delete(SE, FRONTEND_SVC, namespace)

    async def ours() -> bool:
        e = await export_obj(client, namespace, FRONTEND_SVC)
        return bool(e and e["metadata"].get("ownerReferences"))

    await eventually(ours)
    await second_pass_writes_nothing(mcs, namespace)


async def test_another_pools_service_and_export_are_left_alone(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    # Two pools whose frontends map to one Service name: the Service is the first DGD's,
    # and so is the export; the second pool skips the name and touches neither.
    await pool(client, namespace, [{"name": "x-frontend", "type": "frontend"}, WORKER], name="a")
    await exports_become(client, namespace, {"a-pool-relay", "a-x-frontend"})
    frontend = {"name": "frontend", "type": "frontend"}
    await client.create(DGDS, dgd_body("a-x", namespace, [frontend, WORKER]))
    await client.create(RELAYS, relay_body("a-x", namespace))
    await exports_become(client, namespace, {"a-pool-relay", "a-x-frontend", "a-x-pool-relay"})
    shared = await existing_export(client, namespace, "a-x-frontend")
    assert shared["metadata"]["ownerReferences"][0]["name"] == "a"
    lines = await states_become(client, namespace, "a-x", {"a-x-frontend": "Skipped"})
    assert lines["a-x-frontend"]["reason"] == "ForeignService"
    assert "DynamoGraphDeployment/a" in lines["a-x-frontend"]["message"]
    await second_pass_writes_nothing(mcs, namespace, "a-x")
    after = await existing_export(client, namespace, "a-x-frontend")
    assert after["metadata"]["resourceVersion"] == shared["metadata"]["resourceVersion"]


async def test_same_named_export_in_another_namespace_does_not_count(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    other = f"{namespace}-other"
    control_plane.create_namespace(other)
    try:
        await client.create(SE, user_export(other, FRONTEND_SVC))
        await exported_pool(client, namespace)
        e = await existing_export(client, namespace, FRONTEND_SVC)
        assert e["metadata"]["ownerReferences"][0]["kind"] == "DynamoPoolRelay"
    finally:
        control_plane.delete_namespace(other)


# ---------------------------------------------------------------- withdrawal
@pytest.mark.parametrize("cause", ["dgd-deleted", "no-workers", "etcd-discovery", "global-ns"])
async def test_withdrawal_reasons_withdraw_exports_and_keep_the_relay(
    client: Client, namespace: str, mcs: OperatorUnderTest, cause: str
) -> None:
    relay = await exported_pool(client, namespace)
    if cause == "dgd-deleted":
        await client.delete(DGDS, POOL, namespace)
    elif cause == "no-workers":
        await client.merge_patch(DGDS, POOL, {"spec": {"components": [FRONTEND]}}, namespace)
    elif cause == "etcd-discovery":
        await client.merge_patch(
            DGDS,
            POOL,
            {"metadata": {"annotations": {"nvidia.com/dynamo-discovery-backend": "etcd"}}},
            namespace,
        )
    else:
        await client.merge_patch(
            DGDS,
            POOL,
            {"spec": {"components": [FRONTEND, {**WORKER, "globalDynamoNamespace": True}]}},
            namespace,
        )
    await exports_become(client, namespace, set())
    assert (await client.get(RELAYS, POOL, namespace))["metadata"]["uid"] == relay["metadata"][
        "uid"
    ]
    await second_pass_writes_nothing(mcs, namespace)


async def test_new_dgd_of_the_same_name_is_exported_again(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    await exported_pool(client, namespace)
    await client.delete(DGDS, POOL, namespace)
    await exports_become(client, namespace, set())
    again = await client.create(
        DGDS, dgd_body(POOL, namespace, [{"name": "Api", "type": "frontend"}, WORKER])
    )
    await dynamos_services(client, again)
    await exports_become(client, namespace, {RELAY_SVC, f"{POOL}-api"})
    await second_pass_writes_nothing(mcs, namespace)


async def test_dgd_replaced_while_the_operator_was_stopped_swaps_the_exports(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    """Level-based: the operator never sees the DGD's absence (it is stopped while
    the DGD is replaced by one whose frontend is renamed), yet on start it withdraws
    the stale export, creates the new one and keeps the relay's own export (same
    uid), from the state alone."""
    await pool(client, namespace)
    await stopped_after_exporting(control_plane, client, namespace, {RELAY_SVC, FRONTEND_SVC})
    kept = await existing_export(client, namespace, RELAY_SVC)
    await client.delete(DGDS, POOL, namespace)
    renamed = [{"name": "Api", "type": "frontend"}, WORKER]
    await dynamos_services(client, await client.create(DGDS, dgd_body(POOL, namespace, renamed)))
    async with OperatorUnderTest(control_plane, config("mcs")) as op:
        await exports_become(client, namespace, {RELAY_SVC, f"{POOL}-api"})
        want = {RELAY_SVC: "Exported", f"{POOL}-api": "Exported"}
        lines = await states_become(client, namespace, POOL, want)
        assert set(lines) == set(want), lines
        again = await existing_export(client, namespace, RELAY_SVC)
        assert again["metadata"]["uid"] == kept["metadata"]["uid"]
        await second_pass_writes_nothing(op, namespace)


async def test_export_being_deleted_is_left_until_gone_then_recreated(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    await exported_pool(client, namespace)
    # An MCS implementation's finalizer holds the deletion; while it is being
    # deleted, someone changes the label we own: that must not be repaired.
    await client.merge_patch(
        SE, FRONTEND_SVC, {"metadata": {"finalizers": ["mcs.example/hold"]}}, namespace
    )
    held = await client.delete(SE, FRONTEND_SVC, namespace)
    assert held is not None
    await client.merge_patch(
        SE, FRONTEND_SVC, {"metadata": {"labels": {names.DGD_NAME: "x"}}}, namespace
    )
    await mcs.settle()
    e = await existing_export(client, namespace, FRONTEND_SVC)
    assert e["metadata"]["labels"][names.DGD_NAME] == "x", "an export being deleted was repaired"
    await second_pass_writes_nothing(mcs, namespace)
    await client.merge_patch(SE, FRONTEND_SVC, {"metadata": {"finalizers": None}}, namespace)

    async def recreated() -> bool:
        again = await export_obj(client, namespace, FRONTEND_SVC)
        return bool(again and again["metadata"]["uid"] != e["metadata"]["uid"])

    await eventually(recreated)
    await second_pass_writes_nothing(mcs, namespace)


async def test_export_already_gone_is_no_error(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    await exported_pool(client, namespace)
    await mcs.settle()
    await client.delete(SE, FRONTEND_SVC, namespace)
    await client.delete(DGDS, POOL, namespace)
    await exports_become(client, namespace, set())
    await mcs.settle()
    assert not await events_for(client, namespace, "ExportFailed")


# ---------------------------------------------------------------- repair
async def test_repair_restores_label_and_controller_reference_on_the_same_export(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    relay = await exported_pool(client, namespace)
    before = await existing_export(client, namespace, FRONTEND_SVC)
    ref = dict(before["metadata"]["ownerReferences"][0], blockOwnerDeletion=False)
    await client.merge_patch(
        SE,
        FRONTEND_SVC,
        {
            "metadata": {
                "labels": {names.DGD_NAME: "someone-else", "keep": "me"},
                "annotations": {"user": "note"},
                "ownerReferences": [ref],
            },
            "spec": {"exportedLabels": {"a": "b"}},
        },
        namespace,
    )

    async def repaired() -> dict[str, Any] | None:
        e = await export_obj(client, namespace, FRONTEND_SVC)
        if (
            e
            and e["metadata"]["labels"].get(names.DGD_NAME) == POOL
            and e["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] is True
        ):
            return e
        return None

    after = await eventually(repaired)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["metadata"]["labels"]["keep"] == "me"
    assert after["metadata"]["annotations"] == {"user": "note"}
    assert after["spec"] == {"exportedLabels": {"a": "b"}}
    assert after["metadata"]["ownerReferences"][0]["uid"] == relay["metadata"]["uid"]
    await wait_event(client, namespace, "ExportRepaired", name=FRONTEND_SVC)
    await second_pass_writes_nothing(mcs, namespace)


async def test_export_a_user_took_over_stays_theirs(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    await exported_pool(client, namespace)
    taken = await client.merge_patch(
        SE, FRONTEND_SVC, {"metadata": {"ownerReferences": None}}, namespace
    )
    await mcs.settle()
    e = await existing_export(client, namespace, FRONTEND_SVC)
    assert e["metadata"]["resourceVersion"] == taken["metadata"]["resourceVersion"]
    await client.delete(RELAYS, POOL, namespace)  # GC must not take it either
    await exports_become(client, namespace, {FRONTEND_SVC})


# ---------------------------------------------------------------- karmada
async def test_karmada_skips_and_withdraws_a_name_over_55_that_mcs_exports(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    frontend = {"name": "f" * 44, "type": "frontend"}  # llama- + 44 = 50 ok
    longer = {"name": "g" * 50, "type": "frontend"}  # llama- + 50 = 56 > 55
    await pool(client, namespace, [frontend, longer, WORKER])
    long_name = f"{POOL}-{'g' * 50}"
    await stopped_after_exporting(
        control_plane, client, namespace, {RELAY_SVC, f"{POOL}-{'f' * 44}", long_name}
    )
    async with OperatorUnderTest(control_plane, config("karmada")) as op:
        await exports_become(client, namespace, {RELAY_SVC, f"{POOL}-{'f' * 44}"})
        warning = await wait_event(client, namespace, "ServiceNameTooLong")
        assert long_name in warning["note"]
        await second_pass_writes_nothing(op, namespace)


# ---------------------------------------------------------------- cluster ID
async def test_cluster_id_check_follows_the_property_through_the_watch(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    await set_cluster_id(client, None)
    try:
        await pool(client, namespace, clusterId="east", name="p1")
        await pool(client, namespace, clusterId="east", name="p2")
        await exports_become(
            client, namespace, {"p1-pool-relay", "p1-frontend", "p2-pool-relay", "p2-frontend"}
        )
        await mcs.settle()
        assert await mismatches(client, namespace, "p1") == []  # no property: skipped
        await set_cluster_id(client, "west")
        for name in ("p1", "p2"):
            await eventually(lambda n=name: mismatches(client, namespace, n))
        prop = await client.get(CLUSTER_PROPERTIES, CLUSTER_ID)
        ev = (await mismatches(client, namespace, "p1"))[0]
        assert ev["related"]["resourceVersion"] == prop["metadata"]["resourceVersion"]
        assert "'west'" in ev["note"]
        # Equal IDs: no new mismatch for a changed property.
        await set_cluster_id(client, "east")
        await mcs.settle()
        count = len(await events_for(client, namespace, "ClusterIDMismatch"))
        await mcs.reconcile_again((namespace, "p1"), include_events=True)
        assert len(await events_for(client, namespace, "ClusterIDMismatch")) == count
        # Deleted then created again with another value: the pools follow.
        await set_cluster_id(client, None)
        await set_cluster_id(client, "north")

        async def north() -> bool:
            for n in ("p1", "p2"):
                if not any("'north'" in e["note"] for e in await mismatches(client, namespace, n)):
                    return False
            return True

        await eventually(north)
    finally:
        await set_cluster_id(client, None)


async def test_empty_cluster_id_value_skips_the_check(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    # The CRD requires a non-empty value; "no value" reaches us only from older CRDs, so
    # the empty case is covered by the plan's unit tests. Here: an absent property.
    await set_cluster_id(client, None)
    await exported_pool(client, namespace, clusterId="east")
    await mcs.settle()
    assert await mismatches(client, namespace, POOL) == []


# ---------------------------------------------------------------- GC, events, off
async def test_garbage_collection_removes_exports_with_the_relay(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    await exported_pool(client, namespace)
    await client.delete(RELAYS, POOL, namespace)
    await exports_become(client, namespace, set())


async def test_a_warning_repeated_on_an_unchanged_dgd_is_one_event_series(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    """Passes that meet the same problem about the same DGD version fold into one Event,
    though each pass's own status write moved the relay's resourceVersion; a DGD edit
    (the related object at a new version) starts a new Event."""
    await pool(client, namespace, [WORKER])
    await exports_become(client, namespace, {RELAY_SVC})
    await wait_event(client, namespace, "NoFrontend")
    await mcs.settle()
    await mcs.reconcile_again((namespace, POOL), include_events=True)
    await mcs.running.recorder.wait_idle()
    events = await events_for(client, namespace, "NoFrontend")
    assert len(events) == 1, f"{len(events)} Events for one problem: {_series(events)}"
    assert int((events[0].get("series") or {}).get("count") or 1) >= 2, _series(events)

    await client.merge_patch(DGDS, POOL, {"metadata": {"labels": {"edited": "yes"}}}, namespace)
    dgd_rv = (await client.get(DGDS, POOL, namespace))["metadata"]["resourceVersion"]
    await wait_event(client, namespace, "NoFrontend", resourceVersion=dgd_rv)
    await mcs.settle()
    await mcs.running.recorder.wait_idle()
    events = await events_for(client, namespace, "NoFrontend")
    assert len(events) == 2, f"the edited DGD's warning: {_series(events)}"


def _series(events: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    return [
        (
            e["regarding"].get("resourceVersion", ""),
            (e.get("related") or {}).get("resourceVersion", ""),
            int((e.get("series") or {}).get("count") or 1),
        )
        for e in events
    ]


async def test_feature_off_withdraws_our_exports_once_at_startup(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    await pool(client, namespace)
    await client.create(SE, user_export(namespace, "users-own", labels={names.DGD_NAME: POOL}))
    await stopped_after_exporting(
        control_plane, client, namespace, {RELAY_SVC, FRONTEND_SVC, "users-own"}
    )
    async with OperatorUnderTest(control_plane, config("")) as op:
        await exports_become(client, namespace, {"users-own"})
        await op.settle()
        assert await export_obj(client, namespace, "users-own") is not None


async def test_a_changed_cluster_id_starts_a_new_mismatch_series_with_its_own_note(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    """The relay the warning is about is named at the version read: a changed
    spec.clusterId is another relay version, so its warning is not folded into the
    old series (whose note still names the old ID)."""
    await set_cluster_id(client, "east")
    try:
        await pool(client, namespace, clusterId="west")
        await eventually(lambda: mismatches(client, namespace, POOL))
        await client.merge_patch(RELAYS, POOL, {"spec": {"clusterId": "north"}}, namespace)

        async def north() -> list[dict[str, Any]]:
            return [e for e in await mismatches(client, namespace, POOL) if "'north'" in e["note"]]

        events = await eventually(north)
        relay = await client.get(RELAYS, POOL, namespace)
        for event in events:
            assert event["regarding"]["resourceVersion"], "the relay is named at a version"
            assert int(event["regarding"]["resourceVersion"]) <= int(
                relay["metadata"]["resourceVersion"]
            )
    finally:
        await set_cluster_id(client, None)


async def test_the_status_and_the_pods_show_the_effective_cluster_id(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    """Without spec.clusterId the relay takes the cluster's own ID (mcs: the About API
    property), shows it in status.clusterId and passes it to its pods; with one set,
    the spec wins (and a mismatch is warned about)."""

    async def shown() -> tuple[str, str]:
        status = (await client.get(RELAYS, POOL, namespace)).get("status") or {}
        dep = await client.get(DEPLOYMENTS, RELAY_SVC, namespace)
        env = {
            e["name"]: e.get("value")
            for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        return str(status.get("clusterId", "")), str(env.get("DYN_CLUSTER_ID", ""))

    await set_cluster_id(client, "east-1")
    try:
        await exported_pool(client, namespace)

        async def is_(want: str) -> bool:
            return await shown() == (want, want)

        await eventually(lambda: is_("east-1"))
        await set_cluster_id(client, "east-2")
        await eventually(lambda: is_("east-2"))
        assert await mismatches(client, namespace, POOL) == []
        await client.merge_patch(RELAYS, POOL, {"spec": {"clusterId": "west"}}, namespace)
        await eventually(lambda: is_("west"))
        await eventually(lambda: mismatches(client, namespace, POOL))
        await second_pass_writes_nothing(mcs, namespace)
    finally:
        await set_cluster_id(client, None)


async def test_a_cluster_id_mismatch_is_not_ready_and_names_both_ids(
    client: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    """The Global Discovery Service joins a pool only when the relay's clusterId equals
    the cluster's: a mismatch is `ClusterIDMatched=False ClusterIDMismatch` naming both
    IDs, and Ready is not True (its reason in this tier is the relay pods', which no
    kubelet runs here; docs/crd.md's order); fixing spec.clusterId clears it."""
    await set_cluster_id(client, "east")
    try:
        await pool(client, namespace, clusterId="west")

        async def mismatched() -> dict[str, Any] | None:
            said = await conditions_of(client, namespace)
            found = said.get("ClusterIDMatched")
            return said if found and found["reason"] == "ClusterIDMismatch" else None

        said = await eventually(mismatched)
        assert said["ClusterIDMatched"]["status"] == "False"
        assert "'west'" in said["ClusterIDMatched"]["message"]
        assert "'east'" in said["ClusterIDMatched"]["message"]
        assert said["Ready"]["status"] == "False"
        await client.merge_patch(RELAYS, POOL, {"spec": {"clusterId": "east"}}, namespace)

        async def matched() -> bool:
            found = (await conditions_of(client, namespace)).get("ClusterIDMatched")
            return found is not None and found["status"] == "True"

        await eventually(matched)
        await mcs.settle()
        assert await mcs.reconcile_again((namespace, POOL)) == []
    finally:
        await set_cluster_id(client, None)


async def test_an_export_nobody_confirms_is_never_exported_and_is_warned_about(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    """With `confirmation: valid` (the default with mcs) an export on which no
    implementation writes a condition stays `Exported=Unknown`: `Pending`, then, after
    `unconfirmedAfter`, `Unconfirmed` with one Warning naming the export — never True."""
    cfg = config("mcs", multiCluster={"mcsImplementation": "mcs", "unconfirmedAfter": "2s"})
    async with OperatorUnderTest(control_plane, cfg) as op:
        await exported_pool(client, namespace)

        async def exported() -> dict[str, Any] | None:
            return (await conditions_of(client, namespace)).get("Exported")

        pending = await eventually(exported)
        assert (pending["status"], pending["reason"]) == ("Unknown", "Pending"), pending

        async def unconfirmed() -> dict[str, Any] | None:
            c = await exported()
            return c if c and c["reason"] == "Unconfirmed" else None

        said = await eventually(unconfirmed, timeout=20)
        assert said["status"] == "Unknown"
        assert "multiCluster.confirmation: none" in said["message"]
        warned = await wait_event(client, namespace, "Unconfirmed")
        assert warned["type"] == "Warning"
        assert warned["related"]["kind"] == "ServiceExport"
        await op.settle()
        assert await op.reconcile_again((namespace, POOL)) == []


async def test_with_no_confirmation_an_export_that_exists_is_exported(
    client: Client, namespace: str, karmada: OperatorUnderTest
) -> None:
    """Karmada writes no condition on a member's exports: its default is `confirmation:
    none`, so an export that exists is `Exported=True ExportExists`, at once."""
    await exported_pool(client, namespace)

    async def exists() -> bool:
        c = (await conditions_of(client, namespace)).get("Exported")
        return bool(c) and (c["status"], c["reason"]) == ("True", "ExportExists")

    await eventually(exists)
    await karmada.settle()
    assert await karmada.reconcile_again((namespace, POOL)) == []
