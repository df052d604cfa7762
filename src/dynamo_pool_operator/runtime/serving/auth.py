"""Who may read `/metrics`: authentication and authorization delegated to the API server.

As controller-runtime's `WithAuthenticationAndAuthorization`: a scrape carries a bearer
token, TokenReview says whose it is and SubjectAccessReview whether that user may `get`
the URL, so the cluster's RBAC decides who scrapes (one ClusterRole rule).

Answers are cached as controller-runtime does (a token a minute, allowed five minutes,
denied thirty seconds): a scraper costs about one review a minute, and a new grant
works within thirty seconds. A failed review is not cached and answers 500: the token
is not at fault.

Whoever reaches the port chooses the tokens, and each review spends the operator's own
priority-and-fairness flow (its Lease renewals'). So caches are keyed by the token's
SHA-256, accepted and rejected tokens are cached apart (bad ones cannot evict a
scraper's), and reviews follow reviews.py: single flight, and a question no answer of
the last `KNOWN_TTL` vouches for is reviewed only within a budget, past which it gets
429 and `Retry-After`.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.clock import Clock, SystemClock
from dynamo_pool_operator.runtime.objects.resources import Resource
from dynamo_pool_operator.runtime.registry import REGISTRY, per_registry
from dynamo_pool_operator.runtime.serving.reviews import (
    REVIEW_BURST,
    REVIEW_IN_FLIGHT,
    REVIEW_QPS,
    ReviewBudget,
    ReviewRefused,
    Reviews,
)

log = logging.getLogger(__name__)

TOKENREVIEWS = Resource(
    "authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False
)
SUBJECTACCESSREVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)

#: controller-runtime's TTLs (pkg/metrics/filters): token reviews, allowed, denied.
AUTHN_TTL = 60.0
ALLOW_TTL = 300.0
DENY_TTL = 30.0
#: Entries per cache; the oldest go first (a flood of random tokens cannot grow memory).
MAX_ENTRIES = 1024
#: A token the API server rejected is remembered as long as an accepted one.
REJECT_TTL = AUTHN_TTL
#: How long a token accepted, and a user allowed, are reviewed outside the budget (a
#: bound token's default lifetime).
KNOWN_TTL = 3600.0


@per_registry
def _review_metrics(registry: CollectorRegistry) -> tuple[Counter, Counter]:
    """The reviews of the secure metrics server by kind, and those its budget refused."""
    tokens = Counter(
        "metrics_auth_token_reviews_total",
        "TokenReviews of /metrics requests by result: accepted, rejected, failed (no "
        "answer), or refused (not made: past the budget for tokens not seen accepted).",
        ["result"],
        registry=registry,
    )
    access = Counter(
        "metrics_auth_access_reviews_total",
        "SubjectAccessReviews of /metrics requests by result: allowed, denied, failed (no "
        "answer), or refused (not made: past the budget for users not seen allowed).",
        ["result"],
        registry=registry,
    )
    return tokens, access


@dataclass(frozen=True, slots=True)
class User:
    """An authenticated user as the TokenReview named it."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Verdict:
    """The HTTP answer for one request: 200 lets it through."""

    status: int
    message: str = ""
    #: Seconds for `Retry-After` (a 429).
    retry_after: int | None = None

    @property
    def allowed(self) -> bool:
        return self.status == 200


