"""`dynamo-pool-operator dev`: the whole thing on this machine, with no cluster.

Starts the local control plane (the same one the tests use) with a kwok Node, so pods
are scheduled and become Ready; installs every CRD the operator can use, creates a
sample pool (its DGD, the frontend Deployment and Service Dynamo's operator would make,
and its relay), runs the real operator process logic against it, and prints what
happened and how to look: the pool's exports and its relay pods Running.

`--clusters 2` shows the multi-cluster picture instead: "east" and "west", each with a
kwok Node, its cluster ID and the operator, joined through a broker by Submariner
Lighthouse agents (localcluster/lighthouse.py). The sample pool runs in east; the report
ends with the pool as the Global Router in west finds it: `discover`'s table over the
EndpointSlices Lighthouse imported there, printed once the pool is live in it.

The cluster is a target for the project's own CLI as for kubectl, as kind's are: its
kubeconfig is at the same path every run (`kubeconfig_path`; contexts `dev`, or `east`
and `west`), the report prints `status`, `check` and `discover` lines that run as printed
(`cli_command`), and the operator runs as a deployed one does where `check` looks for it:
its configuration in a ConfigMap with the chart's labels, and the Lease the chart's
release `dynamo-pool-operator` would hold, in namespace `dynamo-pool-operator`. So
`check` is green on it, and the README's install steps run on it as written: the
chart's pods run on the kwok Node (no container runs) and this process, holding their
Lease, stands in for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from dynamo_pool_operator import logs, process, rbac
from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.conditions import ConditionType, ExportState, Status
from dynamo_pool_operator.api.mcs import (
    Confirmation,
    Implementation,
    clusterproperties,
    serviceexports,
)
from dynamo_pool_operator.config import OperatorConfiguration, to_document
from dynamo_pool_operator.discover.find import Discovered, Mode
from dynamo_pool_operator.discover.view import discovered, format_table
from dynamo_pool_operator.exitcodes import EXIT_FAILURE
from dynamo_pool_operator.pool import controller as relay_controller
from dynamo_pool_operator.runtime import Client, errors, load_kubeconfig
from dynamo_pool_operator.runtime.objects import (
    CONFIGMAPS,
    DEPLOYMENTS,
    SERVICES,
    Resource,
    find_condition,
)

if TYPE_CHECKING:  # the local control plane is imported only when dev runs
    from dynamo_pool_operator.localcluster.assets import Assets
    from dynamo_pool_operator.localcluster.lighthouse import World

log = logging.getLogger(__name__)

NAMESPACE = "dynamo-demo"
POOL = "llama"
CLUSTER_ID = "dev-cluster"
#: `--clusters 2`: the pool runs in the first, the report shows it from the second.
TWO_CLUSTERS = ("east", "west")
#: The kubeconfig context of the one cluster (with two, the contexts are their names).
CONTEXT = "dev"
#: Where the operator lives, as the README installs the chart: the release
#: `dynamo-pool-operator` in this namespace holds the Lease that dev's operator holds.
OPERATOR_NAMESPACE = rbac.DEFAULT_NAMESPACE
#: dev's configuration, where `check` finds it: a ConfigMap with the chart's labels
#: (another name than the chart's, so that installing the chart on dev takes nothing).
CONFIGMAP = "dynamo-pool-operator-dev"
#: The labels `check` finds the chart's ConfigMaps by (check/configuration.py).
CHART_LABELS = {"app.kubernetes.io/part-of": "dynamo-pool-operator"}
CONFIG_KEY = "config.yaml"

RELAYS = relay_controller.RELAYS
DGDS = relay_controller.dgd_resource("v1beta1")
CLUSTER_PROPERTIES = clusterproperties("v1beta1")
SERVICEEXPORTS = serviceexports("v1beta1")


def sample_objects(cluster_id: str = CLUSTER_ID) -> list[tuple[Resource, dict[str, Any]]]:
    """A pool: a DGD with a frontend and a decode worker, its relay, and the cluster's ID."""
    return [
        (
            CLUSTER_PROPERTIES,
            {
                "apiVersion": CLUSTER_PROPERTIES.api_version,
                "kind": "ClusterProperty",
                "metadata": {"name": "cluster.clusterset.k8s.io"},
                "spec": {"value": cluster_id},
            },
        ),
        (
            DGDS,
            {
                "apiVersion": DGDS.api_version,
                "kind": DGDS.kind,
                "metadata": {"name": POOL, "namespace": NAMESPACE},
                "spec": {
                    "backendFramework": "vllm",
                    "components": [
                        {"name": "Frontend", "type": "frontend", "replicas": 1},
                        {"name": "VllmDecodeWorker", "type": "decode", "replicas": 2},
                    ],
                },
            },
        ),
        (
            RELAYS,
            {
                "apiVersion": RELAYS.api_version,
                "kind": RELAYS.kind,
                "metadata": {"name": POOL, "namespace": NAMESPACE},
                "spec": {"clusterId": cluster_id},
            },
        ),
    ]


