"""Operator replicas as real processes (`dynamo-pool-operator run`), as a Deployment
with two pods would run them: each under its own user (so the audit log tells their
writes apart), both in one group bound to exactly the shipped RBAC, with leader
election on. A supervisor restarts a replica that exits, as the kubelet would
(`restartPolicy: Always`), and counts the restarts.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dynamo_pool_operator import rbac
from dynamo_pool_operator.config import API_VERSION, KIND
from dynamo_pool_operator.localcluster.controlplane import ControlPlane, free_port

#: Every replica's certificate carries this group; RBAC and the webhook key on it.
GROUP = "dpo-fault-operators"
USER_PREFIX = "dpo-fault-"
LEASE_NAME = "dynamo-pool-operator-leader"
_ACQUIRED = re.compile(r"acquired lease \S+ as '([^']+)'")


@dataclass(frozen=True)
class LeaseTiming:
    """Lease duration, renew deadline, retry period in seconds."""

    duration: int = 6
    renew: int = 4
    retry: int = 1


def grant_shipped_rbac(cp: ControlPlane, lease_namespace: str) -> list[str]:
    """Apply `rbac.render()` (cluster-wide mode, as the chart) bound to GROUP instead of
    the chart's ServiceAccount; return the paths to delete afterwards."""
    paths = []
    for obj in rbac.render("unused", "unused", None, lease_namespace, lease_name=LEASE_NAME):
        if obj["kind"].endswith("Binding"):
            obj["subjects"] = [
                {"kind": "Group", "name": GROUP, "apiGroup": "rbac.authorization.k8s.io"}
            ]
        # Cluster-scoped names are unique per lease namespace, so tests do not collide.
        obj["metadata"]["name"] = f"{obj['metadata']['name']}-{lease_namespace}"
        if obj["kind"].endswith("Binding"):
            obj["roleRef"]["name"] = f"{obj['roleRef']['name']}-{lease_namespace}"
        cp.apply(obj)
        meta = obj["metadata"]
        where = f"namespaces/{meta['namespace']}/" if "namespace" in meta else ""
        paths.append(
            f"/apis/rbac.authorization.k8s.io/v1/{where}{obj['kind'].lower()}s/{meta['name']}"
        )
    return paths


class Replica:
    """One operator pod: a supervised process, restarted when it exits."""

    def __init__(
        self, cp: ControlPlane, name: str, lease_namespace: str, timing: LeaseTiming
    ) -> None:
        self.cp, self.name = cp, name
        self.user = f"{USER_PREFIX}{name}"
        self.dir = cp.dir / f"replica-{lease_namespace}-{name}"
        self.dir.mkdir()
        self.kubeconfig = cp.user_kubeconfig(self.user, groups=(GROUP,))
        self.health_port = free_port()
        self.config = self.dir / "config.yaml"
        self.config.write_text(yaml.safe_dump(_config(lease_namespace, timing, self.health_port)))
        self.starts = 0
        self.exits: list[int] = []
        self.popen: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._supervise, daemon=True)

    @property
    def restarts(self) -> int:
        return max(0, self.starts - 1)

    @property
    def log(self) -> Path:
        return self.dir / f"run-{self.starts}.log"

    def start(self) -> None:
        self._thread.start()

    def _spawn(self) -> None:
        with self._lock:
            self.starts += 1
            with self.log.open("ab") as out:
                self.popen = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "dynamo_pool_operator.cli",
                        "run",
                        "--config",
                        str(self.config),
                        "--kubeconfig",
                        str(self.kubeconfig),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )

    def _supervise(self) -> None:
        while not self._stopping.is_set():
            self._spawn()
            assert self.popen is not None
            code = self.popen.wait()
            if self._stopping.is_set():
                return
            self.exits.append(code)
            time.sleep(0.5)  # the kubelet's first restart delay is longer; keep tests quick

    # ------------------------------------------------------------ faults
    def kill(self) -> None:
        """SIGKILL this replica for good (a node lost): no restart, no lease release."""
        self._stopping.set()
        with self._lock:
            p = self.popen
        if p is not None and p.poll() is None:
            p.kill()
            p.wait(10)

    def freeze(self) -> None:
        """SIGSTOP: the process is alive but sees nothing (a long GC pause, a stuck node)."""
        assert self.popen is not None
        os.kill(self.popen.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.popen is not None
        os.kill(self.popen.pid, signal.SIGCONT)

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            p = self.popen
        if p is not None and p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGCONT)
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self._thread.join(5)

    # ------------------------------------------------------------ observing
    def identity(self) -> str | None:
        """The lease identity this replica's current process acquired with, if it did."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return None
        found = _ACQUIRED.findall(text)
        return found[-1] if found else None

    def log_text(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.dir.glob("run-*.log")))


class Replicas:
    """Two operator replicas in `namespace`'s Lease, started by `start(timing)`."""

    def __init__(self, cp: ControlPlane, namespace: str) -> None:
        self.cp, self.namespace = cp, namespace
        self.all: list[Replica] = []
        self.rbac_paths: list[str] = []

    def start(self, timing: LeaseTiming | None = None) -> list[Replica]:
        self.rbac_paths = grant_shipped_rbac(self.cp, self.namespace)
        self.all = [Replica(self.cp, n, self.namespace, timing or LeaseTiming()) for n in "ab"]
        for r in self.all:
            r.start()
        return self.all

    def stop(self) -> None:
        for r in self.all:
            r.stop()
        for path in reversed(self.rbac_paths):
            self.cp.request("DELETE", path)

    def report(self) -> str:
        return "\n".join(
            f"--- replica {r.name}: starts {r.starts}, exits {r.exits}\n{r.log_text()[-6000:]}"
            for r in self.all
        )


def _config(lease_namespace: str, timing: LeaseTiming, health_port: int) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "multiCluster": {"mcsImplementation": "mcs"},
        "leaderElection": {
            "enabled": True,
            "namespace": lease_namespace,
            "name": LEASE_NAME,
            "leaseDuration": f"{timing.duration}s",
            "renewDeadline": f"{timing.renew}s",
            "retryPeriod": f"{timing.retry}s",
        },
        "server": {"metricsAddress": "0", "healthProbeAddress": f"127.0.0.1:{health_port}"},
        "logging": {"level": "info", "format": "json"},
    }
