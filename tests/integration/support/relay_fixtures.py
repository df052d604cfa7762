"""Objects the relay and export integration tests create, and small readers."""

from __future__ import annotations

from typing import Any

from dynamo_pool_operator.pool.controller import RELAYS as RELAYS
from dynamo_pool_operator.pool.controller import dgd_resource
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import Resource

DGDS = dgd_resource("v1beta1")

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


async def absent(client: Client, res: Resource, namespace: str, name: str) -> bool:
    try:
        await client.get(res, name, namespace)
    except errors.NotFound:
        return True
    return False
