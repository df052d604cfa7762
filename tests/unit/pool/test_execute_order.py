"""When the executor sends each write (pool/execute.py `Executor.run`): at once
unless a need or a withdrawal's place orders it, results in the plan's order.

A fake writer holds every write until the test releases it, and records what is in
flight, so the test sees which writes the executor sends together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from dynamo_pool_operator.api.relay import RelayDefaults, relay_from_object
from dynamo_pool_operator.pool.execute import Executor
from dynamo_pool_operator.pool.model import Action, EventNames, Result, Verb
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES, Resource

SE = Resource("multicluster.x-k8s.io", "v1beta1", "serviceexports", "ServiceExport")
NAMES = EventNames(failed="Failed")
RELAY = relay_from_object(
    {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}, RelayDefaults(image="i", port=1)
)


def create(res: Resource, name: str, *needs: Action) -> Action:
    return Action(Verb.CREATE, res, "ns", name, NAMES, body={}, needs=tuple(n.key for n in needs))


class HeldWrites:
    """Each write waits for `release`; `in_flight` is what was sent and not answered."""

    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        self.in_flight: list[str] = []
        self.sent: list[str] = []
        self.release: dict[str, asyncio.Event] = {}
        self.refuse = refuse

    async def _write(self, name: str) -> dict[str, Any]:
        self.sent.append(name)
        self.in_flight.append(name)
        await self.release.setdefault(name, asyncio.Event()).wait()
        self.in_flight.remove(name)
        if name in self.refuse:
            raise errors.Forbidden(f"{name}: denied", status=403, reason="Forbidden")
        return {"metadata": {"name": name}}

    async def create(self, res: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self._write(str(body.get("name")))

    async def delete(self, res: Resource, live: Mapping[str, Any]) -> bool:
        await self._write(str(live["metadata"]["name"]))
        return True

    def answer(self, name: str) -> None:
        self.release.setdefault(name, asyncio.Event()).set()


class Events:
    def emit(self, *args: Any) -> None:
        pass


def executor(writes: HeldWrites) -> Executor:
    return Executor(writes, Events(), CollectorRegistry())  # type: ignore[arg-type]


def named(action: Action) -> Action:
    import dataclasses

    return dataclasses.replace(action, body={"name": action.name})


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_new_pools_writes_go_as_their_needs_allow() -> None:
    deployment = named(create(DEPLOYMENTS, "dep"))
    service = named(create(SERVICES, "svc", deployment))
    relay_export = named(create(SE, "relay-export", service))
    frontend_export = named(create(SE, "frontend-export"))
    old = Action(
        Verb.WITHDRAW, SE, "ns", "old-export", NAMES, live={"metadata": {"name": "old-export"}},
        wanted=False,
    )  # fmt: skip
    plan = [deployment, service, relay_export, frontend_export, old]
    writes = HeldWrites()
    run = asyncio.create_task(executor(writes).run(RELAY, plan))
    await settle()
    assert sorted(writes.in_flight) == ["dep", "frontend-export"]
    writes.answer("frontend-export")
    await settle()
    assert writes.in_flight == ["dep"]  # the withdrawal waits for every write before it
    writes.answer("dep")
    await settle()
    assert writes.in_flight == ["svc"]
    writes.answer("svc")
    await settle()
    assert writes.in_flight == ["relay-export"]
    writes.answer("relay-export")
    await settle()
    assert writes.in_flight == ["old-export"]
    writes.answer("old-export")
    outcome = await asyncio.wait_for(run, 1)
    assert [r.action for r in outcome.results] == plan
    assert {r.result for r in outcome.results} == {Result.DONE}


async def test_a_refused_need_skips_what_needs_it_and_nothing_else() -> None:
    deployment = named(create(DEPLOYMENTS, "dep"))
    service = named(create(SERVICES, "svc", deployment))
    export = named(create(SE, "frontend-export"))
    writes = HeldWrites(refuse=frozenset({"dep"}))
    for name in ("dep", "svc", "frontend-export"):
        writes.answer(name)
    outcome = await executor(writes).run(RELAY, [deployment, service, export])
    assert [r.result for r in outcome.results] == [Result.FAILED, Result.SKIPPED, Result.DONE]
    assert writes.sent.count("svc") == 0


async def test_one_write_runs_alone_in_the_plans_order() -> None:
    export = named(create(SE, "frontend-export"))
    none = Action(Verb.NONE, SERVICES, "ns", "svc", NAMES, live={"metadata": {"name": "svc"}})
    writes = HeldWrites()
    writes.answer("frontend-export")
    outcome = await executor(writes).run(RELAY, [none, export])
    assert [r.action for r in outcome.results] == [none, export]
    assert writes.sent == ["frontend-export"]
