"""A real Multi-Cluster Services implementation next to the operator: Submariner Lighthouse.

A broker control plane and member control planes, each member running one Lighthouse
agent (built by tools/controlplane/build.sh), which does what it does on a real
cluster: validates and conditions ServiceExports, publishes them to the broker, and
writes the ServiceImports and remote EndpointSlices in the other members. No gateway,
globalnet or DNS: discovery state only, all that the operator and a router read.

- The agent ignores `-kubeconfig` (its main re-parses flags with klog's set), so it
  runs in-cluster: `KUBERNETES_SERVICE_*` plus a token and `ca.crt` under
  `/var/run/secrets/...`, in its own mount namespace with a private `/run`
  (`mountns`); where the sandbox refuses namespaces the tests skip.
- Its identity: ServiceAccounts with the permissions of Submariner's own roles, their
  tokens from the TokenRequest API, as `subctl join` gets them. Its writes show in the
  audit log as `AGENT_USER`.
- Its metrics port `:8082` is fixed: the first agent gets it, the others log the bind
  error and work on; the ports we pick come from the ephemeral range, never 8082.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynamo_pool_operator.api.mcs import CLUSTER_ID_PROPERTY
from dynamo_pool_operator.localcluster import mountns
from dynamo_pool_operator.localcluster.assets import Assets
from dynamo_pool_operator.localcluster.controlplane import ControlPlane, ControlPlaneError
from dynamo_pool_operator.localcluster.crds import default_crds, mcs_crds
from dynamo_pool_operator.runtime.objects import Resource

#: Where each member's agent keeps its local state (and its ServiceAccount lives).
AGENT_NAMESPACE = "submariner-operator"
AGENT_SERVICE_ACCOUNT = "submariner-lighthouse-agent"
AGENT_USER = f"system:serviceaccount:{AGENT_NAMESPACE}:{AGENT_SERVICE_ACCOUNT}"
#: The broker namespace every member syncs through.
BROKER_NAMESPACE = "submariner-k8s-broker"
#: What the agent logs once its syncers run.
_STARTED = "Agent controller started"
#: The label Lighthouse puts on the EndpointSlices it manages (local and imported).
MANAGED_BY = ("endpointslice.kubernetes.io/managed-by", "lighthouse-agent.submariner.io")
#: On an imported EndpointSlice: the cluster its endpoints are in.
SOURCE_CLUSTER_LABEL = "multicluster.kubernetes.io/source-cluster"

_GROUP = "multicluster.x-k8s.io"


def service_imports(version: str = "v1alpha1") -> Resource:
    """ServiceImports at `version` (Lighthouse v0.20 reads and writes v1alpha1)."""
    return Resource(_GROUP, version, "serviceimports", "ServiceImport")


def namespaces_refused() -> str | None:
    """Why this machine cannot give an agent its own mount namespace, or None."""
    return mountns.refused("the Lighthouse agent")


# ------------------------------------------------------------------ RBAC
def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


_READ = ["get", "list", "watch"]
_WRITE = ["create", "get", "list", "watch", "update", "patch", "delete", "deletecollection"]


def _granted(
    account: str, namespace: str, role: str, rules: list[dict[str, Any]], *, cluster_wide: bool
) -> list[dict[str, Any]]:
    """A ServiceAccount, a (Cluster)Role of `rules` and the binding that grants it."""
    kind = "ClusterRole" if cluster_wide else "Role"
    scope = {} if cluster_wide else {"namespace": namespace}
    rbac = "rbac.authorization.k8s.io"
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": namespace},
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": kind,
            "metadata": {**scope, "name": role},
            "rules": rules,
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": f"{kind}Binding",
            "metadata": {**scope, "name": account},
            "roleRef": {"apiGroup": rbac, "kind": kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        },
    ]


def member_rbac() -> list[dict[str, Any]]:
    """The agent's ServiceAccount and what Submariner's lighthouse-agent role grants it:
    read Services, Namespaces and Endpoints; own ServiceExports/Imports (status too)
    and EndpointSlices."""
    mcs = ["serviceexports", "serviceexports/status", "serviceimports", "serviceimports/status"]
    rules = [
        _rule([""], ["services", "namespaces", "endpoints"], _READ),
        _rule(["discovery.k8s.io"], ["endpointslices", "endpointslices/restricted"], _WRITE),
        _rule([_GROUP], mcs, _WRITE),
    ]
    name = AGENT_SERVICE_ACCOUNT
    return _granted(name, AGENT_NAMESPACE, name, rules, cluster_wide=True)


def broker_rbac(cluster: str) -> list[dict[str, Any]]:
    """On the broker: a ServiceAccount for `cluster`'s agent and a Role over the broker
    namespace (everything of the MCS API, and EndpointSlices)."""
    rules = [_rule([_GROUP], ["*"], ["*"]), _rule(["discovery.k8s.io"], ["endpointslices"], _WRITE)]
    role = "lighthouse-broker-cluster"
    return _granted(f"cluster-{cluster}", BROKER_NAMESPACE, role, rules, cluster_wide=False)


def token(cp: ControlPlane, namespace: str, service_account: str, seconds: int = 86_400) -> str:
    """A ServiceAccount token from the TokenRequest API."""
    status, body = cp.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        },
    )
    if status != 201:
        raise ControlPlaneError(f"TokenRequest {namespace}/{service_account}: {status} {body}")
    return str(body["status"]["token"])


# ------------------------------------------------------------------ the set
@dataclass(frozen=True)
class Agent:
    cluster: str
    #: Its name among the member ControlPlane's processes (and its log's).
    process: str
    #: Where this run's lines start in the log (a restarted agent appends).
    log_offset: int


class ClusterSet:
    """A broker and a Lighthouse agent per member: `with ClusterSet(...) as cs:`.

    The members' ControlPlanes must be started and must serve the MCS API. The agents
    run as processes of their member ControlPlane (`ControlPlane.spawn`), so they stop
    with it, by PID, before its API server; `stop()` stops them earlier.
    """

    def __init__(
        self,
        broker: ControlPlane,
        members: dict[str, ControlPlane],
        agent_binary: Path,
        *,
        start_timeout: float = 60,
    ) -> None:
        self.broker = broker
        self.members = members
        self.agent_binary = agent_binary
        self.start_timeout = start_timeout
        self.agents: dict[str, Agent] = {}

    def __enter__(self) -> ClusterSet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        why = namespaces_refused()
        if why:
            raise ControlPlaneError(why)
        self.broker.create_namespace(BROKER_NAMESPACE)
        for cluster, cp in self.members.items():
            for obj in broker_rbac(cluster):
                self.broker.apply(obj)
            cp.create_namespace(AGENT_NAMESPACE)
            for obj in member_rbac():
                cp.apply(obj)
        try:
            for cluster in self.members:
                self.start_agent(cluster)
            for cluster in self.members:
                self.wait_started(cluster)
        except BaseException:
            self.stop()
            raise

    def start_agent(self, cluster: str) -> None:
        """Start (or start again) `cluster`'s agent."""
        cp = self.members[cluster]
        run = cp.dir / f"lighthouse-{cluster}-run"
        secrets = run / "secrets" / "kubernetes.io" / "serviceaccount"
        secrets.mkdir(parents=True, exist_ok=True)
        files = {
            "token": token(cp, AGENT_NAMESPACE, AGENT_SERVICE_ACCOUNT),
            "ca.crt": cp.serving_ca_pem.decode(),
            "namespace": AGENT_NAMESPACE,
        }
        for name, text in files.items():
            (secrets / name).write_text(text)
            (secrets / name).chmod(0o600)
        broker_token = token(self.broker, BROKER_NAMESPACE, f"cluster-{cluster}")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(cp.port),
            "SUBMARINER_CLUSTERID": cluster,
            "SUBMARINER_NAMESPACE": AGENT_NAMESPACE,
            "SUBMARINER_GLOBALNET_ENABLED": "false",
            "BROKER_K8S_APISERVER": f"127.0.0.1:{self.broker.port}",  # host:port, no scheme
            "BROKER_K8S_APISERVERTOKEN": broker_token,
            "BROKER_K8S_REMOTENAMESPACE": BROKER_NAMESPACE,
            "BROKER_K8S_CA": base64.b64encode(self.broker.serving_ca_pem).decode(),
        }
        args = mountns.with_private_run(run, [str(self.agent_binary)])
        name = f"lighthouse-agent-{cluster}"
        log = cp.dir / f"{name}.log"
        offset = log.stat().st_size if log.exists() else 0
        cp.spawn(name, args, env=env)
        self.agents[cluster] = Agent(cluster, name, offset)

    def wait_started(self, cluster: str) -> None:
        agent = self.agents[cluster]
        cp = self.members[cluster]
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if _STARTED in self.log(cluster, agent.log_offset):
                return
            if not cp.alive(agent.process):
                raise ControlPlaneError(f"{agent.process} exited:\n{self.log(cluster)[-3000:]}")
            time.sleep(0.2)
        raise ControlPlaneError(
            f"{agent.process} not started in {self.start_timeout}s:\n{self.log(cluster)[-3000:]}"
        )

    def stop_agent(self, cluster: str) -> None:
        agent = self.agents.pop(cluster, None)
        if agent is not None:
            self.members[cluster].stop_process(agent.process)

    def stop(self) -> None:
        for cluster in list(self.agents):
            self.stop_agent(cluster)

    def log(self, cluster: str, since: int = 0) -> str:
        """The agent's log (all its runs), from byte `since`."""
        path = self.members[cluster].dir / f"lighthouse-agent-{cluster}.log"
        try:
            return path.read_bytes()[since:].decode(errors="replace")
        except OSError:
            return ""

    @property
    def pids(self) -> list[int]:
        return [pid for cp in self.members.values() for pid in cp.pids]