@dataclass
class _TTLCache:
    clock: Clock
    max_entries: int = MAX_ENTRIES
    _entries: OrderedDict[Any, tuple[float, Any]] = field(default_factory=OrderedDict)

    def get(self, key: Any) -> tuple[bool, Any]:
        found = self._entries.get(key)
        if found is None:
            return False, None
        expires, value = found
        if self.clock.monotonic() >= expires:
            del self._entries[key]
            return False, None
        return True, value

    def pop(self, key: Any) -> None:
        self._entries.pop(key, None)

    def put(self, key: Any, value: Any, ttl: float) -> None:
        self._entries[key] = (self.clock.monotonic() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (the scheme in any case)."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class DelegatedAuth:
    """Authenticates bearer tokens and authorizes non-resource requests, by review.
    `client` must not be gated on leadership: followers serve metrics too."""

    def __init__(
        self,
        client: Client,
        *,
        clock: Clock | None = None,
        authn_ttl: float = AUTHN_TTL,
        allow_ttl: float = ALLOW_TTL,
        deny_ttl: float = DENY_TTL,
        reject_ttl: float = REJECT_TTL,
        known_ttl: float = KNOWN_TTL,
        review_in_flight: int = REVIEW_IN_FLIGHT,
        review_burst: int = REVIEW_BURST,
        review_qps: float = REVIEW_QPS,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.client = client
        clock = clock or SystemClock()
        self._accepted = _TTLCache(clock)
        self._rejected = _TTLCache(clock)
        self._known = _TTLCache(clock)  # token hashes accepted in the last known_ttl
        self._decisions = _TTLCache(clock)
        self._allowed = _TTLCache(clock)  # (user, verb, path) allowed in the last known_ttl
        self.authn_ttl, self.allow_ttl, self.deny_ttl = authn_ttl, allow_ttl, deny_ttl
        self.reject_ttl, self.known_ttl = reject_ttl, known_ttl
        budget = ReviewBudget(clock, in_flight=review_in_flight, burst=review_burst, qps=review_qps)
        self._token_reviews: Reviews[User | None] = Reviews(budget)
        self._access_reviews: Reviews[tuple[bool, str]] = Reviews(budget)
        self._token_results, self._access_results = _review_metrics(
            registry if registry is not None else REGISTRY
        )
        #: Reviews sent to the API server (what the caches save), for tests and debugging.
        self.reviews = 0

    @property
    def refused(self) -> int:
        """Requests refused by the review budget, for tests and debugging."""
        return self._token_reviews.budget.refused

    async def authenticate(self, token: str) -> User | None:
        """The token's user, or None when the API server does not accept it. Raises
        `errors.ApiError` when the review fails, `ReviewRefused` past the budget."""
        key = hashlib.sha256(token.encode()).digest()  # never keep the token itself
        hit, user = self._accepted.get(key)
        if hit:
            return user  # type: ignore[no-any-return]
        if self._rejected.get(key)[0]:
            return None
        try:
            return await self._token_reviews.ask(
                key,
                lambda: self._review_token(key, token),
                budgeted=not self._known.get(key)[0],
            )
        except ReviewRefused:
            self._token_results.labels("refused").inc()
            raise

    async def _review_token(self, key: bytes, token: str) -> User | None:
        self.reviews += 1
        try:
            review = await self.client.create(
                TOKENREVIEWS,
                {
                    "apiVersion": TOKENREVIEWS.api_version,
                    "kind": TOKENREVIEWS.kind,
                    "spec": {"token": token},
                },
            )
        except errors.ApiError:
            self._token_results.labels("failed").inc()
            raise
        user = _user_of(review.get("status") or {})
        if user is None:
            self._token_results.labels("rejected").inc()
            self._rejected.put(key, None, self.reject_ttl)
            self._known.pop(key)  # revoked: its next review is budgeted again
        else:
            self._token_results.labels("accepted").inc()
            self._accepted.put(key, user, self.authn_ttl)
            self._known.put(key, None, self.known_ttl)
        return user

    async def authorize(self, user: User, verb: str, path: str) -> tuple[bool, str]:
        """(allowed, reason) for `verb` on the non-resource URL `path`. Raises
        `errors.ApiError` when the review fails, `ReviewRefused` past the budget."""
        key = (user, verb, path)
        hit, decision = self._decisions.get(key)
        if hit:
            return decision  # type: ignore[no-any-return]
        try:
            return await self._access_reviews.ask(
                key,
                lambda: self._review_access(user, verb, path),
                budgeted=not self._allowed.get(key)[0],
            )
        except ReviewRefused:
            self._access_results.labels("refused").inc()
            raise

    async def _review_access(self, user: User, verb: str, path: str) -> tuple[bool, str]:
        self.reviews += 1
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        try:
            review = await self.client.create(
                SUBJECTACCESSREVIEWS,
                {
                    "apiVersion": SUBJECTACCESSREVIEWS.api_version,
                    "kind": SUBJECTACCESSREVIEWS.kind,
                    "spec": spec,
                },
            )
        except errors.ApiError:
            self._access_results.labels("failed").inc()
            raise
        status = review.get("status") or {}
        decision = (status.get("allowed") is True, str(status.get("reason") or ""))
        key = (user, verb, path)
        if decision[0]:
            self._access_results.labels("allowed").inc()
            self._decisions.put(key, decision, self.allow_ttl)
            self._allowed.put(key, None, self.known_ttl)
        else:
            self._access_results.labels("denied").inc()
            self._decisions.put(key, decision, self.deny_ttl)
            self._allowed.pop(key)  # revoked: its next review is budgeted again
        return decision

    async def verdict(self, authorization: str | None, verb: str, path: str) -> Verdict:
        """What to answer a request with this `Authorization` header."""
        token = bearer_token(authorization)
        if token is None:
            return Verdict(401, "Unauthorized: send a bearer token")
        try:
            user = await self.authenticate(token)
        except ReviewRefused as e:
            return _too_many("token", e)
        except errors.ApiError as e:
            log.warning("metrics: the TokenReview failed, answering 500: %s", e)
            return Verdict(500, "Authentication failed")
        if user is None:
            log.debug("metrics: a token the API server does not accept")
            return Verdict(401, "Unauthorized")
        try:
            allowed, reason = await self.authorize(user, verb, path)
        except ReviewRefused as e:
            return _too_many("access", e)
        except errors.ApiError as e:
            log.warning("metrics: the SubjectAccessReview for %s failed: %s", user.name, e)
            return Verdict(500, f"Authorization for user {user.name} failed")
        if not allowed:
            log.debug("metrics: %s may not %s %s: %s", user.name, verb, path, reason)
            return Verdict(403, f"Authorization denied for user {user.name}")
        return Verdict(200)


def _too_many(kind: str, refused: ReviewRefused) -> Verdict:
    retry = max(1, math.ceil(refused.retry_after))
    return Verdict(429, f"Too many {kind} reviews, retry later", retry_after=retry)


def _user_of(status: Mapping[str, Any]) -> User | None:
    if status.get("authenticated") is not True:
        return None
    info = status.get("user") or {}
    extra = info.get("extra") or {}
    return User(
        name=str(info.get("username") or ""),
        uid=str(info.get("uid") or ""),
        groups=tuple(str(g) for g in info.get("groups") or ()),
        extra=tuple(sorted((str(k), tuple(str(x) for x in v or ())) for k, v in extra.items())),
    )
