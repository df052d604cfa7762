"""Which verbs send a write (pool/execute.py `Executor.run`): CREATE, APPLY and
WITHDRAW, each once; NONE, WAIT and FOREIGN send nothing and come to DONE at once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.pool.execute import Executor
from dynamo_pool_operator.pool.model import Action, EventNames, Result, Verb
from dynamo_pool_operator.runtime.objects.resources import SERVICES, Resource
from tests.unit.pool.test_execute_order import RELAY, Events

LIVE = {"metadata": {"name": "svc", "namespace": "ns", "uid": "s"}}


class Recorded:
    """Answers every write at once and notes its verb."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def create(self, res: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        self.sent.append("create")
        return dict(LIVE)

    async def apply(
        self, res: Resource, body: Mapping[str, Any], live: Mapping[str, Any]
    ) -> dict[str, Any]:
        self.sent.append("apply")
        return dict(LIVE)

    async def delete(self, res: Resource, live: Mapping[str, Any]) -> bool:
        self.sent.append("delete")
        return True


@pytest.mark.parametrize(
    ("verb", "sent"),
    [
        (Verb.CREATE, ["create"]),
        (Verb.APPLY, ["apply"]),
        (Verb.WITHDRAW, ["delete"]),
        (Verb.NONE, []),
        (Verb.WAIT, []),
        (Verb.FOREIGN, []),
    ],
)
async def test_exactly_the_writing_verbs_send_a_write(verb: Verb, sent: list[str]) -> None:
    writes = Recorded()
    action = Action(verb, SERVICES, "ns", "svc", EventNames("Failed"), live=LIVE, body={})
    executor = Executor(writes, Events(), CollectorRegistry())  # type: ignore[arg-type]
    outcome = await executor.run(RELAY, [action])
    assert writes.sent == sent
    assert [r.result for r in outcome.results] == [Result.DONE]
