"""A fixed API server for the secure metrics' unit tests: it answers TokenReviews and
SubjectAccessReviews, counts them, and holds or fails each kind on demand."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.serving.auth import DelegatedAuth, Verdict
from tests.clock import FakeClock
from tests.unit.runtime.client.fake import FakeClient

GET = ("get", "/metrics")


class Reviewer(FakeClient):
    """Answers reviews as a fixed API server would, counting them. The token `good` is
    user `prom`; any other token in `accepted` is the user of its own name. Every user
    is allowed when `allowed`, except those in `denied`. While `gate` (`access_gate`)
    is set, TokenReviews (SubjectAccessReviews) wait for it; with `fail`
    (`access_fail`) set they fail as an unreachable server."""

    def __init__(self, allowed: bool = True) -> None:
        super().__init__()
        self.allowed = allowed
        self.accepted = {"good"}
        self.denied: set[str] = set()
        self.kinds: list[str] = []
        self.gate: asyncio.Event | None = None
        self.access_gate: asyncio.Event | None = None
        self.fail = False
        self.access_fail = False

    @property
    def token_reviews(self) -> int:
        return self.kinds.count("TokenReview")

    @property
    def access_reviews(self) -> int:
        return self.kinds.count("SubjectAccessReview")

    async def create(self, res: Any, body: dict[str, Any], *_: Any, **__: Any) -> dict[str, Any]:
        self.kinds.append(body["kind"])
        if body["kind"] == "TokenReview":
            return await self._token_review(body["spec"]["token"])
        if self.access_gate is not None:
            await self.access_gate.wait()
        if self.access_fail:
            raise errors.ApiError("connection refused")
        spec = body["spec"]
        assert spec["extra"] == {"k": ["v"]}
        assert spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": self.allowed and spec["user"] not in self.denied}}

    async def _token_review(self, token: str) -> dict[str, Any]:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise errors.ApiError("connection refused")
        if token not in self.accepted:
            return {"status": {"authenticated": False, "user": {}}}
        name = "prom" if token == "good" else token
        user = {"username": name, "groups": ["g"], "extra": {"k": ["v"]}}
        return {"status": {"authenticated": True, "user": user}}


def auth_of(reviewer: Reviewer, clock: FakeClock, **kw: Any) -> DelegatedAuth:
    return DelegatedAuth(reviewer, clock=clock, registry=CollectorRegistry(), **kw)


async def verdicts(auth: DelegatedAuth, tokens: list[str]) -> list[Verdict]:
    return await asyncio.gather(*(auth.verdict(f"Bearer {t}", *GET) for t in tokens))


async def settle() -> None:
    """Let every task run as far as it can (a review, its waiters, the next review)."""
    for _ in range(20):
        await asyncio.sleep(0)
