"""A second real Multi-Cluster Services implementation: Cilium's ClusterMesh MCS-API.

Cilium implements the MCS API entirely in `cilium-operator` (cilium/cilium
`pkg/clustermesh/mcsapi`); no agent and no datapath take part. Here each member
cluster gets what a real ClusterMesh in kvstore mode has, and nothing else:

- a **kvstore**: an etcd of its own (the pinned etcd, TLS with client certificates),
  which only Cilium uses;
- one **cilium-operator** (built by tools/controlplane/build.sh), whose kvstore is
  that etcd and whose clustermesh configuration directory holds one file per other
  member, named after it and listing that member's kvstore endpoint.

Each operator writes its cluster's configuration (`cilium/cluster-config/<name>`,
saying it serves ServiceExports), its Services and its ServiceExports into its own
kvstore, and reads every other member's. From that it creates, in every member, the
ServiceImport of each exported Service, a `derived-<hash>` Service behind it, and
EndpointSlices: in the exporting cluster mirrored from the Service's own
(`endpointslice-local-mcsapi-controller.cilium.io`), in the others from the remote
endpoints (`endpointslice-mesh-controller.cilium.io`). Remote EndpointSlices are
synced only for a headless import, or one annotated
`service.cilium.io/global-sync-endpoint-slices: "true"` (which Cilium copies from the
ServiceExport's `spec.exportedAnnotations`). It writes `Valid`, `Ready` and
`Conflict` on ServiceExports. cilium-operator's writes carry the user `CILIUM_USER`.

How it is run, and why (the flags are in `operator_args`):

- Nothing listens beyond loopback: the operator's API (`/v1/cluster`, which says when
  every remote cluster is connected and synced) on a free port, gops off, metrics off
  (the default), pprof off (the default), no shell socket. The kvstore etcd listens on
  free loopback ports.
- cilium-operator creates `/var/run/cilium` and writes its health history there
  whatever its flags say, so it runs with a private `/run` (`mountns`).
- It installs its own CRDs (as it does on a real cluster); the MCS CRDs are ours (the
  pinned mcs-api release, whose v1beta1 Cilium reads), so it is told not to.
- Pod IPs are kwok's (IPAM `kubernetes`: no pool for it to allocate from), and the
  clusters are IPv4 only.
- Controllers that would touch what other tests own are off: no Node taints or
  conditions, no restarting of "unmanaged" kube-dns pods.
- Its identity is a client certificate for `CILIUM_USER`, bound to `cluster-admin`:
  Cilium's own ClusterRole lists dozens of its CRDs, and what it may do is not what
  the tests judge; its writes are told from the operator's by that user.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dynamo_pool_operator.localcluster import mountns
from dynamo_pool_operator.localcluster.assets import Assets
from dynamo_pool_operator.localcluster.certs import TinyCA
from dynamo_pool_operator.localcluster.controlplane import (
    ADDRESS_IN_USE,
    BIND_ATTEMPTS,
    ControlPlane,
    ControlPlaneError,
    free_port,
)

#: The user cilium-operator authenticates as (its writes show under it in the audit log).
CILIUM_USER = "cilium-operator"
#: On EndpointSlices Cilium imports from another cluster.
MESH_MANAGED_BY = (
    "endpointslice.kubernetes.io/managed-by",
    "endpointslice-mesh-controller.cilium.io",
)
#: On the derived Service's EndpointSlices in the exporting cluster (mirrored).
LOCAL_MANAGED_BY = (
    "endpointslice.kubernetes.io/managed-by",
    "endpointslice-local-mcsapi-controller.cilium.io",
)
#: The import annotation that makes Cilium sync a ClusterIP import's EndpointSlices.
SYNC_ENDPOINT_SLICES = "service.cilium.io/global-sync-endpoint-slices"
#: Where cilium-operator keeps its leader-election Lease.
_LEASE_NAMESPACE = "kube-system"


def refused() -> str | None:
    """Why cilium-operator cannot run here (it needs a private /run), or None."""
    return mountns.refused("cilium-operator")


@dataclass
class Member:
    """One member's Cilium: its ClusterMesh name and ID, its files and ports."""

    cluster: str
    cluster_id: int
    dir: Path
    kvstore_port: int = field(default_factory=free_port)
    kvstore_peer_port: int = field(default_factory=free_port)
    api_port: int = field(default_factory=free_port)
    kubeconfig: Path | None = None
    #: Where this run's lines start in the operator's log (a restart appends).
    log_offset: int = 0

    @property
    def kvstore(self) -> str:
        return f"cilium-kvstore-{self.cluster}"

    @property
    def operator(self) -> str:
        return f"cilium-operator-{self.cluster}"


