"""The operator under test: the shipped wiring (`operator.build`), run in process against
a real control plane, for the tests and the benchmark; with what tests ask of it: to prove
that a second reconcile writes nothing (from the API server's audit log), and to wait for
a condition.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from dynamo_pool_operator import operator
from dynamo_pool_operator.api import names
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.localcluster.audit import AuditEvent
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime import (
    DEFAULT_USER_AGENT,
    Client,
    Request,
    load_kubeconfig,
)
from dynamo_pool_operator.served_apis import discover_served_apis

#: Writes by the operator carry this user agent prefix.
OPERATOR_AGENT = DEFAULT_USER_AGENT.split("/")[0] + "/"


class OperatorUnderTest:
    """`async with OperatorUnderTest(cp, config) as op:` runs the operator until exit."""

    def __init__(
        self,
        control_plane: ControlPlane,
        config: OperatorConfiguration | None = None,
        *,
        kubeconfig: Path | None = None,
        identity: str = "test-operator",
    ) -> None:
        self.cp = control_plane
        self.config = config or OperatorConfiguration()
        self.kubeconfig = kubeconfig or control_plane.kubeconfig
        self.identity = identity
        self.registry = CollectorRegistry()
        self.client: Client | None = None
        self.op: operator.Operator | None = None

    async def __aenter__(self) -> OperatorUnderTest:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        pace = self.config.client_connection
        self.client = Client(
            load_kubeconfig(self.kubeconfig),
            qps=pace.qps,
            burst=pace.burst,
            field_manager=names.FIELD_MANAGER,
        )
        try:
            served = await discover_served_apis(self.client, self.config.multi_cluster)
            self.op = operator.build(
                self.client, self.config, served, identity=self.identity, registry=self.registry
            )
            await self.op.start()
        except BaseException:
            # `async with` does not call __aexit__ when __aenter__ raises: without this
            # a test expecting a startup failure leaked the client and its connections.
            await self.stop()
            raise

    async def stop(self) -> None:
        if self.op is not None:
            await self.op.stop(drain_timeout=10)
            self.op = None
        if self.client is not None:
            await self.client.close()
            self.client = None

    @property
    def running(self) -> operator.Operator:
        assert self.op is not None, "operator not started"
        return self.op

    async def settle(self, timeout: float = 30.0, quiet: float = 0.3) -> None:
        """Wait until no key is queued or in flight for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            if self.running.controller.settled:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= quiet:
                    return
            else:
                quiet_since = None
            await asyncio.sleep(0.02)
        q = self.running.controller.queue
        raise TimeoutError(
            f"operator did not settle in {timeout}s: {len(q)} keys queued, "
            f"{q.processing} in flight, {q.delayed} delayed"
        )

    async def reconcile_again(
        self, request: Request, *, include_events: bool = False
    ) -> list[AuditEvent]:
        """Settle, reconcile `request` once more by hand, and return the writes it made
        (Events excluded unless asked: a repeated warning is a series update by design).

        The pass decides afresh: the reconciler skips a pass on the inputs of a quiet
        one, and after `settle` the last pass usually was; skipped, "the second pass
        writes nothing" would hold whatever the plan said."""
        await self.settle()
        since = self.cp.audit.offset()
        self.running.reconciler.inputs_changed()
        await self.running.reconciler.reconcile(request)
        # Only this key's namespace: a cluster-wide operator may meanwhile (rightly)
        # reconcile other tests' relays in namespaces being deleted.
        writes = await asyncio.to_thread(
            self.cp.audit.writes, since, user_agent_prefix=OPERATOR_AGENT
        )
        return [
            w
            for w in writes
            if w.namespace == request[0] and (include_events or w.resource != "events")
        ]

    async def writes_since(self, offset: int) -> list[AuditEvent]:
        return await asyncio.to_thread(
            self.cp.audit.writes, offset, user_agent_prefix=OPERATOR_AGENT
        )


async def eventually(
    probe: Callable[[], Awaitable[Any]], *, timeout: float = 20.0, interval: float = 0.05
) -> Any:
    """Poll `probe` until it returns a truthy value (returned) or raise with the last one."""
    deadline = time.monotonic() + timeout
    last: Any = None
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            last = await probe()
            last_error = None
            if last:
                return last
        except Exception as e:  # the object may not exist yet
            last_error = e
        await asyncio.sleep(interval)
    raise AssertionError(
        f"condition not met in {timeout}s; last value {last!r}, last error {last_error!r}"
    )
