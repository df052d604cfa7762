"""A real local Kubernetes control plane: etcd + kube-apiserver (+ the garbage collector).

Started like envtest: TLS on 127.0.0.1 with certificates made in process, an
`admin` client certificate in `system:masters`, RBAC on, free ports, an audit
log of every write with its user agent, and kube-controller-manager running only
the garbage-collector and namespace controllers (ownership is how exports die
with their relay, so GC must be real). Used by the test fixtures and by `dev`.

Production admission is on: OwnerReferencesPermissionEnforcement, and PodSecurity
with every namespace made by `create_namespace` enforcing `restricted`.

`ControlPlane(nodes=N)` adds a world where pods run: kwok plays the kubelet of N
fake Nodes, a MutatingAdmissionPolicy plays the scheduler, and kube-controller-manager
also runs the Deployment, ReplicaSet, EndpointSlice and Job controllers (`kwok.py` says
what this world does and does not do).

Everything lives in one temporary directory that `stop()` removes; processes
run in their own sessions and are killed on stop, at interpreter exit, and when
start fails half way.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import http.client
import json
import logging
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dynamo_pool_operator.localcluster import kwok
from dynamo_pool_operator.localcluster.assets import Assets, resolve
from dynamo_pool_operator.localcluster.audit import AUDIT_POLICY, AuditLog
from dynamo_pool_operator.localcluster.certs import KeyPair, TinyCA, service_account_signer

log = logging.getLogger(__name__)

#: What kube-controller-manager logs once the garbage collector watches every resource.
_GC_SYNCED = "all resource monitors have synced"
_GC_CONTROLLERS = ("garbage-collector-controller", "namespace-controller")
#: What makes pods out of Deployments and Jobs, and endpoints out of pods (names as in
#: 1.37's --help). The Job controller is what lets a Helm hook Job (the chart's CRD hook)
#: complete: without it the Job gets no pod and `helm install` waits out its timeout.
_POD_CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "endpointslice-controller",
    "job-controller",
)
#: The PodSecurity level every namespace made here enforces.
POD_SECURITY_LABELS = {"pod-security.kubernetes.io/enforce": "restricted"}


class ControlPlaneError(RuntimeError):
    """The control plane failed to start or answer; the message carries the log tail."""


#: How often a process is started on a newly picked port when its port was taken.
BIND_ATTEMPTS = 3
#: What etcd, kube-apiserver and kube-controller-manager log when their port is taken.
ADDRESS_IN_USE = "address already in use"


def _nothing() -> None:
    """Nothing to pick again: the process picks its port when started."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class _Proc:
    name: str
    args: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    env: dict[str, str] | None = None

    def start(self) -> None:
        out = self.log.open("ab")
        try:
            self.popen = subprocess.Popen(
                self.args,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=self.env,
            )
        finally:
            out.close()

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        p = self.popen
        if p is None or p.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill: no graceful shutdown, no flushing."""
        p = self.popen
        if p is None or p.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class ControlPlane:
    """etcd + kube-apiserver (+ kube-controller-manager) on loopback; a context manager."""

    def __init__(
        self,
        *,
        assets: Assets | None = None,
        garbage_collector: bool = True,
        crds: list[dict[str, Any]] | None = None,
        extra_apiserver_args: list[str] | None = None,
        nodes: int = 0,
    ) -> None:
        self.assets = assets or resolve()
        if nodes and (self.assets.kwok is None or self.assets.kube_controller_manager is None):
            raise ControlPlaneError(
                self.assets.missing_peers("kwok") or "nodes need kube-controller-manager"
            )
        self.nodes = nodes
        # Pods need the controllers, and a Deployment's pods go through the collector.
        self._want_gc = garbage_collector or nodes > 0
        self._crds = crds or []
        self._extra = extra_apiserver_args or []
        self._authorization_config = any(
            a.startswith("--authorization-config") for a in self._extra
        )
        self.dir = Path(tempfile.mkdtemp(prefix="dpo-controlplane-", dir=_fast_tmp()))
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self._procs: dict[str, _Proc] = {}
        self._ca = TinyCA("dpo-serving-ca")
        self._client_ca = TinyCA("dpo-client-ca")
        # etcd answers only clients with a certificate of its own CA (the API server,
        # and this object's own requests): its loopback port is open to every local user.
        self._etcd_ca = TinyCA("dpo-etcd-ca")
        self._etcd_client = self._etcd_ca.issue("dpo-controlplane")
        self._etcd_ssl: ssl.SSLContext | None = None
        self.admin = self._client_ca.issue("admin", organizations=("system:masters",))
        self.kubeconfig = self.dir / "kubeconfig"
        self.audit = AuditLog(self.dir / "audit.log", self.request)
        self._ssl: ssl.SSLContext | None = None
        atexit.register(self.stop)

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        try:
            self._write_files()
            self._bound(self._start_etcd, "etcd", self._repick_etcd_ports)
            self._bound(self._start_apiserver, "kube-apiserver", self._repick_apiserver_port)
            # CRDs first: the garbage collector discovers resources at start and
            # only every 30 s after, so CRDs installed later are collected late.
            for crd in self._crds:
                self.install_crd(crd)
            if self.nodes:
                self._start_nodes()
            if self._want_gc and self.assets.kube_controller_manager is not None:
                self._bound(self._start_controller_manager, "kube-controller-manager", _nothing)
        except BaseException:
            self.stop()
            raise

    def _bound(self, start: Callable[[], None], name: str, repick: Callable[[], None]) -> None:
        """Start a process whose port was picked free earlier, picking again when it
        exits because something took the port meanwhile (a free port is only free when
        looked at: another cluster starting in parallel, or any client's outgoing
        connection, may get it first)."""
        for attempt in range(1, BIND_ATTEMPTS + 1):
            try:
                start()
                return
            except ControlPlaneError as e:
                if ADDRESS_IN_USE not in str(e) or attempt == BIND_ATTEMPTS:
                    raise
                log.warning("%s: its port was taken (attempt %d); picking another", name, attempt)
                self._procs.pop(name).stop()
                repick()

    def _repick_etcd_ports(self) -> None:
        shutil.rmtree(self.dir / "etcd-data", ignore_errors=True)
        self.etcd_port, self.etcd_peer_port = free_port(), free_port()

    def _repick_apiserver_port(self) -> None:
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.kubeconfig.write_text(self.kubeconfig_text(self.admin, "admin"))

    def stop(self) -> None:
        """Stop every process and remove the directory; safe to call twice. Peers
        (kwok, agents) first, the API server before etcd."""
        core = ("kube-controller-manager", "kube-apiserver", "etcd")
        for name in [n for n in self._procs if n not in core] + list(core):
            if name in self._procs:
                self._procs[name].stop()
        self._procs.clear()
        shutil.rmtree(self.dir, ignore_errors=True)
        atexit.unregister(self.stop)

    @property
    def pids(self) -> list[int]:
        return [p.popen.pid for p in self._procs.values() if p.popen is not None]

    @property
    def named_pids(self) -> dict[str, int]:
        """Each running process by name (`etcd`, `kube-apiserver`, ...): for CPU accounting."""
        return {n: p.popen.pid for n, p in self._procs.items() if p.popen is not None}

    @property
    def garbage_collector(self) -> bool:
        return "kube-controller-manager" in self._procs

    def _write_files(self) -> None:
        serving = self._ca.issue(
            "kube-apiserver", dns_names=("localhost",), ips=("127.0.0.1",), server=True
        )
        sa = service_account_signer()
        # etcd's serving and peer certificate (a peer is a server and a client).
        etcd = self._etcd_ca.issue(
            "etcd", dns_names=("localhost",), ips=("127.0.0.1",), server=True, client=True
        )
        files = {
            "serving.crt": serving.cert_pem,
            "serving.key": serving.key_pem,
            "serving-ca.crt": self._ca.cert_pem,
            "client-ca.crt": self._client_ca.cert_pem,
            "sa.pub": sa.cert_pem,
            "sa.key": sa.key_pem,
            "audit-policy.yaml": yaml.safe_dump(AUDIT_POLICY).encode(),
            "etcd-ca.crt": self._etcd_ca.cert_pem,
            "etcd.crt": etcd.cert_pem,
            "etcd.key": etcd.key_pem,
            "etcd-client.crt": self._etcd_client.cert_pem,
            "etcd-client.key": self._etcd_client.key_pem,
        }
        for name, data in files.items():
            path = self.dir / name
            path.write_bytes(data)
            path.chmod(0o600)
        self.kubeconfig.write_text(self.kubeconfig_text(self.admin, "admin"))
        self.kubeconfig.chmod(0o600)

    def _start_etcd(self) -> None:
        data, d = self.dir / "etcd-data", self.dir
        peer = f"https://127.0.0.1:{self.etcd_peer_port}"
        args = [
            str(self.assets.etcd),
            f"--data-dir={data}",
            f"--listen-client-urls=https://127.0.0.1:{self.etcd_port}",
            f"--advertise-client-urls=https://127.0.0.1:{self.etcd_port}",
            f"--cert-file={d / 'etcd.crt'}",
            f"--key-file={d / 'etcd.key'}",
            f"--trusted-ca-file={d / 'etcd-ca.crt'}",
            "--client-cert-auth=true",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}",
            f"--peer-cert-file={d / 'etcd.crt'}",
            f"--peer-key-file={d / 'etcd.key'}",
            f"--peer-trusted-ca-file={d / 'etcd-ca.crt'}",
            "--peer-client-cert-auth=true",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ]
        self._spawn("etcd", args)
        self._wait(lambda: self._etcd_health(), "etcd", 30)

    def _start_apiserver(self) -> None:
        d = self.dir
        args = [
            str(self.assets.kube_apiserver),
            f"--etcd-servers=https://127.0.0.1:{self.etcd_port}",
            f"--etcd-cafile={d / 'etcd-ca.crt'}",
            f"--etcd-certfile={d / 'etcd-client.crt'}",
            f"--etcd-keyfile={d / 'etcd-client.key'}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # No endpoints for the `kubernetes` Service: a loopback address is not
            # allowed there, and nothing here needs them.
            "--endpoint-reconciler-type=none",
            f"--secure-port={self.port}",
            f"--cert-dir={d / 'certs'}",
            f"--tls-cert-file={d / 'serving.crt'}",
            f"--tls-private-key-file={d / 'serving.key'}",
            f"--client-ca-file={d / 'client-ca.crt'}",
            # RBAC, unless a test gives an authorizer chain of its own (the two flags
            # exclude each other).
            *([] if self._authorization_config else ["--authorization-mode=RBAC"]),
            # Room for many Services (a /24 has 254 addresses; the bench needs more).
            "--service-cluster-ip-range=10.96.0.0/16",
            f"--service-account-issuer={self.url}",
            f"--service-account-key-file={d / 'sa.pub'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            "--disable-admission-plugins=ServiceAccount",
            # Production admission: OpenShift enables this plugin by default. It refuses
            # `blockOwnerDeletion: true` unless the writer may update the owner's
            # finalizers, which is what the operator's own references carry.
            # PodSecurity is on by default; named so the intent is visible, it enforces
            # what each namespace's labels say (`create_namespace`: restricted).
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement,PodSecurity",
            "--allow-privileged=true",
            f"--audit-policy-file={d / 'audit-policy.yaml'}",
            f"--audit-log-path={self.audit.path}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            "--audit-log-maxbackup=0",
            "--audit-log-maxsize=0",
            *self._extra,
        ]
        self._spawn("kube-apiserver", args)
        self._wait(lambda: self._ready("/readyz"), "kube-apiserver", 90)

    def _start_controller_manager(self) -> None:
        assert self.assets.kube_controller_manager is not None
        controllers = _GC_CONTROLLERS + (_POD_CONTROLLERS if self.nodes else ())
        args = [
            str(self.assets.kube_controller_manager),
            f"--kubeconfig={self.kubeconfig}",
            f"--controllers={','.join(controllers)}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--use-service-account-credentials=false",
            "--concurrent-gc-syncs=5",
            "--v=1",
        ]
        self._spawn("kube-controller-manager", args)
        log = self._procs["kube-controller-manager"].log
        self._wait(lambda: _GC_SYNCED in log.read_text(errors="replace"), "kcm", 60)

    def _start_nodes(self) -> None:
        """The scheduler stand-in (effective before any pod is created), the Nodes, kwok."""
        assert self.assets.kwok is not None
        for obj in kwok.scheduler(self.nodes):
            self.apply(obj)
        self._wait(self._scheduler_admits, "kube-apiserver", 30)
        for i in range(self.nodes):
            self.apply(kwok.node(i))
        stages = self.dir / "kwok-stages.yaml"
        stages.write_text(kwok.stages_yaml())
        key, value = kwok.NODE_ANNOTATION
        self._spawn(
            "kwok",
            [
                str(self.assets.kwok),
                f"--kubeconfig={self.kubeconfig}",
                f"--manage-nodes-with-annotation-selector={key}={value}",
                f"--cidr={kwok.POD_CIDR}",
                f"--node-ip={kwok.NODE_IP}",
                # kwok renews each Node's Lease, as a kubelet does.
                "--node-lease-duration-seconds=40",
                f"--config={stages}",
            ],
        )
        self._wait(self._nodes_ready, "kwok", 60)

    def _scheduler_admits(self) -> bool:
        """A dry-run Pod comes back with a node: the policy is loaded (it takes effect
        a moment after it is created)."""
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "dpo-scheduler-probe"},
            "spec": {"containers": [{"name": "c", "image": "probe"}]},
        }
        status, body = self.request("POST", "/api/v1/namespaces/default/pods?dryRun=All", probe)
        return status == 201 and bool(body["spec"].get("nodeName"))

    def _nodes_ready(self) -> bool:
        status, body = self.request("GET", "/api/v1/nodes")
        if status != 200:
            return False
        ready = [
            n
            for n in body["items"]
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (n.get("status") or {}).get("conditions") or []
            )
        ]
        return len(ready) >= self.nodes

    def spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        """Run a peer process (a Lighthouse agent) as part of this control plane: its
        log in the directory, stopped (by its PID) before the API server, in `pids`."""
        if name in self._procs:
            raise ControlPlaneError(f"a process named {name} already runs")
        self._procs[name] = _Proc(name, args, self.dir / f"{name}.log", env=env)
        self._procs[name].start()

    def alive(self, name: str) -> bool:
        return name in self._procs and self._procs[name].alive()

    def stop_process(self, name: str) -> None:
        """Stop a process started by `spawn` (by its PID) and forget it."""
        proc = self._procs.pop(name, None)
        if proc is not None:
            proc.stop()

    @property
    def serving_ca_pem(self) -> bytes:
        """The CA that signed the API server's serving certificate (what `ca.crt` is)."""
        return self._ca.cert_pem

    def _spawn(self, name: str, args: list[str]) -> None:
        proc = _Proc(name, args, self.dir / f"{name}.log")
        self._procs[name] = proc
        proc.start()

    def _wait(self, ok: Any, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self._procs.get(name if name != "kcm" else "kube-controller-manager")
            if proc is not None and not proc.alive():
                raise ControlPlaneError(f"{proc.name} exited:\n{proc.tail()}")
            with contextlib.suppress(OSError, ControlPlaneError):
                if ok():
                    return
            time.sleep(0.2)
        proc = self._procs.get(name)
        raise ControlPlaneError(f"{name} not ready in {timeout}s:\n{proc.tail() if proc else ''}")

    # ------------------------------------------------------------ restarts (fault tests)
    def restart_apiserver(self, down_for: float = 0.0, *, kill: bool = False) -> None:
        """Stop (SIGTERM, or SIGKILL with `kill`) and start kube-apiserver on the same
        port: watches break, state stays."""
        self._stop_proc("kube-apiserver", kill)
        time.sleep(down_for)
        self._start_apiserver()

    def restart_etcd(self, down_for: float = 0.0, *, kill: bool = False) -> None:
        """Stop (SIGTERM, or SIGKILL with `kill`) and start etcd on the same data."""
        self._stop_proc("etcd", kill)
        time.sleep(down_for)
        self._start_etcd()

    def _stop_proc(self, name: str, kill: bool) -> None:
        if kill:
            self._procs[name].kill()
        else:
            self._procs[name].stop()

    # ------------------------------------------------------------ etcd
    def _client_context(self, ca: TinyCA, pair: KeyPair, file: str) -> ssl.SSLContext:
        """A TLS client context trusting `ca` and presenting `pair` (written to `file`)."""
        ctx = ssl.create_default_context(cadata=ca.cert_pem.decode())
        pem = self.dir / file
        pem.write_bytes(pair.cert_pem + pair.key_pem)
        pem.chmod(0o600)
        ctx.load_cert_chain(pem)
        return ctx

    def _etcd_context(self) -> ssl.SSLContext:
        if self._etcd_ssl is None:
            self._etcd_ssl = self._client_context(
                self._etcd_ca, self._etcd_client, "etcd-admin.pem"
            )
        return self._etcd_ssl

    def _etcd_connection(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            "127.0.0.1", self.etcd_port, timeout=timeout, context=self._etcd_context()
        )

    def _etcd(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        conn = self._etcd_connection(10)
        try:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status >= 300:
                raise ControlPlaneError(f"etcd {path}: {resp.status} {data[:300]!r}")
            result: dict[str, Any] = json.loads(data)
            return result
        finally:
            conn.close()

    def _etcd_health(self) -> bool:
        conn = self._etcd_connection(2)
        try:
            conn.request("GET", "/health")
            return conn.getresponse().status == 200
        finally:
            conn.close()

    def etcd_revision(self) -> int:
        head = self._etcd("/v3/kv/range", {"key": "AA=="})  # any key: the header has the rev
        return int(head["header"]["revision"])

    def compact_etcd(self) -> int:
        """Compact etcd at its current revision, so every older watch gets 410 Gone."""
        rev = self.etcd_revision()
        self._etcd("/v3/kv/compaction", {"revision": str(rev), "physical": True})
        return rev

    # ------------------------------------------------------------ API (sync, admin)
    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = self._client_context(self._ca, self.admin, "admin.pem")
        return self._ssl

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        """One synchronous admin request; returns (status, decoded body)."""
        conn = http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self._ssl_context(), timeout=30
        )
        try:
            headers = {"Accept": "application/json", "User-Agent": "dpo-controlplane"}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = content_type
            conn.request(method, path, data, headers)
            resp = conn.getresponse()
            raw = resp.read()
            try:
                return resp.status, json.loads(raw) if raw else None
            except ValueError:
                return resp.status, raw.decode(errors="replace")
        finally:
            conn.close()

    def _ready(self, path: str) -> bool:
        status, _ = self.request("GET", path)
        return status == 200

    def apply(self, obj: dict[str, Any], field_manager: str = "dpo-controlplane") -> Any:
        """Server-side apply (forced) of any object as admin; raises on failure."""
        gv = obj["apiVersion"]
        base = f"/api/{gv}" if "/" not in gv else f"/apis/{gv}"
        plural = self._plural(gv, obj["kind"])
        ns = obj["metadata"].get("namespace")
        path = f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"
        status, body = self.request(
            "PATCH",
            f"{path}/{obj['metadata']['name']}?fieldManager={field_manager}&force=true",
            obj,
            "application/apply-patch+yaml",
        )
        if status >= 300:
            raise ControlPlaneError(f"apply {obj['kind']} {obj['metadata']['name']}: {body}")
        return body

    def _plural(self, group_version: str, kind: str) -> str:
        base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
        status, body = self.request("GET", base)
        if status == 200:
            for r in body.get("resources", []):
                if r.get("kind") == kind and "/" not in r["name"]:
                    return str(r["name"])
        raise ControlPlaneError(f"{kind} is not served at {group_version}")

    def install_crd(self, crd: dict[str, Any], timeout: float = 30) -> None:
        """Apply a CRD and wait until every served version is in discovery."""
        self.apply(crd)
        group = crd["spec"]["group"]
        plural = crd["spec"]["names"]["plural"]
        served = [v["name"] for v in crd["spec"]["versions"] if v.get("served", True)]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ok = True
            for v in served:
                status, body = self.request("GET", f"/apis/{group}/{v}")
                names = (
                    [r["name"] for r in (body or {}).get("resources", [])] if status == 200 else []
                )
                ok = ok and plural in names
            if ok:
                return
            time.sleep(0.1)
        raise ControlPlaneError(f"CRD {plural}.{group} not served after {timeout}s")

    def delete_crd(self, name: str, timeout: float = 60) -> None:
        """Delete a CRD and wait until it is gone (its objects go with it)."""
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        self.request("DELETE", path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.request("GET", path)[0] == 404:
                return
            time.sleep(0.2)
        raise ControlPlaneError(f"CRD {name} still present after {timeout}s")

    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        """A namespace enforcing Pod Security `restricted` (as hardened clusters and
        OpenShift do), so a pod template that is not compliant is refused here too."""
        meta = {"name": name, "labels": {**POD_SECURITY_LABELS, **(labels or {})}}
        status, body = self.request("POST", "/api/v1/namespaces", {"metadata": meta})
        if status >= 300:
            raise ControlPlaneError(f"create namespace {name}: {body}")

    def delete_namespace(self, name: str) -> None:
        self.request("DELETE", f"/api/v1/namespaces/{name}")

    # ------------------------------------------------------------ users
    def kubeconfig_text(self, pair: KeyPair, user: str) -> str:
        def b64(b: bytes) -> str:
            return base64.b64encode(b).decode()

        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "dpo-local",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": b64(self._ca.cert_pem),
                    },
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate-data": b64(pair.cert_pem),
                        "client-key-data": b64(pair.key_pem),
                    },
                }
            ],
            "contexts": [{"name": "dpo-local", "context": {"cluster": "dpo-local", "user": user}}],
            "current-context": "dpo-local",
        }
        return yaml.safe_dump(cfg)

    def user_kubeconfig(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig for a restricted user (client cert CN=user, O=groups)."""
        pair = self._client_ca.issue(user, organizations=groups)
        path = self.dir / f"kubeconfig-{user.replace(':', '_')}"
        path.write_text(self.kubeconfig_text(pair, user))
        path.chmod(0o600)
        return path

    def token_kubeconfig(self, token: str, user: str = "token-user") -> Path:
        """A kubeconfig that authenticates with a bearer token (e.g. a TokenRequest)."""
        cfg = yaml.safe_load(self.kubeconfig_text(self.admin, user))
        cfg["users"] = [{"name": user, "user": {"token": token}}]
        path = self.dir / f"kubeconfig-token-{user.replace(':', '_')}"
        path.write_text(yaml.safe_dump(cfg))
        path.chmod(0o600)
        return path


def _fast_tmp() -> str | None:
    """Prefer a memory-backed directory for etcd's data (2-core machines, no fsync)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return str(shm)
    return None
