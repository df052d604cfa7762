"""What every check of `dynamo-pool-operator check` shares: the verdict (`Status`,
`Result`), what a check may read (`Context`), running them in order, and printing them.

Modelled on `linkerd check` and `subctl diagnose`: every check is one line, ✔ (ok),
‼ (a warning: works, but look) or ✘ (broken), and a broken or doubtful one says what
to do. The checks are small functions in cluster.py and pools.py, each reading the
cluster and returning a `Result`; this module knows none of them, so they and the
command (command.py) depend on it and never on each other.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.runtime import Client, Discovery, errors

#: An export deleting for longer than this is stuck (its finalizer's owner is not done).
TERMINATING_GRACE = 300.0


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


SYMBOLS = {Status.OK: "✔", Status.WARN: "‼", Status.FAIL: "✘", Status.SKIP: "-"}


@dataclass(frozen=True, slots=True)
class Result:
    """One check's verdict: a line, what to do when it is not ok, and the objects."""

    name: str
    status: Status
    message: str
    fix: str = ""
    details: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": str(self.status),
            "message": self.message,
            "fix": self.fix,
            "details": list(self.details),
        }


@dataclass
class Context:
    """What every check may use: clients, configuration, and reads shared between checks
    (each made once per round, on first use)."""

    client: Client
    #: Asks SelfSubjectAccessReviews as the operator's identity.
    reviewer: Client
    config: OperatorConfiguration
    #: Where the operator runs (its Lease's namespace when the configuration names none).
    operator_namespace: str
    #: The identity the RBAC check asks for ("" when it asks as the caller).
    as_user: str
    in_cluster: bool = False
    terminating_grace: float = TERMINATING_GRACE
    discovery: Discovery | None = None
    _memo: dict[str, Any] = field(default_factory=dict)

    @property
    def scope(self) -> str | None:
        """The namespace the operator manages, or None for all of them."""
        return self.config.namespace.restricted or None

    @property
    def implementation(self) -> str:
        return self.config.multi_cluster.mcs_implementation

    def served(self, group: str, plural: str) -> list[str]:
        """Versions of `plural.group` discovery found, in the server's order."""
        found = self.discovery.resources if self.discovery else []
        return [r.version for r in found if r.group == group and r.plural == plural]

    async def once(self, key: str, read: Callable[[], Awaitable[Any]]) -> Any:
        """`read()` the first time `key` is asked for this round, then its answer."""
        if key not in self._memo:
            self._memo[key] = await read()
        return self._memo[key]

    def new_round(self) -> None:
        """Forget discovery and the shared reads: a round of `--wait` reads afresh."""
        self.discovery, self._memo = None, {}


Check = Callable[[Context], Awaitable[Result]]


async def run_checks(ctx: Context, checks: Sequence[tuple[str, Check]]) -> list[Result]:
    """Every check in order. The first (the API server) gates the rest: unreachable, the
    others are skipped rather than each failing with the same connection error. A
    check that raises an API error fails with it (it could not look)."""
    out: list[Result] = []
    for i, (name, check) in enumerate(checks):
        if i > 0 and out[0].status is Status.FAIL:
            out.append(Result(name, Status.SKIP, "skipped: the API server cannot be used"))
            continue
        try:
            out.append(await check(ctx))
        except errors.ApiError as e:
            out.append(
                Result(
                    name,
                    Status.FAIL,
                    f"could not check: {e}",
                    "run `check` as someone who may read what this check reads",
                )
            )
    return out


def human(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{(seconds % 3600) // 60}m"


def format_text(results: Sequence[Result], header: str) -> str:
    width = max(len(r.name) for r in results)
    lines = [header, ""]
    for r in results:
        lines.append(f"{SYMBOLS[r.status]} {r.name.ljust(width)}  {r.message}")
        pad = " " * (width + 4)
        lines += [f"{pad}{d}" for d in r.details]
        if r.fix and r.status in (Status.FAIL, Status.WARN):
            lines.append(f"{pad}→ {r.fix}")
    failed = sum(r.status is Status.FAIL for r in results)
    warned = sum(r.status is Status.WARN for r in results)
    lines += ["", _summary(failed, warned)]
    return "\n".join(lines) + "\n"


def _summary(failed: int, warned: int) -> str:
    if failed:
        return f"{failed} check{'s' if failed > 1 else ''} failed, {warned} warning(s)"
    return f"all checks passed{f', {warned} warning(s)' if warned else ''}"


def format_json(results: Sequence[Result], configuration: Mapping[str, Any]) -> str:
    """The results as one JSON document, led by what they were checked against."""
    failed = [r.name for r in results if r.status is Status.FAIL]
    doc = {
        "configuration": dict(configuration),
        "ok": not failed,
        "failed": failed,
        "warnings": [r.name for r in results if r.status is Status.WARN],
        "checks": [r.to_dict() for r in results],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
