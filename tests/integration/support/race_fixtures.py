"""Helpers for the export race, fault and RBAC tests.

- `deny_export_writes` installs a ValidatingAdmissionPolicy that refuses one export
  write by the operator's user, so a failure is injected by the real server.
- RBAC for an operator running as a restricted user, from the shipped rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from dynamo_pool_operator import rbac
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.pool.model import Verb
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import SERVICES
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.export_fixtures import (
    SE,
    events_for,
    exports_become,
    relay_status,
    wait_event,
)
from tests.integration.support.relay_fixtures import (
    DGDS,
    FRONTEND_SVC,
    POOL,
    RELAY_SVC,
    RELAYS,
    dgd_body,
    dynamos_services,
    published,
    relay_body,
)
from tests.integration.support.spies import Spy, WritePause, paused

#: The operator under test authenticates as this client-certificate user (system:masters).
OPERATOR_USER = "admin"
RBAC = "rbac.authorization.k8s.io/v1"


# ---------------------------------------------------------------- admission refusals
_NAME_OF = {
    "CREATE": "object.metadata.name",
    "UPDATE": "object.metadata.name",
    "DELETE": "oldObject.metadata.name",
}


async def _refused(probe: Callable[[], Awaitable[Any]]) -> bool:
    """True when the policy refused `probe` (any other answer, even an error, is not)."""
    try:
        await probe()
    except errors.ApiError as e:
        return "denied request" in str(e)
    return False


def _dry_run(client: Client, namespace: str, name: str, operation: str) -> Callable[[], Any]:
    dry = {"dryRun": "All"}
    if operation == "CREATE":
        body = {
            "apiVersion": SE.api_version,
            "kind": SE.kind,
            "metadata": {"name": name, "namespace": namespace},
        }
        return lambda: client.request("POST", SE.path(namespace), params=dry, body=body)
    if operation == "DELETE":
        return lambda: client.request("DELETE", SE.path(namespace, name), params=dry)
    patch = {"metadata": {"annotations": {"probe": str(time.monotonic_ns())}}}
    return lambda: client.request(
        "PATCH",
        SE.path(namespace, name),
        params=dry,
        body=patch,
        content_type="application/merge-patch+json",
    )


@contextlib.asynccontextmanager
async def operator_refused(
    cp: ControlPlane,
    *,
    policy: str,
    namespace: str,
    rule: dict[str, Any],
    name_expression: str,
    name: str,
    probe: Callable[[], Awaitable[Any]],
    timeout: float = 15.0,
) -> AsyncIterator[None]:
    """While open, a ValidatingAdmissionPolicy refuses the operator's user the requests
    `rule` matches (one resource rule) when `name_expression` (CEL) equals `name`, with
    a Deny binding limited to `namespace`. Returns once `probe` (a dry run by the
    operator's user) is refused; on exit deletes both and waits until it is lifted."""
    expression = f"request.userInfo.username != '{OPERATOR_USER}' || {name_expression} != '{name}'"
    objs = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": policy},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [rule]},
                "validations": [{"expression": expression, "message": f"test refuses {name}"}],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": policy},
            "spec": {
                "policyName": policy,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        },
    ]
    for obj in objs:
        await asyncio.to_thread(cp.apply, obj)
    try:
        await _until(lambda: _refused(probe), timeout, f"policy {policy} in force")
        yield
    finally:
        base = "/apis/admissionregistration.k8s.io/v1"
        for kind in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            await asyncio.to_thread(cp.request, "DELETE", f"{base}/{kind}/{policy}")

    async def lifted() -> bool:
        return not await _refused(probe)

    await _until(lifted, timeout, f"policy {policy} lifted")


@contextlib.asynccontextmanager
async def refuse_service_create(
    cp: ControlPlane, client: Client, namespace: str, name: str
) -> AsyncIterator[None]:
    """While open, a ValidatingAdmissionPolicy refuses the operator's user creating the
    Service `namespace/name` (the relay's own Service)."""
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"ports": [{"port": 80}]},
    }
    rule = {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "operations": ["CREATE"],
        "resources": ["services"],
    }
    async with operator_refused(
        cp,
        policy=f"deny-svc-{namespace}",
        namespace=namespace,
        rule=rule,
        name_expression="object.metadata.name",
        name=name,
        probe=lambda: client.request(
            "POST", SERVICES.path(namespace), params={"dryRun": "All"}, body=body
        ),
    ):
        yield


@contextlib.asynccontextmanager
async def deny_export_writes(
    cp: ControlPlane,
    client: Client,
    namespace: str,
    name: str,
    operation: str,
    *,
    timeout: float = 15.0,
) -> AsyncIterator[None]:
    """While open, the API server refuses `operation` (CREATE, UPDATE or DELETE) of the
    ServiceExport `namespace/name` by the operator's user (see `operator_refused`).

    `client` must authenticate as the operator's user (admin) for the probes; for DELETE
    and UPDATE the export must exist while the policy is installed."""
    rule = {
        "apiGroups": [SE.group],
        "apiVersions": ["*"],
        "operations": [operation],
        "resources": [SE.plural],
    }
    async with operator_refused(
        cp,
        policy=f"deny-{operation.lower()}-{namespace}",
        namespace=namespace,
        rule=rule,
        name_expression=_NAME_OF[operation],
        name=name,
        probe=_dry_run(client, namespace, name, operation),
        timeout=timeout,
    ):
        yield