class ClusterMesh:
    """A kvstore and a cilium-operator per member: `with ClusterMesh(...) as mesh:`.

    The members' ControlPlanes must be started and serve the MCS API at v1beta1. Every
    process runs as one of its member ControlPlane's (`ControlPlane.spawn`), so it also
    stops with it, by PID; `stop()` stops the operators, then the kvstores.
    """

    def __init__(
        self,
        members: dict[str, ControlPlane],
        assets: Assets,
        *,
        start_timeout: float = 180,
    ) -> None:
        if assets.cilium_operator_generic is None:
            raise ControlPlaneError(assets.missing_peers("cilium-operator-generic") or "")
        self.operator_binary = assets.cilium_operator_generic
        self.etcd_binary = assets.etcd
        self.planes = members
        self.start_timeout = start_timeout
        self.members = {
            cluster: Member(cluster, i, cp.dir / f"cilium-{cluster}")
            for i, (cluster, cp) in enumerate(members.items(), start=1)
        }
        self._ca = TinyCA("dpo-cilium-kvstore-ca")
        self._running: set[str] = set()

    def __enter__(self) -> ClusterMesh:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if why := refused():
            raise ControlPlaneError(why)
        try:
            for m in self.members.values():
                self._write_files(m)
            for m in self.members.values():
                self._start_kvstore(m)
            self._write_configs()  # every kvstore's port is now final
            for cluster in self.members:
                self._grant(cluster)
                self.start_operator(cluster)
            for cluster in self.members:
                self._wait_bound(cluster)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for cluster in list(self._running):
            self.stop_operator(cluster)
        for cluster, m in self.members.items():
            self.planes[cluster].stop_process(m.kvstore)

    def start_operator(self, cluster: str) -> None:
        """Start (or start again) `cluster`'s cilium-operator."""
        m = self.members[cluster]
        log = self.planes[cluster].dir / f"{m.operator}.log"
        m.log_offset = log.stat().st_size if log.exists() else 0
        argv = mountns.with_private_run(m.dir / "run", self.operator_args(cluster))
        self.planes[cluster].spawn(m.operator, argv)
        self._running.add(cluster)

    def stop_operator(self, cluster: str) -> None:
        self._running.discard(cluster)
        self.planes[cluster].stop_process(self.members[cluster].operator)

    def operator_args(self, cluster: str) -> list[str]:
        m = self.members[cluster]
        return [
            str(self.operator_binary),
            f"--k8s-kubeconfig-path={m.kubeconfig}",
            f"--k8s-namespace={_LEASE_NAMESPACE}",
            # ClusterMesh: who we are, where our kvstore is, and the other members.
            f"--cluster-name={cluster}",
            f"--cluster-id={m.cluster_id}",
            "--kvstore=etcd",
            f"--kvstore-opt=etcd.config={m.dir / 'kvstore.yaml'}",
            f"--clustermesh-config={m.dir / 'clustermesh'}",
            # The MCS-API controllers, and the remote EndpointSlice sync they rely on.
            "--clustermesh-enable-mcs-api=true",
            "--clustermesh-enable-endpoint-sync=true",
            "--clustermesh-mcs-api-install-crds=false",
            # Loopback only, and nothing we do not read.
            f"--operator-api-serve-addr=127.0.0.1:{m.api_port}",
            "--enable-gops=false",
            "--shell-sock-path=",
            # Pod IPs are the nodes' (kwok's): no IP pools to allocate. IPv4 only, as
            # the clusters here are.
            "--ipam=kubernetes",
            "--enable-ipv6=false",
            # Leave other tests' Nodes and pods alone.
            "--set-cilium-is-up-condition=false",
            "--remove-cilium-node-taints=false",
            "--unmanaged-pod-watcher-interval=0",
        ]

    def _wait_bound(self, cluster: str) -> None:
        """`wait_ready`, starting the operator again on another API port when something
        took its port between our pick and its bind."""
        m = self.members[cluster]
        for attempt in range(1, BIND_ATTEMPTS + 1):
            try:
                self.wait_ready(cluster)
                return
            except ControlPlaneError:
                clash = ADDRESS_IN_USE in self.log(cluster, m.log_offset)
                if not clash or attempt == BIND_ATTEMPTS:
                    raise
                self.stop_operator(cluster)
                m.api_port = free_port()
                self.start_operator(cluster)

    def wait_ready(self, cluster: str) -> None:
        """Until `cluster`'s operator says every other member is connected and synced."""
        m = self.members[cluster]
        cp = self.planes[cluster]
        others = set(self.members) - {cluster}
        deadline = time.monotonic() + self.start_timeout
        last: Any = None
        while time.monotonic() < deadline:
            if not cp.alive(m.operator):
                raise ControlPlaneError(f"{m.operator} exited:\n{self.log(cluster)[-4000:]}")
            try:
                last = self.remote_clusters(cluster)
            except OSError as e:
                last = repr(e)
            else:
                ready = {c["name"] for c in last if c.get("ready")}
                if others <= ready:
                    return
            time.sleep(0.5)
        raise ControlPlaneError(
            f"{m.operator}: remote clusters not ready in {self.start_timeout}s "
            f"({last}):\n{self.log(cluster, m.log_offset)[-4000:]}"
        )

    def remote_clusters(self, cluster: str) -> list[dict[str, Any]]:
        """The operator's own view of its remote clusters (its API's `/v1/cluster`)."""
        url = f"http://127.0.0.1:{self.members[cluster].api_port}/v1/cluster"
        with urllib.request.urlopen(url, timeout=2) as resp:
            found: list[dict[str, Any]] = json.loads(resp.read()) or []
            return found

    def log(self, cluster: str, since: int = 0) -> str:
        """The operator's log (all its runs), from byte `since`."""
        path = self.planes[cluster].dir / f"{self.members[cluster].operator}.log"
        try:
            return path.read_bytes()[since:].decode(errors="replace")
        except OSError:
            return ""

    # ------------------------------------------------------------ kvstore and files
    def _write_files(self, m: Member) -> None:
        (m.dir / "run").mkdir(parents=True, exist_ok=True)
        (m.dir / "clustermesh").mkdir(exist_ok=True)
        server = self._ca.issue(
            "kvstore", dns_names=("localhost",), ips=("127.0.0.1",), server=True, client=True
        )
        client = self._ca.issue(f"cilium-{m.cluster}")
        files = {
            "ca.crt": self._ca.cert_pem,
            "kvstore.crt": server.cert_pem,
            "kvstore.key": server.key_pem,
            "client.crt": client.cert_pem,
            "client.key": client.key_pem,
        }
        for name, data in files.items():
            (m.dir / name).write_bytes(data)
            (m.dir / name).chmod(0o600)
        m.kubeconfig = self.planes[m.cluster].user_kubeconfig(CILIUM_USER)

    def _etcd_config(self, of: Member, reader: Member) -> str:
        """An etcd client configuration (what Cilium reads) for `of`'s kvstore, with
        `reader`'s client certificate."""
        return yaml.safe_dump(
            {
                "endpoints": [f"https://127.0.0.1:{of.kvstore_port}"],
                "trusted-ca-file": str(reader.dir / "ca.crt"),
                "cert-file": str(reader.dir / "client.crt"),
                "key-file": str(reader.dir / "client.key"),
            }
        )

    def _write_configs(self) -> None:
        for m in self.members.values():
            (m.dir / "kvstore.yaml").write_text(self._etcd_config(m, m))
            for other in self.members.values():
                if other is not m:
                    config = self._etcd_config(other, m)
                    (m.dir / "clustermesh" / other.cluster).write_text(config)

    def _start_kvstore(self, m: Member) -> None:
        """The member's kvstore etcd, picking other ports when something took them."""
        cp = self.planes[m.cluster]
        for attempt in range(1, BIND_ATTEMPTS + 1):
            d, peer = m.dir, f"https://127.0.0.1:{m.kvstore_peer_port}"
            cp.spawn(
                m.kvstore,
                [
                    str(self.etcd_binary),
                    f"--name={m.kvstore}",
                    f"--data-dir={d / 'kvstore-data'}",
                    f"--listen-client-urls=https://127.0.0.1:{m.kvstore_port}",
                    f"--advertise-client-urls=https://127.0.0.1:{m.kvstore_port}",
                    f"--cert-file={d / 'kvstore.crt'}",
                    f"--key-file={d / 'kvstore.key'}",
                    f"--trusted-ca-file={d / 'ca.crt'}",
                    "--client-cert-auth=true",
                    f"--listen-peer-urls={peer}",
                    f"--initial-advertise-peer-urls={peer}",
                    f"--initial-cluster={m.kvstore}={peer}",
                    f"--peer-cert-file={d / 'kvstore.crt'}",
                    f"--peer-key-file={d / 'kvstore.key'}",
                    f"--peer-trusted-ca-file={d / 'ca.crt'}",
                    "--peer-client-cert-auth=true",
                    "--unsafe-no-fsync=true",
                    "--log-level=warn",
                ],
            )
            try:
                self._wait_kvstore(m)
                return
            except ControlPlaneError as e:
                cp.stop_process(m.kvstore)
                if ADDRESS_IN_USE not in str(e) or attempt == BIND_ATTEMPTS:
                    raise
                m.kvstore_port, m.kvstore_peer_port = free_port(), free_port()

    def _wait_kvstore(self, m: Member, timeout: float = 30) -> None:
        cp = self.planes[m.cluster]
        ctx = ssl.create_default_context(cafile=str(m.dir / "ca.crt"))
        ctx.load_cert_chain(m.dir / "client.crt", m.dir / "client.key")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not cp.alive(m.kvstore):
                log = (cp.dir / f"{m.kvstore}.log").read_text(errors="replace")
                raise ControlPlaneError(f"{m.kvstore} exited:\n{log[-3000:]}")
            try:
                url = f"https://127.0.0.1:{m.kvstore_port}/health"
                with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise ControlPlaneError(f"{m.kvstore} not healthy in {timeout}s")

    def _grant(self, cluster: str) -> None:
        rbac = "rbac.authorization.k8s.io"
        binding = {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": CILIUM_USER},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": rbac, "kind": "User", "name": CILIUM_USER}],
        }
        self.planes[cluster].apply(binding)


