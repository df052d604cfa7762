"""A relay gives nobody pod powers she does not hold, nor another team's DGD to publish
(docs/crd.md, "Who may set what").

The operator writes the relay Deployment with its own permissions, so a relay's pod
fields would hand a relay author what RBAC refuses her: her image, run as another
team's ServiceAccount, labelled into another team's Service. The shipped
ValidatingAdmissionPolicy (`admission.py`, the one source the chart and deploy/admission
are generated from) admits a relay that sets or changes one of those fields only from a
user the API server's authorizer allows to create Deployments in the relay's namespace.
And a relay publishes the DGD of its name (its pool, its frontends' exports, a relay
running as its ServiceAccount): the policy admits a relay's create only from a user
allowed to update that DGD.

`alice` (tests/integration/support/tenants.py) may do anything with DGDs and relays in
the test's namespace and create no Deployment; `bob` may also create Deployments there;
`mallory` may write relays there and nothing else; the admin (`client`, system:masters)
may do anything. The policy is installed as shipped, under names of this test and bound
to its namespace only, so no other test sees it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from dynamo_pool_operator import admission
from dynamo_pool_operator.api import crd
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from tests.integration.support.relay_fixtures import DGDS, RELAYS, WORKER, dgd_body, relay_body
from tests.integration.support.tenants import (
    RELAY_ONLY_RULES,
    grant,
    relay_policy,
    tenant_client,
)

POOL = "llama"

#: What a relay author could do with each field before the policy, one field at a time.
POD_FIELDS: list[tuple[str, Any]] = [
    ("image", "attacker.example/toolbox:latest"),
    ("serviceAccountName", "payments-admin"),
    ("podLabels", {"app": "payments-db"}),
    ("podAnnotations", {"container.apparmor.security.beta.kubernetes.io/relay": "unconfined"}),
    ("nodeSelector", {"node-role": "payments"}),
    ("tolerations", [{"operator": "Exists"}]),
    ("resources", {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}),
]
#: Another value of each, for updates.
OTHER_VALUES: dict[str, Any] = {
    "image": "attacker.example/toolbox:v2",
    "serviceAccountName": "payments-reader",
    "podLabels": {"app": "payments-api"},
    "podAnnotations": {"team": "payments"},
    "nodeSelector": {"node-role": "other"},
    "tolerations": [{"key": "gpu", "operator": "Exists"}],
    "resources": {"requests": {"cpu": "4"}},
}
FIELD_IDS = [name for name, _ in POD_FIELDS]
#: What a relay author holds in addition to alice's grant to be trusted with pod fields.
DEPLOYMENT_AUTHOR_RULES = (
    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create"]},
)


def test_the_policy_guards_exactly_these_fields() -> None:
    assert tuple(f"spec.{name}" for name in FIELD_IDS) == admission.GUARDED_FIELDS


@pytest.fixture
async def policy(control_plane: ControlPlane, namespace: str, alice: Client) -> AsyncIterator[None]:
    """The shipped policy and binding, bound to the test's namespace, in force."""
    async with relay_policy(control_plane, namespace, alice):
        yield


def _refusal(e: BaseException, field: str, user: str) -> None:
    """The refusal names the field, the permission, and who was refused."""
    message = str(e)
    assert f"spec.{field}: " in message, message
    assert "create deployments" in message, message
    assert f"; {user} may not" in message, message


# ------------------------------------------------------------------ create
@pytest.mark.parametrize(("field", "value"), POD_FIELDS, ids=FIELD_IDS)
async def test_a_relay_author_who_may_not_create_deployments_may_not_set_a_pod_field(
    alice: Client, namespace: str, policy: None, field: str, value: Any
) -> None:
    with pytest.raises(errors.Forbidden) as refused:
        await alice.create(RELAYS, relay_body(POOL, namespace, **{field: value}))
    _refusal(refused.value, field, "alice")
    # Nothing was stored.
    with pytest.raises(errors.NotFound):
        await alice.get(RELAYS, POOL, namespace)


async def test_the_same_relay_without_pod_fields_is_admitted(
    alice: Client, namespace: str, policy: None
) -> None:
    relay = relay_body(
        POOL, namespace, clusterId="east-1", replicas=3, port=9000, service={"headless": False}
    )
    created = await alice.create(RELAYS, relay)
    assert created["spec"]["replicas"] == 3
    # Empty values are no values: the operator reads them as absent.
    empty = relay_body(
        "empty",
        namespace,
        serviceAccountName="",
        podLabels={},
        podAnnotations={},
        nodeSelector={},
        tolerations=[],
        resources={},
    )
    await alice.create(RELAYS, empty)


