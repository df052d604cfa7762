"""Secure metrics' caches and header parsing (what the API server decides is tested
against a real one in tests/integration/test_secure_metrics.py)."""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.runtime.clock import FakeClock
from dynamo_pool_operator.runtime.metrics_auth import (
    ALLOW_TTL,
    AUTHN_TTL,
    DENY_TTL,
    DelegatedAuth,
    bearer_token,
)


class Reviewer:
    """Answers reviews as a fixed API server would, counting them."""

    def __init__(self, allowed: bool = True) -> None:
        self.allowed = allowed
        self.kinds: list[str] = []

    async def create(self, res: Any, body: dict[str, Any], *_: Any, **__: Any) -> dict[str, Any]:
        self.kinds.append(body["kind"])
        if body["kind"] == "TokenReview":
            ok = body["spec"]["token"] == "good"
            user = {"username": "prom", "groups": ["g"], "extra": {"k": ["v"]}}
            return {"status": {"authenticated": ok, "user": user if ok else {}}}
        assert body["spec"]["user"] == "prom"
        assert body["spec"]["extra"] == {"k": ["v"]}
        assert body["spec"]["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": self.allowed}}


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("  Bearer   abc  ", "abc"),
        ("Basic abc", None),
        ("Bearer", None),
        ("Bearer  ", None),
        ("", None),
        (None, None),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


async def test_answers_and_ttls_are_controller_runtimes() -> None:
    clock, reviewer = FakeClock(), Reviewer()
    auth = DelegatedAuth(reviewer, clock=clock)  # type: ignore[arg-type]
    assert (await auth.verdict("Bearer good", "get", "/metrics")).status == 200
    assert (await auth.verdict("Bearer good", "get", "/metrics")).status == 200
    assert reviewer.kinds == ["TokenReview", "SubjectAccessReview"]
    await clock.advance(AUTHN_TTL)
    assert (await auth.verdict("Bearer good", "get", "/metrics")).status == 200
    assert reviewer.kinds[2:] == ["TokenReview"]  # the decision is still cached
    await clock.advance(ALLOW_TTL)
    await auth.verdict("Bearer good", "get", "/metrics")
    assert reviewer.kinds[3:] == ["TokenReview", "SubjectAccessReview"]


async def test_a_denial_is_cached_for_less_time() -> None:
    clock, reviewer = FakeClock(), Reviewer(allowed=False)
    auth = DelegatedAuth(reviewer, clock=clock)  # type: ignore[arg-type]
    assert (await auth.verdict("Bearer good", "get", "/metrics")).status == 403
    await clock.advance(DENY_TTL - 1)
    await auth.verdict("Bearer good", "get", "/metrics")
    assert reviewer.kinds.count("SubjectAccessReview") == 1
    await clock.advance(1)
    await auth.verdict("Bearer good", "get", "/metrics")
    assert reviewer.kinds.count("SubjectAccessReview") == 2


async def test_a_bad_token_is_401_and_remembered() -> None:
    reviewer = Reviewer()
    auth = DelegatedAuth(reviewer, clock=FakeClock())  # type: ignore[arg-type]
    for _ in range(3):
        assert (await auth.verdict("Bearer bad", "get", "/metrics")).status == 401
    assert reviewer.kinds == ["TokenReview"]
    assert (await auth.verdict(None, "get", "/metrics")).status == 401