# ------------------------------------------------------------------ a whole world
@dataclass
class World:
    """Members with nodes (kwok), their About API cluster IDs, and Cilium's ClusterMesh."""

    members: dict[str, ControlPlane]
    mesh: ClusterMesh

    @property
    def pids(self) -> list[int]:
        return [pid for cp in self.members.values() for pid in cp.pids]

    @property
    def dirs(self) -> list[Path]:
        return [cp.dir for cp in self.members.values()]


@contextmanager
def world(assets: Assets, clusters: tuple[str, ...] = ("east", "west")) -> Iterator[World]:
    """Start the control planes side by side, then Cilium; stop everything, by PID,
    on the way out. Every plane serves the pinned mcs-api CRDs."""
    from dynamo_pool_operator.localcluster.crds import default_crds
    from dynamo_pool_operator.localcluster.lighthouse import set_cluster_id

    if why := assets.missing_peers("kwok", "cilium-operator-generic") or refused():
        raise ControlPlaneError(why)
    members = {
        c: ControlPlane(assets=assets, crds=default_crds(assets.mcs_crd_dir), nodes=1)
        for c in clusters
    }
    try:
        with ThreadPoolExecutor(len(members)) as pool:
            for done in [pool.submit(cp.start) for cp in members.values()]:
                done.result()
        for cluster, cp in members.items():
            set_cluster_id(cp, cluster)
        with ClusterMesh(members, assets) as mesh:
            yield World(members, mesh)
    finally:
        for cp in members.values():
            cp.stop()
