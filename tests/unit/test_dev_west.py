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


class _Relay:
    """A client whose relay reads as `relay`."""

    def __init__(self, relay: dict[str, Any]) -> None:
        self.relay = relay

    async def get(self, *_: Any, **__: Any) -> dict[str, Any]:
        return self.relay


def _published_relay(*ready: str | None) -> dict[str, Any]:
    """The sample relay Ready=True, each export Exported, its `ready` line as given
    (None: the implementation has written no Ready condition yet)."""
    lines = []
    for name, status in zip((RELAY, FRONTEND), ready, strict=True):
        line: dict[str, Any] = {"name": name, "state": "Exported"}
        if status is not None:
            line["ready"] = {"status": status, "reason": "AwaitingExport"}
        lines.append(line)
    return {"status": {"conditions": [{"type": "Ready", "status": "True"}], "exports": lines}}


@pytest.mark.parametrize(
    "ready",
    [
        pytest.param((None, None), id="valid-only"),
        pytest.param(("False", "True"), id="awaiting-aggregation"),
    ],
)
async def test_with_an_implementation_published_waits_for_its_ready_on_every_export(
    ready: tuple[str | None, ...],
) -> None:
    """Lighthouse writes Valid=True, then Ready=False `AwaitingExport` while the broker
    aggregates, then Ready=True; the relay is Ready at `valid` in the first gap and
    Pending in the second. Only its Ready=True, which `AwaitingExport` never replaces,
    is settled: the report (and a `check` run from it) comes after it."""
    client = cast("Client", _Relay(_published_relay(*ready)))
    with pytest.raises(TimeoutError):
        await dev._wait_published(client, timeout=0.5, implementation_ready=True)


async def test_published_once_the_implementation_says_ready_on_every_export() -> None:
    relay = _published_relay("True", "True")
    client = cast("Client", _Relay(relay))
    assert await dev._wait_published(client, timeout=0.5, implementation_ready=True) is relay
    # With no implementation running (one cluster) nothing writes Ready: not waited for.
    alone = _published_relay(None, None)
    assert await dev._wait_published(cast("Client", _Relay(alone)), timeout=0.5) is alone
