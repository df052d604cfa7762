"""The operator process: `dynamo-pool-operator run`.

In controller-runtime's manager's order (docs/architecture.md, "Process"): discover the
APIs and review this identity's RBAC (failing fast, naming what is missing, rather than
retrying Forbidden lists until the caches' sync times out); serve the probes and metrics;
start the informers (warm while a follower, so a failover takes seconds); acquire the
Lease, and only then write. Writing stops in one place, `Operator.stop_leading`, run by
the elector before it releases: on SIGTERM the reconciles in flight finish and the pending
Events are written (exit 0); on a lost Lease both are dropped (exit 1, so the pod restarts
as a follower).

The stop fits the pod's default 30 s grace period: reconciles in flight get at
most DRAIN_TIMEOUT (10 s), the Events 10 s (the recorder's stop timeout), the
release at most the renew deadline (10 s). It takes well under a second with
a backlog of a thousand keys (docs/runtime.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from dynamo_pool_operator import operator, rbac
from dynamo_pool_operator.api import names
from dynamo_pool_operator.config import OperatorConfiguration, ServerConfig
from dynamo_pool_operator.config_fields import split_address
from dynamo_pool_operator.exitcodes import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from dynamo_pool_operator.runtime import (
    DEFAULT_USER_AGENT,
    REGISTRY,
    CertificateError,
    Client,
    ClusterConfig,
    ConfigError,
    DelegatedAuth,
    LeaderElector,
    LeadershipLost,
    Probes,
    ProbeServer,
    ServingCertificate,
    default_identity,
    errors,
    load_config,
)
from dynamo_pool_operator.runtime.gcpauses import collector_tuned, watch_gc_pauses
from dynamo_pool_operator.served_apis import StartupError, discover_served_apis

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds a stopping leader lets its reconciles in flight run before cancelling them.
DRAIN_TIMEOUT = 10.0

_SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def metrics_listen(server: ServerConfig) -> str:
    """Where `/metrics` listens. Plain `/metrics` names every tenant's relays to whoever
    reaches it, so an address without a host means loopback unless it is secure."""
    address = server.metrics_address
    if server.metrics_secure or address == "0":
        return address
    host, port = split_address(address)
    return address if host else f"127.0.0.1:{port}"


def lease_namespace(config: OperatorConfiguration) -> str | None:
    """The Lease's namespace: configured, else the restricted namespace, else our pod's."""
    if config.leader_election.namespace:
        return config.leader_election.namespace
    if config.namespace.restricted:
        return config.namespace.restricted
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        return _SA_NAMESPACE.read_text().strip() or None
    except OSError:
        return None


async def _unless_stopped(stop: asyncio.Event, step: Awaitable[T]) -> tuple[T] | None:
    """`step`'s result, or None when `stop` is set first (the step is cancelled): a start
    that waits on the network must not outlive Ctrl-C."""
    task = asyncio.ensure_future(step)
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        return None
    return (task.result(),)


async def holds_rbac(cluster: ClusterConfig, config: OperatorConfiguration) -> bool:
    """Whether this identity holds what the operator needs (rbac.py, the review `check`
    makes too), asked once at the start. What it cannot run without (the manager's and
    the Lease's rules) is one error line naming each missing permission by resource;
    what it runs without, degraded and saying so (the cluster ID's read, secure metrics'
    reviews), one warning. A review that cannot be made is a warning: the start goes on."""
    wanted = rbac.needs(config, lease_namespace(config))
    user_agent = f"{DEFAULT_USER_AGENT} access-review"
    async with Client(cluster, user_agent=user_agent, request_timeout=10.0) as client:
        try:
            missing = await rbac.lacking(client, wanted)
        except errors.ApiError as e:
            log.warning("could not review the operator's RBAC, starting anyway: %s", e)
            return True
        if not missing:
            return True
        who = await rbac.username(client)
    check = f"dynamo-pool-operator check --as {who}" if who else "dynamo-pool-operator check"
    who = who or "the operator's identity"
    required = [n for n in missing if not n.optional]
    if required:
        log.error(
            "%s lacks %d of the %d permissions the operator needs: %s. Grant them (the "
            "chart's RBAC, or `dynamo-pool-operator manifests rbac | kubectl apply -f -`); "
            "`%s` says what is missing and how to grant it",
            who,
            len(missing),
            len(wanted),
            "; ".join(rbac.grouped(missing)),
            check,
        )
        return False
    log.warning(
        "%s lacks %s: those run degraded until granted (`%s`)",
        who,
        "; ".join(rbac.grouped(missing)),
        check,
    )
    return True


async def run(
    config: OperatorConfiguration,
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    stop: asyncio.Event | None = None,
) -> int:
    """Run until `stop` is set (or a signal arrives); return the process exit code."""
    stop = stop or _signal_stop()
    try:
        cluster = load_config(kubeconfig, context)
    except ConfigError as e:
        log.error("cannot reach a cluster: %s", e)
        return EXIT_USAGE
    identity = default_identity()
    pace = config.client_connection
    # The elector has a client of its own: the operator's is gated on leadership (the
    # Lease writes must pass while following), and `qps` must never queue a renewal
    # behind a burst of reconcile writes until the renew deadline passes.
    # Secure metrics review scrapers' tokens with a client of their own too: followers
    # serve metrics, and the operator's client refuses every write (a review is a
    # create) while this replica does not lead. It connects only when used.
    async with (
        Client(
            cluster, qps=pace.qps, burst=pace.burst, field_manager=names.FIELD_MANAGER
        ) as client,
        Client(cluster, user_agent=f"{DEFAULT_USER_AGENT} leader-election") as lease_client,
        Client(
            cluster, user_agent=f"{DEFAULT_USER_AGENT} metrics-auth", request_timeout=10.0
        ) as review_client,
    ):
        try:
            found = await _unless_stopped(stop, discover_served_apis(client, config.multi_cluster))
            held = (
                None if found is None else await _unless_stopped(stop, holds_rbac(cluster, config))
            )
        except StartupError as e:
            log.error("%s", e)
            return EXIT_FAILURE
        except errors.ConnectionFailed as e:  # said as kubectl says it: one line
            log.error("%s", e)
            return EXIT_FAILURE
        except errors.ApiError as e:  # refused credentials, ...: one line
            log.error("cannot read the API server's discovery at %s: %s", cluster.server, e)
            return EXIT_FAILURE
        if found is None or held is None:
            log.warning("interrupted while starting: stopped before the operator ran")
            return EXIT_INTERRUPTED
        if not held[0]:
            return EXIT_FAILURE
        served = found[0]
        op = operator.build(client, config, served, identity=identity)
        probes = Probes(
            # Workers the controller could not replace: restart the process.
            liveness={"ping": lambda: True, "workers": lambda: op.controller.healthy},
            # The DGD API no longer served: a stale cache must not look ready.
            readiness={"caches": op.caches_synced, "dgdAPI": op.dgd_api_served},
        )
        tls, auth = None, None
        if config.server.metrics_secure and config.server.metrics_address != "0":
            try:
                tls = ServingCertificate(config.server.metrics_cert_dir or None)
            except CertificateError as e:
                log.error("cannot serve secure metrics: %s", e)
                return EXIT_FAILURE
            auth = DelegatedAuth(review_client)
        watch_gc_pauses(REGISTRY)  # the full collections walk every cached object
        server = ProbeServer(
            probes,
            REGISTRY,
            health_address=config.server.health_probe_address,
            metrics_address=metrics_listen(config.server),
            metrics_tls=tls,
            metrics_auth=auth,
        )
        try:
            await server.start()
        except OSError as e:  # the address is taken, or not ours to bind
            log.error("cannot serve the probes and metrics: %s", e)
            await server.stop()
            return EXIT_FAILURE
        # Rare full collections while it runs: a mass event's objects in flight die young.
        with collector_tuned():
            try:
                return await _run_with_server(op, lease_client, config, identity, stop)
            finally:
                await server.stop()


async def _run_with_server(
    op: operator.Operator,
    lease_client: Client,
    config: OperatorConfiguration,
    identity: str,
    stop: asyncio.Event,
) -> int:
    await op.start_caches()
    elector: LeaderElector | None = None

    async def lead() -> None:
        try:
            await op.start_leading()
            log.info("leading: controllers started", extra={"identity": identity})
            # Lead until cancelled, never until `stop`: returning made the elector start
            # its release while the shutdown below cancelled the elector, and that second
            # cancellation cut the release short. The Lease was left to expire (15 s, not
            # the ~1 s handover) and the release ran on after the client had closed.
            await asyncio.Event().wait()
        finally:
            # The elector cancels this work and waits for it before it releases the
            # Lease, and before it raises LeadershipLost: the writing stops here, first.
            lost = elector is not None and elector.lost.is_set()
            await op.stop_leading(lost=lost, drain_timeout=DRAIN_TIMEOUT)

    le = config.leader_election
    if le.enabled:
        ns = lease_namespace(config)
        if ns is None:
            log.error(
                "leader election needs a namespace for its Lease: set "
                "leaderElection.namespace (or POD_NAMESPACE), or disable leaderElection"
            )
            await op.stop()
            return EXIT_USAGE
        elector = LeaderElector(
            lease_client,
            namespace=ns,
            name=le.name,
            identity=identity,
            lease_duration=le.lease_duration,
            renew_deadline=le.renew_deadline,
            retry_period=le.retry_period,
        )
        op.client.write_gate = lambda: elector is not None and elector.is_leader
    work = asyncio.create_task(elector.run(lead) if elector else lead())
    stopper = asyncio.create_task(stop.wait())
    code = EXIT_OK
    try:
        done, _ = await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if work in done:
            work.result()  # raises LeadershipLost or a startup failure
        else:
            # One cancellation: the elector stops `lead` (which drains the reconciles in
            # flight and writes the pending Events, still leading), then releases.
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
    except LeadershipLost as e:
        # `lead` has already stopped the writing (reconciles cancelled, Events dropped).
        log.error("leadership lost, exiting so no write happens without the lease: %s", e)
        code = EXIT_FAILURE
    except (errors.ApiError, TimeoutError) as e:
        # Expected failures (a refused startup write, caches that never synced): the
        # reason in one line. A traceback is for bugs only.
        log.error("operator failed: %s", e)
        code = EXIT_FAILURE
    except Exception:
        log.exception("operator failed")
        code = EXIT_FAILURE
    finally:
        stopper.cancel()
        await op.stop(drain_timeout=10)
    return code


def _signal_stop() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop
