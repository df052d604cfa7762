"""A create that finds its name taken (pool/execute.py): an action that reads a
name found taken comes back LOST with the object of that name as read (`found`), for
the next pass to decide on; any other comes back LOST with nothing read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from dynamo_pool_operator.api.relay import RelayDefaults, relay_from_object
from dynamo_pool_operator.pool.execute import Executor
from dynamo_pool_operator.pool.model import Action, EventNames, Result, Verb
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, Resource
from dynamo_pool_operator.runtime.writes.guarded import NameTaken

RELAY = relay_from_object(
    {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}, RelayDefaults(image="i", port=1)
)
THEIRS = {"metadata": {"name": "p-pool-relay", "namespace": "ns", "uid": "theirs"}}


class TakenWrites:
    """Every create finds the name taken; `read` answers `there` and counts."""

    def __init__(self, there: dict[str, Any] | None) -> None:
        self.there = there
        self.reads: list[tuple[str, str]] = []

    async def create(self, res: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        raise NameTaken(f"create of {res.kind} {body['metadata']['name']}: the name is taken")

    async def read(self, res: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads.append((namespace, name))
        return self.there


class Events:
    def emit(self, *args: Any) -> None:
        pass


def create(*, read_if_taken: bool) -> Action:
    body = {"metadata": {"name": "p-pool-relay", "namespace": "ns"}}
    return Action(
        Verb.CREATE,
        DEPLOYMENTS,
        "ns",
        "p-pool-relay",
        EventNames("Failed"),
        body=body,
        read_if_taken=read_if_taken,
    )


async def run(writes: TakenWrites, action: Action) -> Any:
    executor = Executor(writes, Events(), CollectorRegistry())  # type: ignore[arg-type]
    return (await executor.run(RELAY, [action])).results[0]


async def test_a_name_taken_is_read_and_the_object_comes_back_as_found() -> None:
    writes = TakenWrites(THEIRS)
    result = await run(writes, create(read_if_taken=True))
    assert (result.result, result.found) == (Result.LOST, THEIRS)
    assert writes.reads == [("ns", "p-pool-relay")]
    assert "the name is taken" in result.message


async def test_a_name_taken_and_gone_again_is_a_lost_race_with_nothing_found() -> None:
    result = await run(TakenWrites(None), create(read_if_taken=True))
    assert (result.result, result.found) == (Result.LOST, None)


async def test_an_action_that_does_not_read_a_name_taken_reads_nothing() -> None:
    writes = TakenWrites(THEIRS)
    result = await run(writes, create(read_if_taken=False))
    assert (result.result, result.found, writes.reads) == (Result.LOST, None, [])