async def _until(probe: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await probe():
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"{what}: not within {timeout}s")


# ---------------------------------------------------------------- RBAC
#: What the operator reads and writes (all namespaced): the shipped manager rules, from
#: the one source the chart and deploy/ are generated from.
OPERATOR_RULES = rbac.manager_rules()
#: The separate cluster-wide reader role of the cluster ID check, as shipped.
CLUSTER_PROPERTY_RULES = rbac.cluster_property_rules()


def _role(kind: str, name: str, rules: list[dict[str, Any]], ns: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if ns:
        meta["namespace"] = ns
    return {"apiVersion": RBAC, "kind": kind, "metadata": meta, "rules": rules}


def _binding(kind: str, name: str, role_kind: str, user: str, ns: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if ns:
        meta["namespace"] = ns
    return {
        "apiVersion": RBAC,
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
    }


class Grants:
    """Roles and bindings for one user, removed again by `revoke_all` (cluster-scoped
    ones outlive a test's namespace)."""

    def __init__(self, cp: ControlPlane, user: str) -> None:
        self.cp, self.user = cp, user
        self._made: list[str] = []

    async def grant(
        self, name: str, rules: list[dict[str, Any]], namespace: str | None = None
    ) -> None:
        """A ClusterRole + ClusterRoleBinding, or a Role + RoleBinding in `namespace`."""
        role_kind = "Role" if namespace else "ClusterRole"
        for obj in (
            _role(role_kind, name, rules, namespace),
            _binding(f"{role_kind}Binding", name, role_kind, self.user, namespace),
        ):
            await asyncio.to_thread(self.cp.apply, obj)
            plural = obj["kind"].lower() + "s"
            where = f"namespaces/{namespace}/" if namespace else ""
            self._made.append(f"/apis/{RBAC}/{where}{plural}/{name}")

    async def revoke_all(self) -> None:
        for path in reversed(self._made):
            await asyncio.to_thread(self.cp.request, "DELETE", path)
        self._made.clear()


# ---------------------------------------------------------------- pools and checks


async def make_pool(
    client: Client,
    ns: str,
    components: list[dict[str, Any]] | None = None,
    name: str = POOL,
    **relay_spec: Any,
) -> dict[str, Any]:
    """A DGD, the Services Dynamo's operator makes for its frontends
    (`dynamos_services`), and its DynamoPoolRelay; returns the relay as created."""
    dgd = await client.create(DGDS, dgd_body(name, ns, components))
    await dynamos_services(client, dgd)
    return await client.create(RELAYS, relay_body(name, ns, **relay_spec))


async def exported_pool(
    client: Client, ns: str, op: OperatorUnderTest | None = None, **relay_spec: Any
) -> dict[str, Any]:
    """`make_pool` of one frontend, once its two exports exist (and, given `op`, once
    the operator has nothing queued); returns the relay as created."""
    relay = await make_pool(client, ns, **relay_spec)
    await exports_become(client, ns, {RELAY_SVC, FRONTEND_SVC})
    if op is not None:
        await op.settle()
    return relay


@contextlib.asynccontextmanager
async def withdrawal_held(
    client: Client, op: OperatorUnderTest, ns: str
) -> AsyncIterator[tuple[WritePause, Spy, int]]:
    """`exported_pool`, then its DGD deleted: `paused` once `op`'s withdrawal of the
    frontend's export is reached."""
    await exported_pool(client, ns, op)
    async with paused(op, Verb.WITHDRAW, FRONTEND_SVC, ns) as (pause, spy, since):
        await client.delete(DGDS, POOL, ns)  # the relay and its exports are withdrawn
        await pause.reached()
        yield pause, spy, since


async def published_pool(client: Client, ns: str, **relay_spec: Any) -> dict[str, Any]:
    """`make_pool`, once the relay is published; returns the relay as created."""
    relay = await make_pool(client, ns, **relay_spec)
    await published(client, ns)
    return relay


async def writes_nothing(op: OperatorUnderTest, ns: str, name: str = POOL) -> None:
    """Reconcile `ns/name` once more: the audit log must show no write by the operator."""
    writes = await op.reconcile_again((ns, name))
    assert writes == [], f"second reconcile wrote: {[(w.verb, w.resource, w.name) for w in writes]}"


async def export_states(client: Client, ns: str, name: str = POOL) -> dict[str, str]:
    """`status.exports[]` of relay `ns/name` as {export name: state}."""
    status = await relay_status(client, ns, name)
    return {x["name"]: x["state"] for x in status.get("exports") or []}


async def state_becomes(client: Client, ns: str, export: str, state: str, name: str = POOL) -> None:
    async def probe() -> bool:
        return (await export_states(client, ns, name)).get(export) == state

    await eventually(probe)


async def mismatches(client: Client, ns: str, name: str = POOL) -> list[dict[str, Any]]:
    return [
        e
        for e in await events_for(client, ns, "ClusterIDMismatch")
        if e["regarding"]["name"] == name
    ]


async def wait_event_about(
    client: Client, ns: str, reason: str, export: dict[str, Any]
) -> dict[str, Any]:
    """The event `reason` whose related object is this export (by uid)."""
    return await wait_event(client, ns, reason, uid=export["metadata"]["uid"])