@pytest.mark.parametrize(("field", "value"), POD_FIELDS, ids=FIELD_IDS)
async def test_an_admin_may_set_every_pod_field(
    client: Client, namespace: str, policy: None, field: str, value: Any
) -> None:
    created = await client.create(RELAYS, relay_body(POOL, namespace, **{field: value}))
    assert created["spec"][field] == value


async def test_a_user_who_may_create_deployments_may_set_the_pod_fields(
    control_plane: ControlPlane, namespace: str, policy: None
) -> None:
    spec = dict(POD_FIELDS)
    async with tenant_client(
        control_plane, namespace, user="bob", extra_rules=DEPLOYMENT_AUTHOR_RULES
    ) as bob:
        created = await bob.create(RELAYS, relay_body(POOL, namespace, **spec))
        assert {k: created["spec"][k] for k in spec} == spec
        updated = await bob.merge_patch(RELAYS, POOL, {"spec": OTHER_VALUES}, namespace)
        assert updated["spec"]["image"] == OTHER_VALUES["image"]


async def test_create_deployments_in_another_namespace_is_not_enough(
    control_plane: ControlPlane, namespace: str, policy: None
) -> None:
    elsewhere = f"{namespace}-other"
    control_plane.create_namespace(elsewhere)
    try:
        async with tenant_client(control_plane, namespace, user="carol") as carol:
            grant(control_plane, elsewhere, DEPLOYMENT_AUTHOR_RULES, user="carol")
            with pytest.raises(errors.Forbidden) as refused:
                await carol.create(RELAYS, relay_body(POOL, namespace, image="x.example/r:1"))
            _refusal(refused.value, "image", "carol")
    finally:
        control_plane.delete_namespace(elsewhere)


# ------------------------------------------------------------------ update
@pytest.mark.parametrize(("field", "value"), POD_FIELDS, ids=FIELD_IDS)
async def test_a_relay_author_may_not_change_or_remove_a_pod_field_an_admin_set(
    alice: Client,
    client: Client,
    namespace: str,
    policy: None,
    field: str,
    value: Any,
) -> None:
    await client.create(RELAYS, relay_body(POOL, namespace, **{field: value}))
    with pytest.raises(errors.Forbidden) as refused:
        await alice.merge_patch(RELAYS, POOL, {"spec": {field: OTHER_VALUES[field]}}, namespace)
    _refusal(refused.value, field, "alice")
    with pytest.raises(errors.Forbidden) as refused:
        await alice.merge_patch(RELAYS, POOL, {"spec": {field: None}}, namespace)
    _refusal(refused.value, field, "alice")
    assert (await client.get(RELAYS, POOL, namespace))["spec"][field] == value


@pytest.mark.parametrize(("field", "value"), POD_FIELDS, ids=FIELD_IDS)
async def test_a_relay_author_may_not_add_a_pod_field_on_update(
    alice: Client, namespace: str, policy: None, field: str, value: Any
) -> None:
    await alice.create(RELAYS, relay_body(POOL, namespace))
    with pytest.raises(errors.Forbidden) as refused:
        await alice.merge_patch(RELAYS, POOL, {"spec": {field: value}}, namespace)
    _refusal(refused.value, field, "alice")


async def test_a_relay_author_may_edit_the_other_fields_of_a_relay_whose_pod_fields_an_admin_set(
    alice: Client, client: Client, namespace: str, policy: None
) -> None:
    """Unchanged pod fields do not trip the policy, whichever way the update is sent."""
    spec = dict(POD_FIELDS)
    await client.create(RELAYS, relay_body(POOL, namespace, **spec))
    patched = await alice.merge_patch(
        RELAYS, POOL, {"spec": {"clusterId": "west-2", "replicas": 5}}, namespace
    )
    assert (patched["spec"]["clusterId"], patched["spec"]["replicas"]) == ("west-2", 5)
    # A whole-object update (PUT) carrying the pod fields as they are.
    current = await alice.get(RELAYS, POOL, namespace)
    current["spec"]["port"] = 9100
    replaced = await alice.replace(RELAYS, current)
    assert replaced["spec"]["port"] == 9100
    # Labels and annotations of the relay itself are not pod fields.
    await alice.merge_patch(RELAYS, POOL, {"metadata": {"labels": {"team": "ml"}}}, namespace)
    assert {k: replaced["spec"][k] for k in spec} == spec


# ------------------------------------------------------------------ publishing a DGD
#: Another team's DGD in the namespace, and a grant of `update` on that one DGD alone.
THEIRS = "payments"
UPDATE_THEIR_DGD = (
    {
        "apiGroups": ["nvidia.com"],
        "resources": ["dynamographdeployments"],
        "resourceNames": [THEIRS],
        "verbs": ["update"],
    },
)


def _publish_refusal(e: BaseException, dgd: str, namespace: str, user: str) -> None:
    """The refusal names the DGD, the permission, and who was refused."""
    message = str(e)
    assert f"DynamoGraphDeployment {namespace}/{dgd}" in message, message
    assert "update dynamographdeployments (nvidia.com)" in message, message
    assert f"; {user} may not" in message, message


