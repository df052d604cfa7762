"""API errors, classified once.

Every non-2xx answer from the API server becomes exactly one of these classes,
decided from the HTTP status and the `Status.reason` the server sends (as
client-go's `k8s.io/apimachinery/pkg/api/errors` does). Callers then branch on
the class, never on status codes or message text.
"""

from __future__ import annotations

from typing import Any


class Reported(Exception):
    """A failure whose message says all a user needs (what failed, and the answer):
    logged in one line, without a traceback. A traceback is for our own bugs."""


class Failures(Reported):
    """Several failures of one pass, each named in the message."""

    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        super().__init__("; ".join(str(e) for e in failures))


class ApiError(Reported):
    """An error answer from the API server (or the way to it)."""

    #: HTTP status code, 0 when no answer was received.
    status: int
    #: `Status.reason` as sent by the server ("NotFound", "Conflict", ...).
    reason: str
    #: `Status.message` as sent by the server.
    message: str
    #: `Status.details`, when the server sent them.
    details: dict[str, Any]
    #: Seconds the server asked us to wait before trying again (the Retry-After header,
    #: else `Status.details.retryAfterSeconds`); None when it did not say.
    retry_after: float | None

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        reason: str = "",
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details or {}
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """True when the same request may succeed later without any change."""
        return False

    def __str__(self) -> str:
        where = f"{self.status or ''} {self.reason}".strip()
        return f"{where}: {self.message}" if where else self.message


class NotFound(ApiError):
    """404: the object (or the resource) does not exist."""


class AlreadyExists(ApiError):
    """409 AlreadyExists: a create found an object of that name."""


class Conflict(ApiError):
    """409 Conflict: a precondition (uid, resourceVersion) or an optimistic update failed,
    or a server-side apply hit a field conflict."""


class Forbidden(ApiError):
    """403: RBAC (or an admission plugin) refused the request."""


class NamespaceTerminating(Forbidden):
    """403 with cause NamespaceTerminating: a create in a namespace being deleted. Not a
    failure of the writer: the namespace and everything in it are going away, so
    Kubernetes' own controllers drop it silently (and so do we)."""


#: The `Status.details.causes[].type` the namespace lifecycle plugin gives such a refusal.
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"


class Unauthorized(ApiError):
    """401: the credentials were not accepted; auth may need refreshing."""


class Invalid(ApiError):
    """422 Invalid (or 400 BadRequest): the request itself must change."""


class Gone(ApiError):
    """410 Gone / Expired: the resourceVersion asked for is compacted; relist."""

    @property
    def retryable(self) -> bool:
        return True


class TooManyRequests(ApiError):
    """429: API Priority and Fairness (or a webhook) asks us to slow down."""

    @property
    def retryable(self) -> bool:
        return True


class ServerError(ApiError):
    """5xx: the server (or an admission webhook behind it) failed."""

    @property
    def retryable(self) -> bool:
        return True


class ServerTimeout(ApiError):
    """504 / Status reason Timeout / ServerTimeout, or no answer in time."""

    @property
    def retryable(self) -> bool:
        return True


class ConnectionFailed(ApiError):
    """No HTTP answer at all: refused, reset, TLS failure, DNS."""

    @property
    def retryable(self) -> bool:
        return True


class NotLeader(ApiError):
    """The write was not sent: this process does not (or no longer) hold the leader
    Lease. Raised by the client's write gate, never by the server."""


def classify(
    status: int, body: dict[str, Any] | None, retry_after: float | None = None
) -> ApiError:
    """Turn an HTTP status and a decoded `Status` body into one error class."""
    body = body or {}
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or f"HTTP {status}")
    details = body.get("details") if isinstance(body.get("details"), dict) else None
    if retry_after is None and details:
        ras = details.get("retryAfterSeconds")
        retry_after = float(ras) if isinstance(ras, int | float) and ras > 0 else None
    kw: dict[str, Any] = {"status": status, "reason": reason, "details": details}
    # Kept only where it means "try again": 429 and 5xx, as client-go's checkWait.
    retry_kw: dict[str, Any] = {**kw, "retry_after": retry_after}
    if status == 404:
        return NotFound(message, **kw)
    if status == 409:
        if reason == "AlreadyExists":
            return AlreadyExists(message, **kw)
        return Conflict(message, **kw)
    if status == 410 or reason in ("Gone", "Expired"):
        return Gone(message, **kw)
    if status == 403:
        causes = (details or {}).get("causes")
        if isinstance(causes, list) and any(
            isinstance(c, dict) and c.get("reason") == NAMESPACE_TERMINATING_CAUSE for c in causes
        ):
            return NamespaceTerminating(message, **kw)
        return Forbidden(message, **kw)
    if status == 401:
        return Unauthorized(message, **kw)
    if status in (400, 422):
        return Invalid(message, **kw)
    if status == 429:
        return TooManyRequests(message, **retry_kw)
    if status == 504 or reason in ("Timeout", "ServerTimeout"):
        return ServerTimeout(message, **(retry_kw if status >= 500 else kw))
    if status >= 500:
        return ServerError(message, **retry_kw)
    return ApiError(message, **kw)
