"""`dynamo-pool-operator check`: is this cluster ready for the operator, and is it working?

Modelled on `linkerd check` and `subctl diagnose`: every check is one line, ✔ (ok),
‼ (a warning: works, but look) or ✘ (broken), and a broken or doubtful one says what
to do. The checks themselves are small functions in check_items.py, each reading the
cluster and returning a `Result`; this module runs them in order, prints them (text or
`-o json`), and with `--wait` runs them again until none fails or the time is up, for
CI pipelines that install and then wait for a working operator.

Whose eyes: inspection reads use the caller's credentials. The RBAC check asks the API
server what the operator's ServiceAccount may do (SelfSubjectAccessReview) while
impersonating it (`--as system:serviceaccount:NS:NAME`, the caller needs `impersonate`
on it), or, run inside the operator's pod without `--as`, as itself.

Exit code: 0 when no check failed (warnings allowed), 1 when one did, 2 for bad usage.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TextIO

import yaml

from . import __version__
from .config import OperatorConfiguration, parse_configuration
from .config_fields import ConfigurationError
from .runtime import errors
from .runtime.auth import IN_CLUSTER, ClusterConfig, ConfigError, load_config
from .runtime.client import Client, Discovery
from .runtime.impersonation import impersonating
from .runtime.resources import CONFIGMAPS

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
USER_AGENT = f"dynamo-pool-operator-check/{__version__}"
#: Seconds between rounds with --wait.
WAIT_INTERVAL = 2.0
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


def format_json(results: Sequence[Result]) -> str:
    failed = [r.name for r in results if r.status is Status.FAIL]
    doc = {
        "ok": not failed,
        "failed": failed,
        "warnings": [r.name for r in results if r.status is Status.WARN],
        "checks": [r.to_dict() for r in results],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


async def read_configmap_config(client: Client, ref: str) -> OperatorConfiguration:
    """The operator's configuration from its ConfigMap `NAMESPACE/NAME` (key config.yaml),
    decoded as strictly as the operator decodes it."""
    ns, _, name = ref.partition("/")
    cm = await client.get(CONFIGMAPS, name, ns)
    text = (cm.get("data") or {}).get("config.yaml")
    if text is None:
        raise ConfigError(f"ConfigMap {ref} has no config.yaml")
    return parse_configuration(yaml.safe_load(text), f"ConfigMap {ref}")


@dataclass(frozen=True)
class Options:
    """What the command line asked for."""

    kubeconfig: str | None = None
    context: str | None = None
    config_path: str | None = None
    configmap: str | None = None
    as_user: str | None = None
    operator_namespace: str | None = None
    output: str = "text"
    wait: float = 0.0
    terminating_grace: float = TERMINATING_GRACE


async def _context(
    opts: Options, cluster: ClusterConfig, client: Client
) -> tuple[Context, Client | None]:
    from .config import load_configuration

    if opts.configmap:
        config = await read_configmap_config(client, opts.configmap)
    else:
        config = load_configuration(opts.config_path)
    operator_ns = (
        opts.operator_namespace
        or (opts.configmap.partition("/")[0] if opts.configmap else "")
        or (cluster.namespace if cluster.source == IN_CLUSTER else "")
        or "dynamo-pool-operator"
    )
    reviewer: Client | None = None
    if opts.as_user:
        reviewer = Client(impersonating(cluster, opts.as_user), user_agent=USER_AGENT)
    ctx = Context(
        client=client,
        reviewer=reviewer or client,
        config=config,
        operator_namespace=operator_ns,
        as_user=opts.as_user or "",
        in_cluster=cluster.source == IN_CLUSTER,
        terminating_grace=opts.terminating_grace,
    )
    return ctx, reviewer


async def run(opts: Options, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the checks (again until none fails or `opts.wait` seconds pass); print the
    last round; return the exit code."""
    from .check_items import CHECKS

    out, err = out or sys.stdout, err or sys.stderr
    try:
        cluster = load_config(opts.kubeconfig, opts.context)
    except ConfigError as e:
        print(f"error: {e}", file=err)
        return EXIT_FAILED
    deadline = time.monotonic() + opts.wait
    async with Client(cluster, user_agent=USER_AGENT) as client:
        try:
            ctx, reviewer = await _context(opts, cluster, client)
        except (ConfigurationError, ConfigError) as e:
            print(f"error: {e}", file=err)
            return EXIT_USAGE
        except errors.ApiError as e:
            print(f"error: cannot read the operator's ConfigMap {opts.configmap}: {e}", file=err)
            return EXIT_FAILED
        try:
            while True:
                ctx.discovery, ctx._memo = None, {}
                results = await run_checks(ctx, CHECKS)
                failed = [r.name for r in results if r.status is Status.FAIL]
                if not failed or time.monotonic() >= deadline:
                    break
                print(f"waiting: {', '.join(failed)} failing", file=err)
                await asyncio.sleep(min(WAIT_INTERVAL, max(deadline - time.monotonic(), 0)))
        finally:
            if reviewer is not None:
                await reviewer.close()
    who = f" as {ctx.as_user}" if ctx.as_user else ""
    if opts.output == "json":
        out.write(format_json(results))
    else:
        header = f"dynamo-pool-operator {__version__} check of {cluster.server}{who}"
        out.write(format_text(results, header))
    return EXIT_FAILED if failed else EXIT_OK