# ------------------------------------------------------------------ a whole world
def set_cluster_id(cp: ControlPlane, cluster: str) -> None:
    cp.apply(
        {
            "apiVersion": "about.k8s.io/v1beta1",
            "kind": "ClusterProperty",
            "metadata": {"name": CLUSTER_ID_PROPERTY},
            "spec": {"value": cluster},
        }
    )


@dataclass
class World:
    """A broker, members with nodes (kwok) and their cluster IDs, and Lighthouse."""

    broker: ControlPlane
    members: dict[str, ControlPlane]
    lighthouse: ClusterSet
    #: The mcs-api release whose CRDs every control plane serves.
    mcs_api: str

    @property
    def pids(self) -> list[int]:
        return [pid for cp in (self.broker, *self.members.values()) for pid in cp.pids]

    @property
    def dirs(self) -> list[Path]:
        return [cp.dir for cp in (self.broker, *self.members.values())]


@contextmanager
def world(
    assets: Assets, clusters: tuple[str, ...] = ("east", "west"), *, mcs_crd_dir: Path
) -> Iterator[World]:
    """Start the control planes side by side (a 2-core machine still gains: most of a
    start is waiting), then the agents; stop everything, by PID, on the way out."""
    if why := assets.missing_peers() or namespaces_refused():
        raise ControlPlaneError(why)
    assert assets.lighthouse_agent is not None
    broker = ControlPlane(assets=assets, crds=mcs_crds(mcs_crd_dir), garbage_collector=False)
    members = {
        c: ControlPlane(assets=assets, crds=default_crds(mcs_crd_dir), nodes=1) for c in clusters
    }
    planes = [broker, *members.values()]
    try:
        with ThreadPoolExecutor(len(planes)) as pool:
            for done in [pool.submit(cp.start) for cp in planes]:
                done.result()
        for cluster, cp in members.items():
            set_cluster_id(cp, cluster)
        with ClusterSet(broker, members, assets.lighthouse_agent) as lighthouse:
            yield World(broker, members, lighthouse, mcs_crd_dir.name.removeprefix("mcs-api-"))
    finally:
        for cp in planes:
            cp.stop()
