"""`dynamo-pool-operator check`: is this cluster ready for the operator, and is it working?

Runs the checks of cluster.py and pools.py in the order of `CHECKS`, prints them (text
or `-o json`), and with `--wait` runs them again until none fails or the time is up,
for CI pipelines that install and then wait for a working operator. The first line
(in JSON, the first key) says which configuration the checks used and why
(configuration.py): the checks are only as right as it is.

Whose eyes: inspection reads use the caller's credentials. The RBAC check asks the API
server what the operator's ServiceAccount may do (SelfSubjectAccessReview) while
impersonating it (`--as system:serviceaccount:NS:NAME`, the caller needs `impersonate`
on it), or, run inside the operator's pod without `--as`, as itself.

Exit code: 0 when no check failed (warnings allowed), 1 when one did, 2 for bad usage
(an unusable kubeconfig too), as exitcodes.py says for every command.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass
from typing import TextIO

from dynamo_pool_operator import __version__, rbac
from dynamo_pool_operator.check import cluster, pools
from dynamo_pool_operator.check.configuration import Source, choose
from dynamo_pool_operator.check.framework import (
    TERMINATING_GRACE,
    Check,
    Context,
    Status,
    format_json,
    format_text,
    run_checks,
)
from dynamo_pool_operator.config_fields import ConfigurationError
from dynamo_pool_operator.exitcodes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from dynamo_pool_operator.runtime import (
    IN_CLUSTER,
    Client,
    ClusterConfig,
    ConfigError,
    errors,
    impersonating,
    load_config,
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
    ("export-spec", cluster.export_spec),
    ("cluster-id", pools.cluster_id),
    ("karmada-names", pools.karmada_names),
    ("karmada-collection", pools.karmada_collection),
    ("rbac", cluster.rbac_check),
    ("leader", cluster.leader),
    ("exports-terminating", pools.exports_terminating),
    ("confirmation", pools.confirmation),
    ("foreign-exports", pools.foreign_exports),
    ("relays-ready", pools.relays_ready),
    ("relay-pod-fields", pools.relay_pod_fields),
]


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


SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


def _service_account_namespace(user: str | None) -> str:
    """NS of `system:serviceaccount:NS:NAME`, else ""."""
    if not user or not user.startswith(SERVICE_ACCOUNT_PREFIX):
        return ""
    return user.removeprefix(SERVICE_ACCOUNT_PREFIX).partition(":")[0]


async def _context(
    opts: Options, cluster_config: ClusterConfig, client: Client
) -> tuple[Context, Client | None, Source]:
    in_cluster = cluster_config.source == IN_CLUSTER
    pod_namespace = cluster_config.namespace if in_cluster else ""
    # The chart puts its ConfigMap beside the operator's ServiceAccount, in the release
    # namespace: look there when the command line tells it, else everywhere.
    search = opts.operator_namespace or _service_account_namespace(opts.as_user) or pod_namespace
    source = await choose(
        client,
        config_path=opts.config_path,
        configmap=opts.configmap,
        search_namespace=search or None,
    )
    operator_ns = (
        opts.operator_namespace or source.namespace or pod_namespace or rbac.DEFAULT_NAMESPACE
    )
    reviewer: Client | None = None
    if opts.as_user:
        reviewer = Client(impersonating(cluster_config, opts.as_user), user_agent=USER_AGENT)
    ctx = Context(
        client=client,
        reviewer=reviewer or client,
        config=source.config,
        operator_namespace=operator_ns,
        as_user=opts.as_user or "",
        in_cluster=in_cluster,
        terminating_grace=opts.terminating_grace,
    )
    return ctx, reviewer, source


async def run(opts: Options, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the checks (again until none fails or `opts.wait` seconds pass); print the
    last round; return the exit code."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        cluster_config = load_config(opts.kubeconfig, opts.context)
    except ConfigError as e:
        print(f"error: {e}", file=err)
        return EXIT_USAGE
    deadline = time.monotonic() + opts.wait
    async with Client(cluster_config, user_agent=USER_AGENT) as client:
        try:
            ctx, reviewer, source = await _context(opts, cluster_config, client)
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
        out.write(format_json(results, source.to_dict()))
    else:
        # The first line says what is checked against, whatever the source.
        header = (
            f"dynamo-pool-operator {__version__} check of {cluster_config.server}{who}: "
            f"{source.describe()}"
        )
        out.write(format_text(results, header))
    return EXIT_FAILURE if failed else EXIT_OK