async def _create_samples(client: Client, cluster_id: str = CLUSTER_ID) -> None:
    from dynamo_pool_operator.localcluster import dynamo

    for res, body in sample_objects(cluster_id):
        with contextlib.suppress(errors.AlreadyExists):
            created = await client.create(res, body)
            if res == DGDS:
                # What Dynamo's operator would add: the frontend's pods and Service.
                deployment, service = dynamo.frontend(created)
                await client.create(DEPLOYMENTS, deployment)
                await client.create(SERVICES, service)


async def _until(probe: Callable[[], Awaitable[Any]], what: str, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(errors.NotFound):
            found = await probe()
            if found:
                return found
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{what}: not within {timeout:.0f}s")


async def _wait_published(
    client: Client, timeout: float = 60, *, implementation_ready: bool = False
) -> dict[str, Any]:
    """The sample relay once published. With an implementation running
    (`implementation_ready`), also once it says Ready=True on every export: Lighthouse
    writes Valid=True, then Ready=False `AwaitingExport` while the broker aggregates,
    then Ready=True, which `AwaitingExport` never replaces (it is added only where no
    Ready condition is). A report printed in the first gap would be followed by a relay
    Pending for a moment, and a red `check`."""

    async def published() -> dict[str, Any] | None:
        """Ready, and every export the status lists is made (with an implementation set)."""
        relay = await client.get(RELAYS, POOL, NAMESPACE)
        status = relay.get("status") or {}
        ready = find_condition(status.get("conditions"), ConditionType.READY) or {}
        if ready.get("status") != Status.TRUE:
            return None
        lines = status.get("exports") or []
        if any(e.get("state") != ExportState.EXPORTED for e in lines):
            return None
        if implementation_ready and any(
            (e.get("ready") or {}).get("status") != Status.TRUE for e in lines
        ):
            return None
        return relay

    found: dict[str, Any] = await _until(published, "the sample pool was not published", timeout)
    return found


async def _relay_pods(client: Client) -> list[str]:
    """The relay's pods, once as many run as its Deployment wants."""
    from dynamo_pool_operator.localcluster import kwok

    selector = ",".join(f"{k}={v}" for k, v in names.selector(POOL).items())

    async def running() -> list[str] | None:
        deployment = await client.get(DEPLOYMENTS, names.relay_name(POOL), NAMESPACE)
        pods = await kwok.running_pods(client, NAMESPACE, selector)
        return pods if pods and len(pods) >= deployment["spec"].get("replicas", 1) else None

    found: list[str] = await _until(running, "the relay pods were not Running")
    return found


def _report(
    relay: dict[str, Any],
    exports: list[str],
    pods: list[str] | None,
    where: str = "",
) -> list[str]:
    status = relay["status"]
    ready = find_condition(status["conditions"], ConditionType.READY)
    assert ready is not None  # the pool was waited for until Ready
    # A Ready pool needs no reason; one that is not says which part is not and why.
    why = (
        ""
        if ready["status"] == Status.TRUE
        else f" ({ready['reason']}: {ready.get('message', '')})"
    )
    lines = [
        "",
        f"Pool {NAMESPACE}/{POOL}{where}: Ready={ready['status']}{why} "
        f"relay Service {status.get('serviceName')} clusterId {status.get('clusterId') or '-'}",
    ]
    for e in status.get("exports") or []:
        lines.append(f"  export {e['name']}: {e['state']} {e.get('reason', '')}".rstrip())
    if exports:
        lines.append(f"  ServiceExports in {NAMESPACE}: {', '.join(exports)}")
    if pods is not None:
        lines.append(
            f"  relay pods Running: {', '.join(pods)} "
            "(on a kwok Node: scheduled and Ready, no container runs)"
        )
    return lines


def look_lines(
    kubeconfig: Path, cli: str, kubectl: str, contexts: tuple[str, ...] = ()
) -> list[str]:
    """How to look at the cluster(s), one command a line, each runnable as printed once
    KUBECONFIG is exported: the CLI's `status` and `check` (with two clusters, `check` in
    each context and `discover` in the last, where the Global Router would run), then
    kubectl's."""
    k = shlex.quote(kubectl)
    flags = [f" --context {c}" for c in contexts] or [""]
    first, last = flags[0], flags[-1]
    ns = f"-n {NAMESPACE}"
    return [
        "",
        "Look at it (the kubeconfig is at this path every run; "
        f"{'contexts ' + ', '.join(contexts) if contexts else 'context ' + CONTEXT}):",
        f"  export KUBECONFIG={shlex.quote(str(kubeconfig))}",
        f"  {cli} status -A{first}",
        *(f"  {cli} check{f} --configmap {OPERATOR_NAMESPACE}/{CONFIGMAP}" for f in flags),
        *([f"  {cli} discover {ns}{last}"] if contexts else []),
        f"  {k} get dynamopoolrelays,deployments,pods,services,serviceexports {ns}{first}",
        f"  {k} describe dynamopoolrelay {POOL} {ns}{first}",
        f"  {k} get events.events.k8s.io {ns}{first}",
        *([f"  {k} get serviceimports,endpointslices {ns}{last}"] if contexts else []),
    ]


#: What the report says about installing the chart on the dev cluster.
CHART_ON_DEV = (
    "",
    "The README's install steps run on this cluster as written: the chart's pods run on the",
    "kwok Node (no container runs), and this operator, holding the Lease the release's",
    "would, stands in for them.",
)


async def _export_names(client: Client) -> list[str]:
    with contextlib.suppress(errors.ApiError):
        return [e["metadata"]["name"] for e in (await client.list(SERVICEEXPORTS, NAMESPACE)).items]
    return []


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


# ---------------------------------------------------------------- the CLI as a target
def kubeconfig_path() -> Path:
    """Where dev writes the kubeconfig of its cluster(s): the same path every run, under
    the project's cache (`DPO_CACHE_DIR`, else ~/.cache/dynamo-pool-operator), so a shell
    that exported it once keeps working across runs."""
    root = os.environ.get("DPO_CACHE_DIR") or Path.home() / ".cache" / "dynamo-pool-operator"
    return Path(root) / "dev" / "kubeconfig"


def merged_kubeconfig(members: Mapping[str, str]) -> str:
    """One kubeconfig holding each of `members` (context name -> a kubeconfig of one
    cluster, as `ControlPlane` writes them), its cluster, user and context renamed to the
    context name; the first is the current context."""
    clusters, users, contexts = [], [], []
    for name, text in members.items():
        one = yaml.safe_load(text)
        ctx = next(c["context"] for c in one["contexts"] if c["name"] == one["current-context"])
        cluster = next(c["cluster"] for c in one["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in one["users"] if u["name"] == ctx["user"])
        clusters.append({"name": name, "cluster": cluster})
        users.append({"name": name, "user": user})
        contexts.append({"name": name, "context": {"cluster": name, "user": name}})
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "users": users,
        "contexts": contexts,
        "current-context": next(iter(members)),
    }
    return yaml.safe_dump(config, sort_keys=False)


@contextlib.contextmanager
def published_kubeconfig(path: Path, text: str) -> Iterator[Path]:
    """`text` at `path` (owner-only: it holds the admin's key) while the block runs;
    removed after it unless another run has written its own there meanwhile."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    staged.write_text(text)
    staged.chmod(0o600)
    staged.replace(path)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            if path.read_text() == text:
                path.unlink()


def cli_command(argv0: str | None = None, which: Callable[[str], str | None] = shutil.which) -> str:
    """This CLI, as a command that runs from any shell: its name when that is what PATH
    finds, else the path of the script that is running (`make dev` runs the checkout's
    virtualenv's), else this Python with `-m`."""
    name = "dynamo-pool-operator"
    script = Path(argv0 if argv0 is not None else sys.argv[0])
    on_path = which(name)
    if script.name == name and script.is_file():
        if on_path is not None and Path(on_path).resolve() == script.resolve():
            return name
        return shlex.quote(str(script.resolve()))
    return f"{shlex.quote(sys.executable)} -m dynamo_pool_operator.cli"


def configmap(config: OperatorConfiguration) -> dict[str, Any]:
    """dev's configuration where `check` looks for an operator's: a ConfigMap of the
    chart's labels in the operator's namespace, holding the file the operator runs."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIGMAP,
            "namespace": OPERATOR_NAMESPACE,
            "labels": {**CHART_LABELS, "app.kubernetes.io/instance": "dev"},
        },
        "data": {CONFIG_KEY: yaml.safe_dump(to_document(config), sort_keys=False)},
    }


async def _as_deployed(client: Client, config: OperatorConfiguration) -> None:
    """The operator's namespace and its configuration in it, where `check` looks."""
    with contextlib.suppress(errors.AlreadyExists):
        await client.create(CONFIGMAPS, configmap(config))


# ---------------------------------------------------------------- running
async def run(
    config: OperatorConfiguration,
    *,
    exit_when_ready: bool = False,
    clusters: int = 1,
    kubeconfig: Path | None = None,
    stop: asyncio.Event | None = None,
    ready: asyncio.Event | None = None,
) -> int:
    """Start the cluster(s), run the operator, report; until `stop` is set (SIGINT or
    SIGTERM when none is given), or once reported with `exit_when_ready`. `ready` is set
    once the report is printed; the kubeconfig goes to `kubeconfig` (`kubeconfig_path()`
    when None)."""
    if clusters not in (1, 2):
        raise ValueError("dev runs one cluster or two")
    if stop is None:
        stop = asyncio.Event()
        _stop_on_signals(stop)
    where = kubeconfig or kubeconfig_path()
    if clusters == 2:
        return await _run_two(config, where, stop, ready, exit_when_ready=exit_when_ready)
    from dynamo_pool_operator.localcluster.controlplane import ControlPlane
    from dynamo_pool_operator.localcluster.crds import default_crds

    assets = await _assets()
    if assets is None:
        return EXIT_FAILURE
    nodes = 1 if assets.kwok is not None and assets.kube_controller_manager is not None else 0
    if not nodes:
        print(f"no pods: {assets.missing_peers('kwok')}", file=sys.stderr)
    cp = ControlPlane(assets=assets, crds=default_crds(assets.mcs_crd_dir), nodes=nodes)
    await asyncio.to_thread(cp.start)
    try:
        text = merged_kubeconfig({CONTEXT: cp.kubeconfig.read_text()})
        with published_kubeconfig(where, text):
            print(f"control plane up at {cp.url} (kubeconfig {where})", file=sys.stderr)
            cp.create_namespace(NAMESPACE)
            cp.create_namespace(OPERATOR_NAMESPACE)
            cfg = as_deployed(dev_configuration(config))
            async with Client(
                load_kubeconfig(cp.kubeconfig), user_agent="dynamo-pool-operator-dev"
            ) as c:
                await _as_deployed(c, cfg)
                operator_task = asyncio.create_task(
                    process.run(cfg, kubeconfig=str(cp.kubeconfig), stop=stop)
                )
                try:
                    await _create_samples(c)
                    relay = await _wait_published(c)
                    pods = await _relay_pods(c) if nodes else None
                    exports = await _export_names(c)
                except BaseException:
                    stop.set()
                    await asyncio.gather(operator_task, return_exceptions=True)
                    raise
            kubectl = str(assets.kubectl) if assets.kubectl else "kubectl"
            lines = [
                *_report(relay, exports, pods),
                *look_lines(where, cli_command(), kubectl),
                *CHART_ON_DEV,
            ]
            print("\n".join([*lines, ""]), flush=True)
            if ready is not None:
                ready.set()
            if exit_when_ready:
                stop.set()
            else:
                print(
                    "The operator keeps running; Ctrl-C stops it and the control plane.",
                    flush=True,
                )
            return await operator_task
    finally:
        await asyncio.to_thread(cp.stop)


async def _assets() -> Assets | None:
    """The control plane's binaries (built on first use), or None, said in one line, when
    they cannot be (dev needs a checkout: the build scripts are there)."""
    from dynamo_pool_operator.localcluster.assets import AssetsError, resolve

    try:
        return await asyncio.to_thread(resolve)
    except AssetsError as e:
        print(f"dev: {e}", file=sys.stderr)
        return None


async def _run_two(
    config: OperatorConfiguration,
    kubeconfig: Path,
    stop: asyncio.Event,
    ready: asyncio.Event | None,
    *,
    exit_when_ready: bool,
) -> int:
    from dynamo_pool_operator.localcluster import lighthouse

    assets = await _assets()
    if assets is None:
        return EXIT_FAILURE
    why = assets.missing_peers() or lighthouse.namespaces_refused()
    if why or assets.lighthouse_mcs_crd_dir is None:
        print(f"dev --clusters 2 needs kwok and Lighthouse: {why}", file=sys.stderr)
        return EXIT_FAILURE
    # The mcs-api release Lighthouse targets, so its conditions land (under the newer
    # release the tests pin they are refused: docs/testing.md).
    started = lighthouse.world(assets, TWO_CLUSTERS, mcs_crd_dir=assets.lighthouse_mcs_crd_dir)
    stack = contextlib.ExitStack()
    world = await asyncio.to_thread(stack.enter_context, started)
    try:
        text = merged_kubeconfig(
            {name: cp.kubeconfig.read_text() for name, cp in world.members.items()}
        )
        with published_kubeconfig(kubeconfig, text):
            return await _two_clusters(
                world, config, assets, kubeconfig, stop, ready, exit_when_ready=exit_when_ready
            )
    finally:
        await asyncio.to_thread(stack.close)


async def _two_clusters(
    world: World,
    config: OperatorConfiguration,
    assets: Assets,
    kubeconfig: Path,
    stop: asyncio.Event,
    ready: asyncio.Event | None,
    *,
    exit_when_ready: bool,
) -> int:
    cfg = as_deployed(dev_configuration(config, implementation_runs=True))
    for cluster, cp in world.members.items():
        cp.create_namespace(NAMESPACE)
        cp.create_namespace(OPERATOR_NAMESPACE)
        async with Client(
            load_kubeconfig(cp.kubeconfig), user_agent="dynamo-pool-operator-dev"
        ) as c:
            await _as_deployed(c, cfg)
        print(
            f"{cluster} up at {cp.url} (kubeconfig {kubeconfig}, context {cluster})",
            file=sys.stderr,
        )
    tasks = [  # each operator's every log line says cluster=<its cluster>
        asyncio.create_task(
            process.run(cfg, kubeconfig=str(cp.kubeconfig), stop=stop),
            context=logs.context(cluster=cluster),
        )
        for cluster, cp in world.members.items()
    ]
    try:
        print("\n".join(await _as_west_sees_it(world, assets, kubeconfig)), flush=True)
    except BaseException:
        stop.set()  # the operators first: the clusters go next
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    if ready is not None:
        ready.set()
    if exit_when_ready:
        stop.set()
    else:
        print("The operators keep running; Ctrl-C stops them and the clusters.", flush=True)
    return max(await asyncio.gather(*tasks))


async def _as_west_sees_it(world: World, assets: Assets, kubeconfig: Path) -> list[str]:
    """The sample pool in east, then the report: east's view, and the pool as the router
    in west finds it, once live there with every relay pod and its frontend."""
    east, west = TWO_CLUSTERS
    agent = "dynamo-pool-operator-dev"
    async with (
        Client(load_kubeconfig(world.members[east].kubeconfig), user_agent=agent) as ec,
        Client(load_kubeconfig(world.members[west].kubeconfig), user_agent=agent) as wc,
    ):
        await _create_samples(ec, east)
        relay = await _wait_published(ec, implementation_ready=True)
        pods = await _relay_pods(ec)
        exports = [e["name"] for e in relay["status"].get("exports") or []]
        if not exports:
            raise RuntimeError("the configuration exports nothing: see multiCluster")
        key = f"{relay['status'].get('clusterId') or east}/{NAMESPACE}/{POOL}"
        found = await _until(
            lambda: _live(wc, key, len(pods)), f"the router in {west} does not find {key} live"
        )
    kubectl = str(assets.kubectl) if assets.kubectl else "kubectl"
    lines = _report(relay, exports, pods, f" in {east}")
    lines += ["", *as_seen_from(found, west)]
    lines += [
        "",
        f"  (Lighthouse imports a headless Service, as the relay's is, as {east}'s Ready "
        "pod IPs, and a ClusterIP Service as its ClusterIP)",
    ]
    lines += look_lines(kubeconfig, cli_command(), kubectl, TWO_CLUSTERS)
    return [*lines, ""]


def as_seen_from(found: Discovered, cluster: str) -> list[str]:
    """`discover -n NAMESPACE`'s table, as read in `cluster`, under its heading."""
    heading = (
        f"As {cluster} sees it (the Global Router's view: "
        f"dynamo-pool-operator discover -n {NAMESPACE}):"
    )
    return [heading, *(f"  {line}" if line else "" for line in format_table(found).splitlines())]


async def _live(client: Client, key: str, relay_pods: int) -> Discovered | None:
    """What the router finds, once pool `key` is live with a ready endpoint for each
    relay pod and nothing wrong (its frontend imported and ready)."""
    found = await discovered(client, Mode.MCS, NAMESPACE)
    pool = found.pool(key)
    if pool is None or not pool.live or pool.problems or len(pool.relay.ready) < relay_pods:
        return None
    return found


def dev_configuration(
    config: OperatorConfiguration, *, implementation_runs: bool = False
) -> OperatorConfiguration:
    """With the default configuration (no --config), dev exports through standard MCS,
    so the sample pool shows the whole feature (its control plane serves the MCS and
    About APIs). With one cluster no MCS implementation runs, so nothing will ever write
    a condition on the exports: `confirmation: none` (as for Karmada or AWS Cloud Map).
    With two, Submariner Lighthouse writes them: `valid`, the default for `mcs` (as
    for Cilium and Antrea). A configuration file is used as written."""
    if config != OperatorConfiguration():
        return config
    multi_cluster = dataclasses.replace(config.multi_cluster, mcs_implementation=Implementation.MCS)
    if not implementation_runs:
        multi_cluster = dataclasses.replace(multi_cluster, confirmation=Confirmation.NONE)
    return dataclasses.replace(config, multi_cluster=multi_cluster)


def as_deployed(config: OperatorConfiguration) -> OperatorConfiguration:
    """The operator as the chart runs it, with its Lease in the operator's namespace
    unless configured elsewhere (no pod here to take a namespace from), so `check` finds
    a leader; probes and metrics on free loopback ports (a pod binds :8080 and :8081)."""
    le = config.leader_election
    if le.enabled and not le.namespace and not config.namespace.restricted:
        le = dataclasses.replace(le, namespace=OPERATOR_NAMESPACE)
    server = dataclasses.replace(
        config.server, metrics_address="127.0.0.1:0", health_probe_address="127.0.0.1:0"
    )
    return dataclasses.replace(config, leader_election=le, server=server)
