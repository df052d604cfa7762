"""`dev --clusters 2` prints west's view only once the east pool is live in it with
every relay pod and its frontend: what `_live` waits for, without a cluster."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from dynamo_pool_operator import dev
from dynamo_pool_operator.runtime import Client
from tests.unit.discover.test_find import mcs_slice

KEY = f"east/{dev.NAMESPACE}/{dev.POOL}"
RELAY = f"{dev.POOL}-pool-relay"
FRONTEND = f"{dev.POOL}-frontend"


class _Slices:
    """A client whose list of EndpointSlices is `slices`."""

    def __init__(self, slices: list[dict[str, Any]]) -> None:
        self.slices = slices

    async def list(self, *_: Any, **__: Any) -> SimpleNamespace:
        return SimpleNamespace(items=self.slices)


def _slice(service: str, *endpoints: tuple[str, bool]) -> dict[str, Any]:
    return mcs_slice(service, "east", list(endpoints), namespace=dev.NAMESPACE)


async def _live(*slices: dict[str, Any], relay_pods: int = 2) -> bool:
    client = cast("Client", _Slices(list(slices)))
    return await dev._live(client, KEY, relay_pods) is not None


FRONTEND_READY = _slice(FRONTEND, ("10.96.0.9", True))


async def test_live_with_every_relay_pod_and_its_frontend() -> None:
    relay = _slice(RELAY, ("10.244.0.4", True), ("10.244.0.5", True))
    assert await _live(relay, FRONTEND_READY)


@pytest.mark.parametrize(
    "slices",
    [
        pytest.param([FRONTEND_READY], id="relay-not-imported"),
        pytest.param(
            [_slice(RELAY, ("10.244.0.4", False), ("10.244.0.5", False)), FRONTEND_READY],
            id="not-live",
        ),
        pytest.param(
            [_slice(RELAY, ("10.244.0.4", True), ("10.244.0.5", False)), FRONTEND_READY],
            id="one-relay-pod-of-two",
        ),
        pytest.param([_slice(RELAY, ("10.244.0.4", True), ("10.244.0.5", True))], id="no-frontend"),
        pytest.param(
            [
                _slice(RELAY, ("10.244.0.4", True), ("10.244.0.5", True)),
                _slice(FRONTEND, ("10.96.0.9", False)),
            ],
            id="frontend-not-ready",
        ),
    ],
)
async def test_not_yet(slices: list[dict[str, Any]]) -> None:
    assert not await _live(*slices)
