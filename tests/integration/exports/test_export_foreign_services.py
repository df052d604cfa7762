"""A frontend is exported only once its Service exists and while it is the DGD's
(docs/exports.md, 'What is exported'), against a real API server.

A DGD author names the Services her pool exports by naming its frontends: `<dgd>-<component>`.
Exporting announces a Service to every cluster of the ClusterSet, so a DGD `payments` with a
frontend `db` must not make the operator export a Service `payments-db` another team made:
`alice` (tests/integration/support/tenants.py) may create DGDs and relays, not
ServiceExports. Dynamo's
operator controls the Services it makes for a DGD: by the DGD itself (the Grove path) or by
a DynamoComponentDeployment the DGD controls. Any other Service of that name is skipped with
a Warning naming its controller, and an export of ours of that name is withdrawn. Nor is a
frontend exported before its Service exists: the export would claim the name for whoever
makes a Service of it next, and sit beside theirs until a pass saw whose it was.

The Services (and DCDs) are made by the admin `client`, playing the other team or Dynamo's
operator; the pool by `alice`, who also reads what she is told (status, Events).
"""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.api.dgd import DCD_KIND, DCD_PLURAL
from dynamo_pool_operator.api.dgd import GROUP as DGD_GROUP
from dynamo_pool_operator.localcluster import dynamo
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES, Resource
from tests.harness import OperatorUnderTest
from tests.integration.support.export_fixtures import (
    conditions_of,
    export_names,
    export_obj,
    exports_become,
    relay_status,
    states_become,
    wait_event,
)
from tests.integration.support.objects import controller_ref, deployment
from tests.integration.support.relay_fixtures import DGDS, RELAYS, WORKER, dgd_body, relay_body

POOL = "payments"
RELAY_SVC = f"{POOL}-pool-relay"
DB = {"name": "db", "type": "frontend", "replicas": 1}
DB_SVC = f"{POOL}-db"
DCDS = Resource(DGD_GROUP, "v1alpha1", DCD_PLURAL, DCD_KIND)  # the test CRD's


async def second_pass_writes_nothing(op: OperatorUnderTest, ns: str) -> None:
    writes = await op.reconcile_again((ns, POOL))
    assert writes == [], f"second reconcile wrote: {[(w.verb, w.resource, w.name) for w in writes]}"


async def alices_pool(alice: Client, ns: str) -> dict[str, Any]:
    """DGD `payments` with a frontend `db`, and its relay: what alice may make."""
    dgd = await alice.create(DGDS, dgd_body(POOL, ns, [DB, WORKER]))
    await alice.create(RELAYS, relay_body(POOL, ns))
    return dgd


def service_body(ns: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": DB_SVC, "namespace": ns}
    if owner is not None:
        meta["ownerReferences"] = [controller_ref(owner)]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "selector": {"app": "payments-db"},
            "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}],
        },
    }


async def other_teams_deployment(client: Client, ns: str) -> dict[str, Any]:
    """The database team's Deployment (no pods here: no nodes), their Service's controller."""
    db = {"name": "db", "image": "postgres:17", "securityContext": dynamo.RESTRICTED_CONTAINER}
    body = deployment("ledger-db", ns, "payments-db", db)
    return await client.create(DEPLOYMENTS, body)


