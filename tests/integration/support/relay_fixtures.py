"""Objects the relay and export integration tests create, and small readers."""

from __future__ import annotations

from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.dgd import pool_from_object
from dynamo_pool_operator.localcluster import dynamo
from dynamo_pool_operator.pool.controller import RELAYS as RELAYS
from dynamo_pool_operator.pool.controller import dgd_resource
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES, Resource
from tests.harness import eventually
from tests.integration.support.waiting import eventually_or

DGDS = dgd_resource("v1beta1")
#: The pool most tests make, and the Services it exports.
POOL = "llama"
RELAY_SVC = f"{POOL}-pool-relay"
FRONTEND_SVC = f"{POOL}-frontend"

WORKER = {"name": "decode", "type": "decode", "replicas": 1}
FRONTEND = {"name": "Frontend", "type": "frontend", "replicas": 1}


def dgd_body(
    name: str,
    namespace: str,
    components: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    finalizers: list[str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    if finalizers:
        meta["finalizers"] = finalizers
    return {
        "apiVersion": DGDS.api_version,
        "kind": DGDS.kind,
        "metadata": meta,
        "spec": {"components": components if components is not None else [FRONTEND, WORKER]},
    }


async def dynamos_services(client: Client, dgd: dict[str, Any]) -> list[str]:
    """What Dynamo's operator makes for `dgd` (as the API server returned it) and a pool
    exports: a Service `<dgd>-<component>` for each frontend, controlled by the DGD (a
    frontend is exported only once its Service exists and is the DGD's). Names no
    Service can have, and the relay Service's, are left out; one of this DGD's that
    exists is kept, one of a previous DGD of the name is waited out (the garbage
    collector deletes it). Returns the names."""
    made: list[str] = []
    meta = dgd["metadata"]
    for component in pool_from_object(dgd).frontends:
        name = names.component_service_name(meta["name"], component.name)
        if name in made or name == names.relay_name(meta["name"]):
            continue
        if not names.is_valid_service_name(name):
            continue
        service = dynamo.frontend(dgd, component.name)[1]

        async def made_now(service: dict[str, Any] = service) -> bool:
            try:
                await client.create(SERVICES, service)
            except errors.AlreadyExists:
                there = await client.get(SERVICES, service["metadata"]["name"], meta["namespace"])
                refs = there["metadata"].get("ownerReferences") or []
                return any(r.get("uid") == meta["uid"] for r in refs)
            return True

        await eventually(made_now)
        made.append(name)
    return made


def relay_body(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": RELAYS.api_version,
        "kind": RELAYS.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def relay_owner(relay: dict[str, Any]) -> dict[str, Any]:
    """The ownerReference every object the relay owns carries, as the API spells it."""
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoPoolRelay",
        "name": relay["metadata"]["name"],
        "uid": relay["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


async def condition(client: Client, namespace: str, name: str, type_: str) -> dict[str, Any] | None:
    """One condition of the relay, once its status is current (observedGeneration)."""
    relay = await client.get(RELAYS, name, namespace)
    status = relay.get("status") or {}
    if status.get("observedGeneration") != relay["metadata"]["generation"]:
        return None
    for c in status.get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return None


async def ready(client: Client, namespace: str, name: str) -> dict[str, Any] | None:
    """The relay's Ready condition: the pool is published, its relay pods run (kwok)
    and, with an MCS implementation, the implementation accepted its exports."""
    return await condition(client, namespace, name, "Ready")


async def decision_of(client: Client, namespace: str, name: str) -> dict[str, Any] | None:
    """The relay's Published condition: the operator's decision. On a control plane
    without nodes no relay pod runs, so this, not Ready, is what those tests wait for."""
    return await condition(client, namespace, name, "Published")


async def decided(client: Client, namespace: str, name: str, reason: str) -> dict[str, Any]:
    """The relay's `Published` condition once its reason is `reason`."""

    async def probe() -> dict[str, Any] | None:
        c = await decision_of(client, namespace, name)
        return c if c is not None and c["reason"] == reason else None

    async def instead() -> str:
        said = await decision_of(client, namespace, name)
        return f"Published of {namespace}/{name} is {said}, want {reason}"

    return await eventually_or(probe, instead)


async def absent(client: Client, res: Resource, namespace: str, name: str) -> bool:
    try:
        await client.get(res, name, namespace)
    except errors.NotFound:
        return True
    return False


async def published(client: Client, ns: str, name: str = "llama") -> dict[str, Any]:
    """The relay's `Published` condition once it is True."""

    async def probe() -> dict[str, Any] | None:
        cond = await decision_of(client, ns, name)
        return cond if cond and cond["status"] == "True" else None

    cond: dict[str, Any] = await eventually(probe)
    return cond


async def withdrawn(client: Client, ns: str, reason: str, name: str = "llama") -> dict[str, Any]:
    """The relay's `Published` condition once False for `reason`, its objects gone."""

    async def probe() -> dict[str, Any] | None:
        cond = await decision_of(client, ns, name)
        if not cond or cond["status"] != "False" or cond["reason"] != reason:
            return None
        gone = [await absent(client, r, ns, f"{name}-pool-relay") for r in (DEPLOYMENTS, SERVICES)]
        return cond if all(gone) else None

    cond: dict[str, Any] = await eventually(probe)
    return cond
