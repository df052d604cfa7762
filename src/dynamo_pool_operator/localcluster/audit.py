"""Reading the API server's audit log: the proof of what was written, and by whom. The
policy records every write (Metadata level) and every request on Secrets, reads included
(the proof that the operator never reads one).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "verbs": ["create", "update", "patch", "delete", "deletecollection"]},
        # Any request on Secrets (get, list, watch too), allowed or refused: the operator
        # must make none. Metadata level never logs a Secret's data.
        {"level": "Metadata", "resources": [{"group": "", "resources": ["secrets"]}]},
        {"level": "None"},
    ],
}
WRITE_VERBS = frozenset(AUDIT_POLICY["rules"][0]["verbs"])
#: The resources whose every request is logged, reads included: (API group, resource).
READ_AUDITED = frozenset(
    (group["group"], resource)
    for rule in AUDIT_POLICY["rules"][1:-1]
    for group in rule["resources"]
    for resource in group["resources"]
)
MARKER_PREFIX = "audit-marker-"

#: (method, path, body) -> (status, body): the control plane's admin request function.
Requester = Callable[..., tuple[int, Any]]


@dataclass
class AuditEvent:
    """The fields of one audit record that tests look at."""

    verb: str
    user: str
    user_agent: str
    resource: str
    namespace: str
    name: str
    subresource: str
    code: int
    raw: dict[str, Any] = field(repr=False)


class AuditLog:
    """The audit log file of one control plane."""

    def __init__(self, path: Path, request: Requester) -> None:
        self.path = path
        self._request = request

    def offset(self) -> int:
        """A position in the log; pass it to `events`/`writes` to read what came after."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def events(self, since: int = 0) -> Iterator[AuditEvent]:
        try:
            with self.path.open("rb") as f:
                f.seek(since)
                data = f.read()
        except FileNotFoundError:
            return
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a line still being written
            ref = ev.get("objectRef") or {}
            yield AuditEvent(
                verb=ev.get("verb", ""),
                user=(ev.get("user") or {}).get("username", ""),
                user_agent=ev.get("userAgent", ""),
                resource=ref.get("resource", ""),
                namespace=ref.get("namespace", ""),
                name=ref.get("name", ""),
                subresource=ref.get("subresource", ""),
                code=int((ev.get("responseStatus") or {}).get("code") or 0),
                raw=ev,
            )

    def sync(self, timeout: float = 10) -> int:
        """Make a marker write and wait until the log shows it: every write that completed
        before this call is then in the log. Returns the offset after the marker."""
        name = f"{MARKER_PREFIX}{time.monotonic_ns()}"
        start = self.offset()
        self._request("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": name}})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(e.name == name for e in self.events(start)):
                self._request("DELETE", f"/api/v1/namespaces/default/configmaps/{name}")
                return self.offset()
            time.sleep(0.05)
        raise TimeoutError(f"audit marker {name} not logged in {timeout}s")

    def requests(
        self, since: int, resource: str, *, user_agent_prefix: str = "", user: str = ""
    ) -> list[AuditEvent]:
        """Every request (reads included) on `resource` after `since`, optionally by one
        user agent or user. Only resources in READ_AUDITED are logged when read."""
        if ("", resource) not in READ_AUDITED:
            raise ValueError(f"the audit policy does not log reads of {resource!r}")
        self.sync()
        return [
            e
            for e in self.events(since)
            if e.resource == resource
            and e.user_agent.startswith(user_agent_prefix)
            and (not user or e.user == user)
        ]

    def writes(
        self, since: int, *, user_agent_prefix: str = "", user: str = ""
    ) -> list[AuditEvent]:
        """Writes after `since` (markers excluded), optionally by one user agent or user."""
        self.sync()
        return [
            e
            for e in self.events(since)
            if e.verb in WRITE_VERBS
            and not e.name.startswith(MARKER_PREFIX)
            and e.user_agent.startswith(user_agent_prefix)
            and (not user or e.user == user)
        ]