async def dcd(client: Client, ns: str, owner: dict[str, Any] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": DB_SVC, "namespace": ns}
    if owner is not None:
        meta["ownerReferences"] = [controller_ref(owner)]
    body = {"apiVersion": DCDS.api_version, "kind": DCD_KIND, "metadata": meta, "spec": {}}
    return await client.create(DCDS, body)


async def skipped_naming(alice: Client, ns: str, who: str) -> None:
    """The export line says ForeignService naming `who`, and so does a Warning Event
    related to the Service, both as alice reads them."""
    lines = await states_become(alice, ns, POOL, {DB_SVC: "Skipped"})
    line = lines[DB_SVC]
    assert line.get("reason") == "ForeignService", line
    assert who in line.get("message", ""), line
    event = await wait_event(alice, ns, "ForeignService", kind="Service", name=DB_SVC)
    assert event["type"] == "Warning"
    assert who in event["note"], event["note"]
    assert event["regarding"]["name"] == POOL


@pytest.mark.parametrize("owned", [True, False], ids=["another-teams-deployment", "no-owner"])
async def test_a_service_someone_else_made_is_not_exported_for_a_dgd_naming_it(
    client: Client, alice: Client, namespace: str, mcs: OperatorUnderTest, owned: bool
) -> None:
    owner = await other_teams_deployment(client, namespace) if owned else None
    await client.create(SERVICES, service_body(namespace, owner))
    await alices_pool(alice, namespace)
    await states_become(alice, namespace, POOL, {RELAY_SVC: "Exported"})
    assert await export_obj(client, namespace, DB_SVC) is None, (
        f"ServiceExport {DB_SVC} was created for a Service alice's DGD does not control"
    )
    await skipped_naming(alice, namespace, "Deployment/ledger-db" if owned else "no controller")
    await second_pass_writes_nothing(mcs, namespace)
    assert await export_obj(client, namespace, DB_SVC) is None


async def test_the_dgds_own_service_is_exported(
    client: Client, alice: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    dgd = await alices_pool(alice, namespace)
    _, service = dynamo.frontend(dgd, "db")  # Dynamo's operator on the Grove path
    await client.create(SERVICES, service)
    await exports_become(client, namespace, {RELAY_SVC, DB_SVC})
    await states_become(alice, namespace, POOL, {DB_SVC: "Exported"})
    await second_pass_writes_nothing(mcs, namespace)
    lines = (await relay_status(alice, namespace, POOL)).get("exports") or []
    assert all(line.get("reason") != "ForeignService" for line in lines), lines


async def not_found(alice: Client, ns: str) -> None:
    """The export line says Pending ServiceNotFound naming the Service, and `Exported` is
    Unknown Pending saying so, as alice reads them."""
    lines = await states_become(alice, ns, POOL, {RELAY_SVC: "Exported", DB_SVC: "Pending"})
    line = lines[DB_SVC]
    assert line.get("reason") == "ServiceNotFound", line
    assert f"Service {DB_SVC} does not exist" in line.get("message", ""), line
    exported = (await conditions_of(alice, ns, POOL))["Exported"]
    assert (exported["status"], exported["reason"]) == ("Unknown", "Pending"), exported
    assert f"{DB_SVC}: Service {DB_SVC} does not exist" in exported["message"], exported


async def never_exported(op: OperatorUnderTest, ns: str, since: int, name: str) -> None:
    """The audit log since `since`: the operator never created an export of `name`."""
    creates = [
        w
        for w in await op.writes_since(since)
        if w.resource == "serviceexports" and w.namespace == ns and w.name == name
    ]
    assert creates == [], [(w.verb, w.name) for w in creates]


async def test_a_frontend_is_exported_only_once_its_service_exists(
    client: Client,
    alice: Client,
    namespace: str,
    mcs: OperatorUnderTest,
    control_plane: ControlPlane,
) -> None:
    """No export ahead of its Service: it would claim the name for whoever makes one."""
    since = control_plane.audit.offset()
    dgd = await alices_pool(alice, namespace)
    await not_found(alice, namespace)
    await second_pass_writes_nothing(mcs, namespace)
    await never_exported(mcs, namespace, since, DB_SVC)
    _, service = dynamo.frontend(dgd, "db")  # Dynamo's operator makes it
    await client.create(SERVICES, service)
    await exports_become(client, namespace, {RELAY_SVC, DB_SVC})
    await states_become(alice, namespace, POOL, {DB_SVC: "Exported"})
    await second_pass_writes_nothing(mcs, namespace)


async def test_a_service_another_team_makes_under_a_frontends_name_is_never_exported(
    client: Client,
    alice: Client,
    namespace: str,
    mcs: OperatorUnderTest,
    control_plane: ControlPlane,
) -> None:
    """Alice's DGD `payments` names a frontend `db` before anyone made `payments-db`. The
    database team then makes it: it is never beside an export of hers, not for a moment
    (the audit log holds no create of that export)."""
    since = control_plane.audit.offset()
    await alices_pool(alice, namespace)
    await not_found(alice, namespace)
    await mcs.settle()  # the pass after the creates did nothing: the next one is skippable
    owner = await other_teams_deployment(client, namespace)
    await client.create(SERVICES, service_body(namespace, owner))
    await skipped_naming(alice, namespace, "Deployment/ledger-db")
    await second_pass_writes_nothing(mcs, namespace)
    # Their Service gone, the name waits for the DGD's again.
    await client.delete(SERVICES, DB_SVC, namespace)
    await not_found(alice, namespace)
    await second_pass_writes_nothing(mcs, namespace)
    await never_exported(mcs, namespace, since, DB_SVC)
    assert await export_names(client, namespace) == {RELAY_SVC}


async def test_our_export_is_withdrawn_when_its_service_is_deleted(
    client: Client, alice: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    """An export of a Service that is gone claims its name as one made ahead would."""
    dgd = await alices_pool(alice, namespace)
    _, service = dynamo.frontend(dgd, "db")
    await client.create(SERVICES, service)
    await exports_become(client, namespace, {RELAY_SVC, DB_SVC})
    await mcs.settle()
    await client.delete(SERVICES, DB_SVC, namespace)
    await exports_become(client, namespace, {RELAY_SVC})
    await wait_event(alice, namespace, "ExportDeleted", name=DB_SVC)
    await not_found(alice, namespace)
    await second_pass_writes_nothing(mcs, namespace)
    # Dynamo's operator makes it again: exported again.
    await client.create(SERVICES, service)
    await exports_become(client, namespace, {RELAY_SVC, DB_SVC})
    await second_pass_writes_nothing(mcs, namespace)


async def test_a_service_of_a_dcd_is_exported_while_the_dgd_controls_that_dcd(
    client: Client, alice: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    dgd = await alices_pool(alice, namespace)
    theirs = await dcd(client, namespace, None)  # a DCD the DGD does not control
    await client.create(SERVICES, service_body(namespace, theirs))
    await skipped_naming(alice, namespace, f"DynamoComponentDeployment/{DB_SVC}")
    assert await export_obj(client, namespace, DB_SVC) is None
    await second_pass_writes_nothing(mcs, namespace)
    # The DGD takes the DCD (as Dynamo's operator makes it, off the Grove path): exported.
    await client.merge_patch(
        DCDS, DB_SVC, {"metadata": {"ownerReferences": [controller_ref(dgd)]}}, namespace
    )
    await exports_become(client, namespace, {RELAY_SVC, DB_SVC})
    await states_become(alice, namespace, POOL, {DB_SVC: "Exported"})
    await second_pass_writes_nothing(mcs, namespace)
    # It lets go of it again: withdrawn.
    await client.merge_patch(DCDS, DB_SVC, {"metadata": {"ownerReferences": None}}, namespace)
    await exports_become(client, namespace, {RELAY_SVC})
    await second_pass_writes_nothing(mcs, namespace)


async def test_a_service_changing_hands_to_another_team_withdraws_the_export(
    client: Client, alice: Client, namespace: str, mcs: OperatorUnderTest
) -> None:
    dgd = await alices_pool(alice, namespace)
    _, service = dynamo.frontend(dgd, "db")
    await client.create(SERVICES, service)
    await exports_become(client, namespace, {RELAY_SVC, DB_SVC})
    await mcs.settle()
    owner = await other_teams_deployment(client, namespace)
    await client.merge_patch(
        SERVICES, DB_SVC, {"metadata": {"ownerReferences": [controller_ref(owner)]}}, namespace
    )
    await exports_become(client, namespace, {RELAY_SVC})
    await skipped_naming(alice, namespace, "Deployment/ledger-db")
    await second_pass_writes_nothing(mcs, namespace)
