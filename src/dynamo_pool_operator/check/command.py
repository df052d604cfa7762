"""`dynamo-pool-operator check`: is this cluster ready for the operator, and is it working?

Runs the checks of cluster.py and pools.py in the order of `CHECKS`, prints them (text
or `-o json`), and with `--wait` runs them again until none fails or the time is up,
for CI pipelines that install and then wait for a working operator.

Whose eyes: inspection reads use the caller's credentials. The RBAC check asks the API
server what the operator's ServiceAccount may do (SelfSubjectAccessReview) while
impersonating it (`--as system:serviceaccount:NS:NAME`, the caller needs `impersonate`
on it), or, run inside the operator's pod without `--as`, as itself.

Exit code: 0 when no check failed (warnings allowed), 1 when one did, 2 for bad usage.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass
from typing import TextIO

import yaml

from .. import __version__
from ..config import OperatorConfiguration, load_configuration, parse_configuration
from ..config_fields import ConfigurationError
from ..exitcodes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from ..runtime import errors
from ..runtime.auth import IN_CLUSTER, ClusterConfig, ConfigError, load_config
from ..runtime.client import Client
from ..runtime.impersonation import impersonating
from ..runtime.resources import CONFIGMAPS
from . import cluster, pools
from .framework import (
    TERMINATING_GRACE,
    Check,
    Context,
    Status,
    format_json,
    format_text,
    run_checks,
)

USER_AGENT = f"dynamo-pool-operator-check/{__version__}"
#: Seconds between rounds with --wait.
WAIT_INTERVAL = 2.0

#: Every check, in the order it runs and prints: the API server first (it gates the rest).
CHECKS: list[tuple[str, Check]] = [
    ("api-server", cluster.api_server),
    ("relay-crd", cluster.relay_crd),
    ("dgd-crd", cluster.dgd_crd),
    ("serviceexport-api", cluster.serviceexport_api),
    ("cluster-id", pools.cluster_id),
    ("karmada-names", pools.karmada_names),
    ("rbac", cluster.rbac_check),
    ("leader", cluster.leader),
    ("exports-terminating", pools.exports_terminating),
    ("foreign-exports", pools.foreign_exports),
    ("relays-ready", pools.relays_ready),
]


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
    out, err = out or sys.stdout, err or sys.stderr
    try:
        cluster_config = load_config(opts.kubeconfig, opts.context)
    except ConfigError as e:
        print(f"error: {e}", file=err)
        return EXIT_FAILURE
    deadline = time.monotonic() + opts.wait
    async with Client(cluster_config, user_agent=USER_AGENT) as client:
        try:
            ctx, reviewer = await _context(opts, cluster_config, client)
        except (ConfigurationError, ConfigError) as e:
            print(f"error: {e}", file=err)
            return EXIT_USAGE
        except errors.ApiError as e:
            print(f"error: cannot read the operator's ConfigMap {opts.configmap}: {e}", file=err)
            return EXIT_FAILURE
        try:
            while True:
                ctx.new_round()
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
        header = f"dynamo-pool-operator {__version__} check of {cluster_config.server}{who}"
        out.write(format_text(results, header))
    return EXIT_FAILURE if failed else EXIT_OK
