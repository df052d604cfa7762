"""Helpers for the export integration tests: configuration, readers, waiters."""

from __future__ import annotations

import contextlib
from typing import Any

from dynamo_pool_operator.api.mcs import clusterproperties, serviceexports
from dynamo_pool_operator.config import (
    API_VERSION,
    KIND,
    OperatorConfiguration,
    parse_configuration,
)
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import EVENTS, Resource
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.relay_fixtures import POOL, RELAYS

SE = serviceexports("v1beta1")
CLUSTER_PROPERTIES = clusterproperties("v1beta1")
CLUSTER_ID = "cluster.clusterset.k8s.io"


def config(implementation: str = "mcs", **sections: Any) -> OperatorConfiguration:
    doc: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "multiCluster": {"mcsImplementation": implementation},
    }
    doc.update(sections)
    return parse_configuration(doc)


async def stopped_after_exporting(
    cp: ControlPlane, client: Client, ns: str, want: set[str]
) -> None:
    """An operator with MCS exports runs until `want` are the exports, then stops: what
    the next operator, configured otherwise, starts from."""
    async with OperatorUnderTest(cp, config("mcs")):
        await exports_become(client, ns, want)


async def export_names(client: Client, ns: str, res: Resource = SE) -> set[str]:
    return {e["metadata"]["name"] for e in (await client.list(res, ns)).items}


async def exports_become(
    client: Client, ns: str, names: set[str], res: Resource = SE, *, timeout: float = 20.0
) -> None:
    async def probe() -> bool:
        return await export_names(client, ns, res) == names

    try:
        await eventually(probe, timeout=timeout)
    except AssertionError as e:
        raise AssertionError(
            f"exports are {await export_names(client, ns, res)}, want {names}"
        ) from e


async def relay_status(client: Client, ns: str, name: str) -> dict[str, Any]:
    return dict((await client.get(RELAYS, name, ns)).get("status") or {})


async def conditions_of(client: Client, ns: str, name: str = POOL) -> dict[str, dict[str, Any]]:
    """The relay's conditions by type, as they are (current or not)."""
    status = await relay_status(client, ns, name)
    return {c["type"]: c for c in status.get("conditions", [])}


async def events_for(client: Client, ns: str, reason: str | None = None) -> list[dict[str, Any]]:
    items = (await client.list(EVENTS, ns)).items
    return [e for e in items if reason is None or e.get("reason") == reason]


async def export_failed_about(client: Client, ns: str, name: str) -> bool:
    """Whether an ExportFailed Event names `name` as its related object."""
    return any(e["related"]["name"] == name for e in await events_for(client, ns, "ExportFailed"))


async def wait_event(client: Client, ns: str, reason: str, **related: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        for e in await events_for(client, ns, reason):
            rel = e.get("related") or {}
            if all(rel.get(k) == v for k, v in related.items()):
                return e
        return None

    found: dict[str, Any] = await eventually(probe)
    return found


async def export_obj(
    client: Client, ns: str, name: str, res: Resource = SE
) -> dict[str, Any] | None:
    try:
        return await client.get(res, name, ns)
    except errors.NotFound:
        return None


async def existing_export(client: Client, ns: str, name: str, res: Resource = SE) -> dict[str, Any]:
    """The export `name`, which must exist here: the test fails, naming it, when not."""
    found = await export_obj(client, ns, name, res)
    assert found is not None, f"no export {ns}/{name}"
    return found


async def states_become(client: Client, ns: str, name: str, want: dict[str, str]) -> dict[str, Any]:
    """Wait until the relay's status.exports shows (at least) these name -> state pairs;
    the status is written after the exports in the same reconcile, so poll for it."""

    async def probe() -> dict[str, Any] | None:
        lines = {x["name"]: x for x in (await relay_status(client, ns, name)).get("exports") or []}
        if all(lines.get(k, {}).get("state") == v for k, v in want.items()):
            return lines
        return None

    found: dict[str, Any] = await eventually(probe)
    return found


async def set_cluster_id(
    client: Client, value: str | None, res: Resource = CLUSTER_PROPERTIES
) -> None:
    """Create or change the cluster's ID property (at `res`'s version), or delete it (None)."""
    if value is None:
        with contextlib.suppress(errors.NotFound):
            await client.delete(res, CLUSTER_ID)
        return
    await client.apply(
        res,
        {
            "apiVersion": res.api_version,
            "kind": "ClusterProperty",
            "metadata": {"name": CLUSTER_ID},
            "spec": {"value": value},
        },
        field_manager="dpo-tests",
        force=True,
    )