async def test_a_user_who_may_write_only_relays_may_not_publish_another_teams_dgd(
    control_plane: ControlPlane, client: Client, namespace: str, policy: None
) -> None:
    """Creating relay `payments` publishes DGD `payments`: its pool, its frontends'
    exports, a relay running as its ServiceAccount. That is an action on the DGD."""
    await client.create(DGDS, dgd_body(THEIRS, namespace))  # the payments team's
    async with tenant_client(control_plane, namespace, user="mallory", rules=RELAY_ONLY_RULES) as m:
        with pytest.raises(errors.Forbidden):
            await m.get(DGDS, THEIRS, namespace)  # she may not even read it
        with pytest.raises(errors.Forbidden) as refused:
            await m.create(RELAYS, relay_body(THEIRS, namespace))
        _publish_refusal(refused.value, THEIRS, namespace, "mallory")
        with pytest.raises(errors.Forbidden) as refused:  # nor before the DGD exists
            await m.create(RELAYS, relay_body("ledger", namespace))
        _publish_refusal(refused.value, "ledger", namespace, "mallory")
    for name in (THEIRS, "ledger"):
        with pytest.raises(errors.NotFound):
            await client.get(RELAYS, name, namespace)


async def test_a_user_who_may_update_the_dgd_may_publish_it_and_no_other(
    control_plane: ControlPlane, client: Client, namespace: str, policy: None
) -> None:
    """The permission is on the DGD of the relay's name in its namespace (`.name()`): update
    on `payments` publishes `payments`, not `ledger`."""
    for name in (THEIRS, "ledger"):
        await client.create(DGDS, dgd_body(name, namespace, [WORKER]))
    async with tenant_client(
        control_plane, namespace, user="dana", rules=RELAY_ONLY_RULES, extra_rules=UPDATE_THEIR_DGD
    ) as dana:
        created = await dana.create(RELAYS, relay_body(THEIRS, namespace, replicas=1))
        assert created["metadata"]["name"] == THEIRS
        with pytest.raises(errors.Forbidden) as refused:
            await dana.create(RELAYS, relay_body("ledger", namespace))
        _publish_refusal(refused.value, "ledger", namespace, "dana")


async def test_an_update_of_a_relay_needs_no_permission_on_its_dgd(
    control_plane: ControlPlane, client: Client, namespace: str, policy: None
) -> None:
    """Only a create publishes: the relay's other fields stay open to whoever may write
    relays, and an update by someone without the DGD's permission (a controller removing
    its finalizer from a relay being deleted) is not refused for it. The pod fields keep
    their own rule."""
    await client.create(DGDS, dgd_body(THEIRS, namespace))
    relay = relay_body(THEIRS, namespace)
    relay["metadata"]["finalizers"] = ["example.com/hold"]
    await client.create(RELAYS, relay)
    async with tenant_client(control_plane, namespace, user="mallory", rules=RELAY_ONLY_RULES) as m:
        patched = await m.merge_patch(RELAYS, THEIRS, {"spec": {"replicas": 3}}, namespace)
        assert patched["spec"]["replicas"] == 3
        with pytest.raises(errors.Forbidden) as refused:
            await m.merge_patch(RELAYS, THEIRS, {"spec": {"image": "x.example/r:1"}}, namespace)
        _refusal(refused.value, "image", "mallory")
        await client.delete(RELAYS, THEIRS, namespace)
        await m.merge_patch(RELAYS, THEIRS, {"metadata": {"finalizers": None}}, namespace)
    with pytest.raises(errors.NotFound):
        await client.get(RELAYS, THEIRS, namespace)


# ------------------------------------------------------------------ replicas
async def test_replicas_above_the_maximum_are_refused_by_the_schema(
    alice: Client, client: Client, namespace: str
) -> None:
    with pytest.raises(errors.Invalid) as refused:
        await client.create(RELAYS, relay_body(POOL, namespace, replicas=crd.MAX_REPLICAS + 1))
    assert "spec.replicas" in str(refused.value)
    assert f"less than or equal to {crd.MAX_REPLICAS}" in str(refused.value)
    with pytest.raises(errors.Invalid):
        await alice.create(RELAYS, relay_body(POOL, namespace, replicas=2**31 - 1))
    created = await alice.create(RELAYS, relay_body(POOL, namespace, replicas=crd.MAX_REPLICAS))
    assert created["spec"]["replicas"] == crd.MAX_REPLICAS
    with pytest.raises(errors.Invalid):
        await alice.merge_patch(
            RELAYS, POOL, {"spec": {"replicas": crd.MAX_REPLICAS + 1}}, namespace
        )
