"""Who may read `/metrics`: authentication and authorization delegated to the API server.

As controller-runtime's `filters.WithAuthenticationAndAuthorization` (kubebuilder v4's
secure metrics), a scrape must carry a bearer token; the API server says whose it is
(TokenReview) and whether that user may `get` the non-resource URL of the request
(SubjectAccessReview). So the cluster's own RBAC decides who scrapes, and the grant is
one ClusterRole rule (`nonResourceURLs: [/metrics], verbs: [get]`) for the scraper.

Answers are cached as controller-runtime caches them: a token's review for a minute
(either way), an allowed decision for five minutes and a denied one for thirty seconds,
so a Prometheus scraping every few seconds costs the API server about one review a
minute, and a grant just made is honoured within thirty seconds. A review that fails
(the API server unreachable, our RBAC missing) is not cached and answers 500: the
scraper's token is not at fault, and the log says what is.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import errors
from .client import Client
from .clock import Clock, SystemClock
from .resources import Resource

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

    `client` must be allowed to create tokenreviews and subjectaccessreviews, and must
    not be gated on leadership: followers serve metrics too."""

    def __init__(
        self,
        client: Client,
        *,
        clock: Clock | None = None,
        authn_ttl: float = AUTHN_TTL,
        allow_ttl: float = ALLOW_TTL,
        deny_ttl: float = DENY_TTL,
    ) -> None:
        self.client = client
        clock = clock or SystemClock()
        self._tokens = _TTLCache(clock)
        self._decisions = _TTLCache(clock)
        self.authn_ttl, self.allow_ttl, self.deny_ttl = authn_ttl, allow_ttl, deny_ttl
        #: Reviews sent to the API server (what the caches save), for tests and debugging.
        self.reviews = 0

    async def authenticate(self, token: str) -> User | None:
        """The token's user, or None when the API server does not accept the token.
        Raises `errors.ApiError` when the review itself fails."""
        key = hashlib.sha256(token.encode()).digest()  # never keep the token itself
        hit, user = self._tokens.get(key)
        if hit:
            return user  # type: ignore[no-any-return]
        self.reviews += 1
        review = await self.client.create(
            TOKENREVIEWS,
            {
                "apiVersion": TOKENREVIEWS.api_version,
                "kind": TOKENREVIEWS.kind,
                "spec": {"token": token},
            },
        )
        user = _user_of(review.get("status") or {})
        self._tokens.put(key, user, self.authn_ttl)
        return user

    async def authorize(self, user: User, verb: str, path: str) -> tuple[bool, str]:
        """(allowed, reason) for `verb` on the non-resource URL `path`."""
        key = (user, verb, path)
        hit, decision = self._decisions.get(key)
        if hit:
            return decision  # type: ignore[no-any-return]
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
        review = await self.client.create(
            SUBJECTACCESSREVIEWS,
            {
                "apiVersion": SUBJECTACCESSREVIEWS.api_version,
                "kind": SUBJECTACCESSREVIEWS.kind,
                "spec": spec,
            },
        )
        status = review.get("status") or {}
        decision = (status.get("allowed") is True, str(status.get("reason") or ""))
        self._decisions.put(key, decision, self.allow_ttl if decision[0] else self.deny_ttl)
        return decision

    async def verdict(self, authorization: str | None, verb: str, path: str) -> Verdict:
        """What to answer a request with this `Authorization` header."""
        token = bearer_token(authorization)
        if token is None:
            return Verdict(401, "Unauthorized: send a bearer token")
        try:
            user = await self.authenticate(token)
        except errors.ApiError as e:
            log.warning("metrics: the TokenReview failed, answering 500: %s", e)
            return Verdict(500, "Authentication failed")
        if user is None:
            log.debug("metrics: a token the API server does not accept")
            return Verdict(401, "Unauthorized")
        try:
            allowed, reason = await self.authorize(user, verb, path)
        except errors.ApiError as e:
            log.warning("metrics: the SubjectAccessReview for %s failed: %s", user.name, e)
            return Verdict(500, f"Authorization for user {user.name} failed")
        if not allowed:
            log.debug("metrics: %s may not %s %s: %s", user.name, verb, path, reason)
            return Verdict(403, f"Authorization denied for user {user.name}")
        return Verdict(200)


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
