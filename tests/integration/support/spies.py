"""Watching the operator's writes: `WritePause` holds one write of the operator's
client just before it is sent, after the plan was made from the cache, so a test can
change the object through the API in between (our own timing is held; the API server
is always the real one); `Spy` records what it emitted and which passes failed; the
audit log shows which export writes it made."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from dynamo_pool_operator.localcluster.audit import AuditEvent
from dynamo_pool_operator.pool.model import Verb
from dynamo_pool_operator.runtime.objects.resources import Resource
from tests.harness import OperatorUnderTest
from tests.integration.support.export_fixtures import (
    SE,
)
from tests.integration.support.relay_fixtures import POOL

# ---------------------------------------------------------------- pausing the operator
#: The HTTP method of each writing verb, as the guarded writes send it.
_METHODS = {Verb.CREATE: "POST", Verb.APPLY: "PATCH", Verb.WITHDRAW: "DELETE"}


class WritePause:
    """`async with WritePause(op, Verb.WITHDRAW, "x", ns) as pause:` — the first time
    the operator's client is about to send that write of export `name` in namespace
    `ns` (its plan already made from the cache), the request is held until
    `pause.release()`; then it is sent as it was. What the server answered is kept:
    `pause.answer`, or `pause.error` (the classified `ApiError`). `pause.guards` are the
    uid and resourceVersion the write carries (its preconditions).

    It intercepts the operator's client (the one seam every write goes through), as
    controller-runtime's interceptor client does; the API server is always the real
    one. The namespace is required: the operator is cluster-wide, and a relay of the
    same name in an earlier test's namespace (still being deleted) may make the same
    write at that moment."""

    def __init__(
        self,
        op: OperatorUnderTest,
        verb: Verb,
        name: str,
        namespace: str,
        *,
        resource: Resource = SE,
        timeout: float = 20.0,
    ) -> None:
        assert op.client is not None, "the operator is not running"
        self.client: Any = op.client
        self.method = _METHODS[verb]
        self.collection = resource.path(namespace)
        self.path = resource.path(namespace, name)
        self.name = name
        self.timeout = timeout
        self.body: dict[str, Any] = {}
        self.answer: Any = None
        self.error: BaseException | None = None
        self.done = asyncio.Event()
        self._reached = asyncio.Event()
        self._release = asyncio.Event()
        self._original: Callable[..., Awaitable[Any]] = self.client.request

    def _matches(self, method: str, path: str, body: Any) -> bool:
        if self._reached.is_set() or method != self.method:
            return False
        if method == "POST":
            meta = (body or {}).get("metadata") or {}
            return path == self.collection and meta.get("name") == self.name
        return path == self.path

    async def _request(self, method: str, path: str, **kw: Any) -> Any:
        if not self._matches(method, path, kw.get("body")):
            return await self._original(method, path, **kw)
        self.body = dict(kw.get("body") or {})
        self._reached.set()
        await asyncio.wait_for(self._release.wait(), self.timeout)
        try:
            self.answer = await self._original(method, path, **kw)
        except Exception as e:
            self.error = e
            raise
        finally:
            self.done.set()
        return self.answer

    @property
    def guards(self) -> dict[str, str]:
        """The uid and resourceVersion the held write carries."""
        if self.method == "DELETE":
            return dict(self.body.get("preconditions") or {})
        meta = self.body.get("metadata") or {}
        return {k: meta[k] for k in ("uid", "resourceVersion") if k in meta}

    async def __aenter__(self) -> WritePause:
        self.client.request = self._request
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        if self._reached.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.done.wait(), self.timeout)
        self.client.request = self._original

    async def reached(self) -> dict[str, Any]:
        """Wait until the operator's write is held; returns the body it would send."""
        await asyncio.wait_for(self._reached.wait(), self.timeout)
        return self.body

    async def release(self) -> None:
        """Let the held write go and wait until the server answered."""
        self._release.set()
        await asyncio.wait_for(self.done.wait(), self.timeout)


# ---------------------------------------------------------------- reading what happened
@dataclass(frozen=True)
class Emitted:
    regarding: tuple[str, str]
    type: str
    reason: str
    action: str
    related: dict[str, Any]
    note: str


class Spy:
    """Records, per relay, the reconciles that raised and the events recorded, by
    wrapping the operator's own reconciler and recorder (the operator is cluster-wide,
    so its metrics also count relays left in other tests' namespaces)."""

    def __init__(self, op: OperatorUnderTest) -> None:
        self.errors: list[tuple[tuple[str, str], Exception]] = []
        #: Passes that ended in a lost race (`Result(requeue=True)`), by relay.
        self.requeues: list[tuple[str, str]] = []
        self.events: list[Emitted] = []
        reconciler: Any = op.running.reconciler
        recorder: Any = op.running.recorder
        reconcile, emit = reconciler.reconcile, recorder.emit

        async def spied_reconcile(request: tuple[str, str]) -> Any:
            try:
                result = await reconcile(request)
            except Exception as e:
                self.errors.append((request, e))
                raise
            if result is not None and result.requeue:
                self.requeues.append(request)
            return result

        def spied_emit(
            regarding: Any, related: Any, type_: str, reason: str, action: str, note: str
        ) -> None:
            key = (str(regarding.get("namespace", "")), str(regarding.get("name", "")))
            self.events.append(Emitted(key, type_, reason, action, dict(related or {}), note))
            emit(regarding, related, type_, reason, action, note)

        reconciler.reconcile = spied_reconcile
        recorder.emit = spied_emit

    def requeued(self, ns: str, name: str = POOL) -> int:
        """How many passes of relay `ns/name` lost a race and were requeued."""
        return self.requeues.count((ns, name))

    def errors_of(self, ns: str, name: str = POOL) -> list[Exception]:
        return [e for key, e in self.errors if key == (ns, name)]

    def emitted(self, ns: str, reason: str, name: str = POOL) -> list[Emitted]:
        return [e for e in self.events if e.regarding == (ns, name) and e.reason == reason]


async def export_writes(
    op: OperatorUnderTest, since: int, ns: str, name: str | None = None
) -> list[AuditEvent]:
    """The operator's ServiceExport writes in `ns` after audit offset `since` (the
    operator is cluster-wide: other tests' namespaces may hold exports of the same name)."""
    return [
        w
        for w in await op.writes_since(since)
        if w.resource == "serviceexports" and w.namespace == ns and (name is None or w.name == name)
    ]


def verbs(writes: list[AuditEvent]) -> list[tuple[str, int]]:
    return [(w.verb, w.code) for w in writes]


@contextlib.asynccontextmanager
async def paused(
    op: OperatorUnderTest, verb: Verb, name: str, namespace: str
) -> AsyncIterator[tuple[WritePause, Spy, int]]:
    """(the pause, a `Spy` on `op`, the audit offset before it) while `op`'s `verb` of
    `namespace/name` is held (`WritePause`)."""
    since = op.cp.audit.offset()
    spy = Spy(op)
    async with WritePause(op, verb, name, namespace) as pause:
        yield pause, spy, since
