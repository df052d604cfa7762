"""The operator under test on a private control plane, with what every such test
starts from: a fresh namespace, an admin client, and the log captured at INFO."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import pytest

from dynamo_pool_operator import process
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.api_fixtures import namespace

#: How a test starts the operator: `OperatorUnderTest` itself, or one with less RBAC.
Start = Callable[
    [ControlPlane, OperatorConfiguration], AbstractAsyncContextManager[OperatorUnderTest]
]


def admin(cp: ControlPlane) -> Client:
    """The runtime's own client as the plane's admin (system:masters)."""
    return Client(load_kubeconfig(cp.kubeconfig), user_agent="dpo-tests")


@contextlib.asynccontextmanager
async def running(
    cp: ControlPlane,
    cfg: OperatorConfiguration,
    caplog: pytest.LogCaptureFixture | None = None,
    *,
    start: Start = OperatorUnderTest,
) -> AsyncIterator[tuple[Client, OperatorUnderTest, str]]:
    """(admin client, operator, fresh namespace) while the operator runs with `cfg`."""
    ns = namespace(cp)
    if caplog is not None:
        caplog.set_level(logging.INFO)
    async with admin(cp) as client, start(cp, cfg) as op:
        yield client, op, ns


def messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    """What was logged at exactly `level`."""
    return [r.getMessage() for r in caplog.records if r.levelno == level]


#: What the operator logs once it leads and its controllers run.
LEADING = "leading: controllers started"


async def run_until_leading(
    cfg: OperatorConfiguration,
    cp: ControlPlane,
    caplog: pytest.LogCaptureFixture,
    timeout: float = 30,
) -> tuple[asyncio.Event, asyncio.Task[int]]:
    """The shipped process (`process.run`) started and leading; stopped again if it
    does not lead in time. Stop it with `stop_operator`."""
    stop = asyncio.Event()
    task = asyncio.create_task(process.run(cfg, kubeconfig=str(cp.kubeconfig), stop=stop))

    async def leading() -> bool:
        if task.done():
            raise AssertionError(f"the operator exited with {task.result()}")
        return any(r.getMessage() == LEADING for r in caplog.records)

    try:
        await eventually(leading, timeout=timeout)
    except BaseException:
        await stop_operator(stop, task)
        raise
    return stop, task


async def stop_operator(stop: asyncio.Event, task: asyncio.Task[int]) -> int:
    """Ask the process to stop; its exit code."""
    stop.set()
    return await asyncio.wait_for(task, 30)
