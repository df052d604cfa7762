"""Failed export writes and failed reads, injected by the real API server.

Rules: docs/exports.md, 'Ownership, repair and withdrawal' (a refused write is
retried with backoff, never given up) and 'RBAC' (the ClusterProperty reader role).

- A ValidatingAdmissionPolicy refuses one export write by the operator's user: the
  write fails, the reconcile returns the error, a Warning `ExportFailed` names the
  export, and once the policy is gone the queue's retries alone (nothing else
  changes) make it converge.
- An operator running as a user without the ClusterProperty read cannot check the
  cluster ID: `ExportFailed` about the property, retried until the role is granted.
  Once granted, the property cache's sync (with no property: no event) requeues every
  relay at once, a withdrawn one (whose pass raised nothing) included.
- A namespace-restricted operator (a Role in its namespace, a ClusterRole only for
  ClusterProperties) still gets the property's events, and touches no other namespace.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.pool.model import Verb
from dynamo_pool_operator.runtime.cache.informer import Informer
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, EVENTS
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.export_fixtures import (
    CLUSTER_ID,
    CLUSTER_PROPERTIES,
    SE,
    config,
    events_for,
    existing_export,
    export_obj,
    exports_become,
    relay_status,
    set_cluster_id,
    stopped_after_exporting,
    wait_event,
)
from tests.integration.support.race_fixtures import (
    CLUSTER_PROPERTY_RULES,
    FRONTEND_SVC,
    OPERATOR_RULES,
    POOL,
    RELAY_SVC,
    Grants,
    deny_export_writes,
    export_states,
    make_pool,
    mismatches,
    state_becomes,
    writes_nothing,
)
from tests.integration.support.relay_fixtures import (
    DGDS,
    FRONTEND,
    RELAYS,
    WORKER,
    condition,
    decision_of,
    dynamos_services,
    relay_body,
)
from tests.integration.support.spies import Spy, WritePause, export_writes, verbs
from tests.integration.support.waiting import eventually_or

pytestmark = pytest.mark.timeout(90)

CHAT = {"name": "Chat", "type": "frontend", "replicas": 1}
CHAT_SVC = f"{POOL}-chat"
GATEWAY_SVC = f"{POOL}-gateway"


async def steady_pool(client: Client, ns: str, op: OperatorUnderTest) -> None:
    """A published pool whose relay is Ready and whose operator has nothing queued."""
    await make_pool(client, ns)
    await exports_become(client, ns, {RELAY_SVC, FRONTEND_SVC})

    async def is_ready() -> bool:
        cond = await decision_of(client, ns, POOL)
        return bool(cond and cond["status"] == "True")

    await eventually(is_ready)
    await op.settle()


async def reconcile_fails(op: OperatorUnderTest, ns: str, export: str) -> None:
    """One more pass by hand returns the failed write as its error.

    The operator's own worker retries the same key meanwhile, so a hand pass may lose a
    race to it (both create the same object: one gets a 409). Such a pass returns a
    requeue and no error by design (its retry decides from fresh state), so the hand pass
    is repeated then, a few times at most: the failed write must still come back as the
    error."""
    failed: Exception | None = None
    for _ in range(5):
        try:
            result = await op.running.reconciler.reconcile((ns, POOL))
        except Exception as e:  # an ApiError or ReconcileErrors
            failed = e
            break
        assert result is not None, "a pass by hand raised nothing and asked for nothing"
        assert result.requeue, f"a pass by hand raised nothing: {result}"
    if failed is None:
        pytest.fail(f"five passes by hand in a row lost a race; none returned the failed {export}")
    assert export in str(failed), failed


# ---------------------------------------------------------------- refused writes
async def test_refused_create_is_recorded_retried_and_converges_when_lifted(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    await steady_pool(client, namespace, mcs)
    since = control_plane.audit.offset()
    spy = Spy(mcs)
    async with deny_export_writes(control_plane, client, namespace, CHAT_SVC, "CREATE"):
        patched = await client.merge_patch(
            DGDS, POOL, {"spec": {"components": [FRONTEND, CHAT, WORKER]}}, namespace
        )
        await dynamos_services(client, patched)
        event = await wait_event(client, namespace, "ExportFailed", name=CHAT_SVC)
        assert event["type"] == "Warning"
        assert event["related"]["kind"] == "ServiceExport"
        assert event["regarding"]["name"] == POOL
        assert "denied request" in event["note"]
        await reconcile_fails(mcs, namespace, CHAT_SVC)
        await state_becomes(client, namespace, CHAT_SVC, "Failed")
        refused = await export_writes(mcs, since, namespace, CHAT_SVC)
        assert refused
        assert all((w.verb, w.code) == ("create", 422) for w in refused), verbs(refused)
        assert [e for e in spy.errors_of(namespace) if CHAT_SVC in str(e)]
        # The failed export held back nothing else.
        assert (await export_states(client, namespace))[FRONTEND_SVC] == "Exported"
        dgd_version = (await client.get(DGDS, POOL, namespace))["metadata"]["resourceVersion"]
        generation = (await client.get(RELAYS, POOL, namespace))["metadata"]["generation"]
    # Nothing else changes from here: only the queue's retries can requeue the relay.
    await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC, CHAT_SVC})
    await state_becomes(client, namespace, CHAT_SVC, "Exported")
    created = await existing_export(client, namespace, CHAT_SVC)
    assert created["metadata"]["ownerReferences"][0]["name"] == POOL
    await wait_event(client, namespace, "ExportCreated", name=CHAT_SVC)
    assert (await client.get(DGDS, POOL, namespace))["metadata"]["resourceVersion"] == dgd_version
    assert (await client.get(RELAYS, POOL, namespace))["metadata"]["generation"] == generation
    await writes_nothing(mcs, namespace)


async def test_refused_delete_is_recorded_retried_and_converges_when_lifted(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    await steady_pool(client, namespace, mcs)
    export = await existing_export(client, namespace, FRONTEND_SVC)
    since = control_plane.audit.offset()
    async with deny_export_writes(control_plane, client, namespace, FRONTEND_SVC, "DELETE"):
        # Renaming the frontend withdraws its export.
        patched = await client.merge_patch(
            DGDS,
            POOL,
            {"spec": {"components": [{"name": "Gateway", "type": "frontend"}, WORKER]}},
            namespace,
        )
        await dynamos_services(client, patched)
        event = await wait_event(client, namespace, "ExportFailed", name=FRONTEND_SVC)
        assert event["type"] == "Warning"
        assert event["related"]["uid"] == export["metadata"]["uid"]
        assert event["action"] == "Delete", "the same word as the ExportDeleted it failed to be"
        await reconcile_fails(mcs, namespace, FRONTEND_SVC)
        refused = await export_writes(mcs, since, namespace, FRONTEND_SVC)
        assert refused
        assert all((w.verb, w.code) == ("delete", 422) for w in refused), verbs(refused)
        # The new frontend's export did not wait for the failed withdrawal.
        await existing_export(client, namespace, GATEWAY_SVC)
        dgd_version = (await client.get(DGDS, POOL, namespace))["metadata"]["resourceVersion"]
    await exports_become(client, namespace, {RELAY_SVC, GATEWAY_SVC})
    await wait_event(client, namespace, "ExportDeleted", name=FRONTEND_SVC)
    assert (await client.get(DGDS, POOL, namespace))["metadata"]["resourceVersion"] == dgd_version
    assert set(await export_states(client, namespace)) == {RELAY_SVC, GATEWAY_SVC}
    await writes_nothing(mcs, namespace)


async def test_refused_repair_is_recorded_as_export_failed_and_retried(
    client: Client, namespace: str, mcs: OperatorUnderTest, control_plane: ControlPlane
) -> None:
    """A repair the server refuses for another reason than a lost race (here an
    admission policy) is a failed write like any other (docs/exports.md, 'Ownership, repair and
    withdrawal': only a 409 or a taken name is a lost race)."""
    await steady_pool(client, namespace, mcs)
    export = await existing_export(client, namespace, FRONTEND_SVC)
    async with WritePause(mcs, Verb.APPLY, FRONTEND_SVC, namespace) as pause:
        await client.merge_patch(
            SE, FRONTEND_SVC, {"metadata": {"labels": {names.DGD_NAME: "drifted"}}}, namespace
        )
        await pause.reached()
        spy = Spy(mcs)
        async with deny_export_writes(control_plane, client, namespace, FRONTEND_SVC, "UPDATE"):
            await pause.release()
            assert "denied request" in str(pause.error), "the policy did not refuse the repair"

            async def recorded() -> bool:
                return bool(spy.emitted(namespace, "ExportFailed"))

            await eventually(recorded, timeout=3)
            event = await wait_event(client, namespace, "ExportFailed", name=FRONTEND_SVC)
            assert event["related"]["uid"] == export["metadata"]["uid"]

    async def repaired() -> bool:
        e = await export_obj(client, namespace, FRONTEND_SVC)
        return bool(e and e["metadata"]["labels"][names.DGD_NAME] == POOL)

    await eventually(repaired)
    await wait_event(client, namespace, "ExportRepaired", name=FRONTEND_SVC)
    await writes_nothing(mcs, namespace)


async def test_a_skipped_export_whose_withdrawal_fails_is_one_status_line(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    """With Karmada a name over 55 characters is skipped and, when the relay controls
    its export, withdrawn. A refused withdrawal used to add a `Failed` line beside the
    `Skipped` one: two lines of one name, and the API server refused every status write
    (status.exports is a list keyed by name)."""
    long_frontend = {"name": "g" * 50, "type": "frontend"}
    long_name = f"{POOL}-{'g' * 50}"
    await make_pool(client, namespace, [long_frontend, WORKER])
    await stopped_after_exporting(control_plane, client, namespace, {RELAY_SVC, long_name})
    op = OperatorUnderTest(control_plane, config("karmada"))
    try:
        async with deny_export_writes(control_plane, client, namespace, long_name, "DELETE"):
            await op.start()

            async def one_failed_line() -> list[dict[str, Any]] | None:
                lines = (await relay_status(client, namespace, POOL)).get("exports") or []
                mine = [x for x in lines if x["name"] == long_name]
                return mine if [x["state"] for x in mine] == ["Failed"] else None

            (line,) = await eventually(one_failed_line)
            assert "denied request" in line["message"]
        # Lifted: the retries alone withdraw it, and the line goes back to Skipped.
        await exports_become(client, namespace, {RELAY_SVC})
        await state_becomes(client, namespace, long_name, "Skipped")
        await writes_nothing(op, namespace)
    finally:
        await op.stop()


async def test_a_refused_feature_off_cleanup_is_retried_and_never_stops_the_operator(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    """Turning exports off withdraws what the operator exported before. A refused
    delete (here an admission policy; a 5xx or a list timeout alike) used to escape the
    leader's startup: exit 1, nothing reconciled. It is retried with backoff in the
    background, each refusal logged and counted, and the relays are served meanwhile."""
    await make_pool(client, namespace)
    await stopped_after_exporting(control_plane, client, namespace, {RELAY_SVC, FRONTEND_SVC})
    op = OperatorUnderTest(control_plane, config(""))
    try:
        async with deny_export_writes(control_plane, client, namespace, FRONTEND_SVC, "DELETE"):
            await op.start()
            await exports_become(client, namespace, {FRONTEND_SVC})
            await make_pool(client, namespace, name="other")

            async def other_published() -> bool:
                cond = await decision_of(client, namespace, "other")
                return bool(cond and cond["status"] == "True")

            await eventually(other_published)

            async def refused_twice() -> bool:
                value = op.registry.get_sample_value(
                    "dynamo_pool_operator_export_cleanup_failures_total"
                )
                return (value or 0.0) >= 2

            await eventually(refused_twice)
        await exports_become(client, namespace, set(), timeout=30)
    finally:
        await op.stop()


# ---------------------------------------------------------------- restricted users
async def granted_properties(
    grants: Grants, user: str, op: OperatorUnderTest, timeout: float
) -> Informer:
    """Grant `user` the ClusterProperty reader role; `synced_properties`."""
    await grants.grant(f"{user}-clusterproperties", CLUSTER_PROPERTY_RULES)
    return await synced_properties(op, timeout)


async def synced_properties(op: OperatorUnderTest, timeout: float = 20) -> Informer:
    """The operator's ClusterProperty cache, once it has synced."""
    exports = op.running.exports
    assert exports is not None
    props = exports.cluster_properties
    assert props is not None

    async def readable() -> bool:
        return props.has_synced

    await eventually(readable, timeout=timeout)
    return props


async def test_unreadable_cluster_property_is_export_failed_until_the_read_is_granted(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    user = f"dpo-noprops-{namespace}"
    grants = Grants(control_plane, user)
    await grants.grant(user, OPERATOR_RULES)
    await set_cluster_id(client, "east")  # equal to the relay's: no mismatch once readable
    try:
        kubeconfig = control_plane.user_kubeconfig(user)
        async with OperatorUnderTest(control_plane, config("mcs"), kubeconfig=kubeconfig) as op:
            spy = Spy(op)
            await make_pool(client, namespace, clusterId="east")
            event = await wait_event(client, namespace, "ExportFailed", kind="ClusterProperty")
            assert event["type"] == "Warning"
            assert event["related"]["name"] == CLUSTER_ID
            assert "ClusterProperty" in event["note"]
            # The exports do not wait for the check.
            await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})

            async def retried() -> bool:
                return len(spy.errors_of(namespace)) >= 2

            await eventually(retried)
            await granted_properties(grants, user, op, timeout=30)
            await op.settle()
            await state_becomes(client, namespace, FRONTEND_SVC, "Exported")
            failed = len(spy.emitted(namespace, "ExportFailed"))
            errs = len(spy.errors_of(namespace))
            await writes_nothing(op, namespace)
            await op.settle()
            assert len(spy.emitted(namespace, "ExportFailed")) == failed, "failing once granted"
            assert len(spy.errors_of(namespace)) == errs
            assert await mismatches(client, namespace) == []
    finally:
        await grants.revoke_all()
        await set_cluster_id(client, None)


async def test_cluster_property_cache_still_filling_is_not_a_failed_read(
    client: Client,
    namespace: str,
    control_plane: ControlPlane,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At startup the ClusterProperty list may finish after the caches the controller
    waits for (a slow or retried first list; here held 1.5 s in our own informer). A
    read that has not completed yet is no failed read: no Warning, no error."""
    await set_cluster_id(client, "east")
    await make_pool(client, namespace, clusterId="east")
    listed = Informer._list

    async def slow_list(self: Informer) -> None:
        if self.resource.plural == "clusterproperties":
            await asyncio.sleep(1.5)
        await listed(self)

    monkeypatch.setattr(Informer, "_list", slow_list)
    try:
        async with OperatorUnderTest(control_plane, config("mcs")) as op:
            await synced_properties(op)
            await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})
            await op.settle()
        # The operator has stopped: its recorder has written every event.
        assert await events_for(client, namespace, "ExportFailed") == []
    finally:
        await set_cluster_id(client, None)


async def test_namespace_restricted_operator_gets_cluster_property_events(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    other = f"t-{uuid.uuid4().hex[:10]}"
    await asyncio.to_thread(control_plane.create_namespace, other)
    user = f"dpo-ns-{namespace}"
    grants = Grants(control_plane, user)
    await grants.grant(user, OPERATOR_RULES, namespace)
    await grants.grant(f"{user}-clusterproperties", CLUSTER_PROPERTY_RULES)
    await set_cluster_id(client, None)
    cfg = config("mcs", namespace={"restricted": namespace}, leaderElection={"enabled": False})
    try:
        await make_pool(client, namespace, clusterId="east")
        await make_pool(client, other, clusterId="east")
        since = control_plane.audit.offset()
        kubeconfig = control_plane.user_kubeconfig(user)
        async with OperatorUnderTest(control_plane, cfg, kubeconfig=kubeconfig) as op:
            spy = Spy(op)
            await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})
            await op.settle()
            await set_cluster_id(client, "east")  # created, equal: nothing to say
            await op.settle()
            assert await mismatches(client, namespace) == []
            await set_cluster_id(client, "west")  # changed: only its watch can tell
            found = await eventually(lambda: mismatches(client, namespace))
            prop = await client.get(CLUSTER_PROPERTIES, CLUSTER_ID)
            assert found[0]["type"] == "Warning"
            assert found[0]["related"]["kind"] == "ClusterProperty"
            assert found[0]["related"]["resourceVersion"] == prop["metadata"]["resourceVersion"]
            assert "'west'" in found[0]["note"]
            await writes_nothing(op, namespace)
            assert spy.emitted(namespace, "ExportFailed") == []
            assert spy.errors_of(namespace) == []
        # The relay in the other namespace was not touched.
        writes = await asyncio.to_thread(control_plane.audit.writes, since, user=user)
        assert writes, "the restricted operator wrote nothing at all"
        assert {w.namespace for w in writes} == {namespace}
        assert await relay_status(client, other, POOL) == {}
        assert (await client.list(SE, other)).items == []
        assert (await client.list(DEPLOYMENTS, other)).items == []
        assert (await client.list(EVENTS, other)).items == []
        assert await events_for(client, namespace, "ExportFailed") == []
    finally:
        await grants.revoke_all()
        await set_cluster_id(client, None)
        await asyncio.to_thread(control_plane.delete_namespace, other)


async def cluster_id_said(client: Client, ns: str, name: str) -> tuple[str, str, str]:
    said = await condition(client, ns, name, "ClusterIDMatched")
    return ("", "", "") if said is None else (said["status"], said["reason"], said["message"])


async def test_a_cluster_property_read_that_recovers_requeues_every_relay(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    """A namespace-restricted install that forgot the ClusterProperty reader role, and no
    property in the cluster: a withdrawn relay (its pass raises nothing) and a published
    one (retried with backoff) say the property is unreadable. Once the role is bound,
    the cache syncs with no object (no event): its sync alone must requeue both, at
    once rather than at the next retry, and the withdrawn relay's words must not speak
    of a Deployment it does not want."""
    user = f"dpo-lateprops-{namespace}"
    grants = Grants(control_plane, user)
    await grants.grant(user, OPERATOR_RULES, namespace)
    await set_cluster_id(client, None)
    cfg = config("mcs", namespace={"restricted": namespace}, leaderElection={"enabled": False})
    withdrawn = "nodgd"
    try:
        await client.create(RELAYS, relay_body(withdrawn, namespace))
        await make_pool(client, namespace)
        kubeconfig = control_plane.user_kubeconfig(user)
        async with OperatorUnderTest(control_plane, cfg, kubeconfig=kubeconfig) as op:

            async def both_unreadable() -> bool:
                said = [await cluster_id_said(client, namespace, n) for n in (withdrawn, POOL)]
                return all(s[:2] == ("Unknown", "ClusterPropertyUnreadable") for s in said)

            await eventually(both_unreadable)
            published = await decision_of(client, namespace, withdrawn)
            assert published is not None
            assert published["reason"] == "DGDNotFound", published
            message = (await cluster_id_said(client, namespace, withdrawn))[2]
            assert "Deployment" not in message, message
            props = await granted_properties(grants, user, op, timeout=45)
            synced = time.monotonic()
            assert len(props.store) == 0

            async def both_corrected() -> bool:
                said = [await cluster_id_said(client, namespace, n) for n in (withdrawn, POOL)]
                return all(s[:2] == ("True", "NoClusterProperty") for s in said)

            async def instead() -> str:
                said = {n: await cluster_id_said(client, namespace, n) for n in (withdrawn, POOL)}
                return (
                    f"{time.monotonic() - synced:.1f}s after the ClusterProperty cache synced "
                    f"the relays still say {said}"
                )

            await eventually_or(both_corrected, instead, timeout=3)
    finally:
        await grants.revoke_all()


async def test_an_unreadable_cluster_property_never_changes_the_relay_pods(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    """A relay without spec.clusterId runs with the cluster's own ID. An operator that
    cannot read the property (restarted without the reader role) keeps the last known
    ID: the relay Deployment is not written (no pod rolls), status.clusterId stays, and
    Ready says why; once the read is granted nothing is written but the status."""
    await set_cluster_id(client, "east")
    user = f"dpo-lostprops-{namespace}"
    grants = Grants(control_plane, user)
    await grants.grant(user, OPERATOR_RULES)
    try:
        async with OperatorUnderTest(control_plane, config("mcs")) as op:
            await make_pool(client, namespace)
            await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})

            async def east() -> bool:
                return (await relay_status(client, namespace, POOL)).get("clusterId") == "east"

            await eventually(east)
            await op.settle()
        deployment = await client.get(DEPLOYMENTS, RELAY_SVC, namespace)
        env = {
            e["name"]: e.get("value")
            for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        assert env["DYN_CLUSTER_ID"] == "east"
        since = control_plane.audit.offset()
        kubeconfig = control_plane.user_kubeconfig(user)
        async with OperatorUnderTest(control_plane, config("mcs"), kubeconfig=kubeconfig) as op:
            await wait_event(client, namespace, "ExportFailed", kind="ClusterProperty")

            async def says_why() -> dict[str, Any] | None:
                status = await relay_status(client, namespace, POOL)
                ready = next(
                    (c for c in status.get("conditions", []) if c["type"] == "Ready"), None
                )
                return status if ready and ready["status"] != "True" else None

            status = await eventually(says_why)
            assert status["clusterId"] == "east", status
            assert "ClusterProperty" in str(status["conditions"]), status["conditions"]
            writes = [
                (w.verb, w.resource)
                for w in await op.writes_since(since)
                if w.namespace == namespace and w.resource == "deployments"
            ]
            assert writes == [], "the relay Deployment was written without the cluster's ID"
            after = await client.get(DEPLOYMENTS, RELAY_SVC, namespace)
            assert after["metadata"]["generation"] == deployment["metadata"]["generation"]
            await grants.grant(f"{user}-clusterproperties", CLUSTER_PROPERTY_RULES)

            async def matched_again() -> bool:
                status = await relay_status(client, namespace, POOL)
                said = next(c for c in status["conditions"] if c["type"] == "ClusterIDMatched")
                return said["status"] == "True" and status["clusterId"] == "east"

            await eventually(matched_again, timeout=40)
            await op.settle()
            final = await client.get(DEPLOYMENTS, RELAY_SVC, namespace)
            assert final["metadata"]["generation"] == deployment["metadata"]["generation"]
    finally:
        await grants.revoke_all()
        await set_cluster_id(client, None)
