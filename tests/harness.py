"""The operator under test as the tests drive it: the shipped harness (which the
benchmark shares), with what only tests ask of it: to prove that a second reconcile
writes nothing (from the API server's audit log), and to wait for a condition.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from dynamo_pool_operator.localcluster import harness
from dynamo_pool_operator.localcluster.audit import AuditEvent
from dynamo_pool_operator.localcluster.harness import OPERATOR_AGENT
from dynamo_pool_operator.runtime import Request

__all__ = ["OPERATOR_AGENT", "OperatorUnderTest", "eventually"]


class OperatorUnderTest(harness.OperatorUnderTest):
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
