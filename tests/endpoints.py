"""A Service's endpoint addresses, read from its EndpointSlices as the tests check them."""

from __future__ import annotations

from typing import Any

from dynamo_pool_operator.api.names import SLICE_SERVICE_NAME
from dynamo_pool_operator.discover.view import ENDPOINT_SLICES
from dynamo_pool_operator.runtime import Client


def endpoint_addresses(slices: list[dict[str, Any]], *, ready: bool) -> list[str]:
    """The addresses of the endpoints whose `ready` condition is `ready`, sorted."""
    out: list[str] = []
    for s in slices:
        for e in s.get("endpoints") or []:
            if bool((e.get("conditions") or {}).get("ready")) == ready:
                out += e.get("addresses") or []
    return sorted(out)


async def service_endpoints(
    client: Client, namespace: str, service: str, *, ready: bool = True
) -> list[str]:
    """The ready (or not ready) endpoint addresses of `service`'s own EndpointSlices."""
    slices = (
        await client.list(
            ENDPOINT_SLICES, namespace, label_selector=f"{SLICE_SERVICE_NAME}={service}"
        )
    ).items
    return endpoint_addresses(slices, ready=ready)
