"""The operator as a separate process (so its RSS is its own), the API server's
request counters, and an optional py-spy profile of the cold start."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from dynamo_pool_operator.config import API_VERSION, KIND
from dynamo_pool_operator.localcluster.controlplane import ControlPlane, free_port

#: More `controller` settings for this checkout's operator (`--background-writes`); an
#: operator run with `--compare-python` (another checkout) gets none of them: it may
#: not know them.
THIS_CHECKOUT_CONTROLLER: dict[str, object] = {}


def operator_config(
    workers: int,
    metrics_port: int | None = None,
    *,
    this_checkout: bool = True,
    controller: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """mcsImplementation mcs, one replica (no leader election), no probe listener;
    /metrics on loopback when `metrics_port` is given (the queue and client metrics).

    No MCS implementation runs on the bench's control plane, so none ever writes an
    export's conditions: `confirmation: none` says so (as an AWS Cloud Map user
    would), and `Exported` is decided on the first pass. `controller`: more
    `controller` settings of this operator (`fairQueuing`, say)."""
    metrics = f"127.0.0.1:{metrics_port}" if metrics_port else "0"
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "multiCluster": {"mcsImplementation": "mcs", "confirmation": "none"},
        "leaderElection": {"enabled": False},
        "server": {"metricsAddress": metrics, "healthProbeAddress": "0"},
        "controller": {
            "workers": workers,
            **(THIS_CHECKOUT_CONTROLLER if this_checkout else {}),
            **(controller or {}),
        },
        "logging": {"level": "warning"},
    }


class OperatorProcess:
    """`python -m dynamo_pool_operator.cli run` against the control plane."""

    def __init__(
        self,
        cp: ControlPlane,
        workers: int,
        log: Path,
        python: str | None = None,
        *,
        controller: Mapping[str, object] | None = None,
    ) -> None:
        self.metrics_port = free_port()
        self.config_path = cp.dir / "bench-operator.yaml"
        config = operator_config(
            workers, self.metrics_port, this_checkout=python is None, controller=controller
        )
        self.config_path.write_text(yaml.safe_dump(config))
        self.args = [
            python or sys.executable,
            "-m",
            "dynamo_pool_operator.cli",
            "run",
            "--config",
            str(self.config_path),
            "--kubeconfig",
            str(cp.kubeconfig),
        ]
        self.log = log
        self.popen: subprocess.Popen[bytes] | None = None
        self.profiler: subprocess.Popen[bytes] | None = None

    def start(self) -> int:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.args,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def status(self) -> dict[str, int]:
        """VmRSS / VmHWM in bytes and CPU seconds (utime+stime) x 100 of the process."""
        assert self.popen is not None
        out: dict[str, int] = {}
        for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
        fields = Path(f"/proc/{self.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        out["cpu_ticks"] = int(fields[11]) + int(fields[12])
        return out

    def metrics(self, names: tuple[str, ...] = ()) -> dict[str, float]:
        """The operator's own /metrics, summed by family sample name and labels
        (`name{k="v",...}` keys); {} while it does not answer yet. `names`: only those
        series (`?name[]=`; an operator that does not know the parameter sends all)."""
        query = "&".join(f"name[]={n}" for n in names)
        url = f"http://127.0.0.1:{self.metrics_port}/metrics" + (f"?{query}" if query else "")
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                body = resp.read().decode()
        except OSError:
            return {}
        out: dict[str, float] = {}
        for fam in text_string_to_metric_families(body):
            for s in fam.samples:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{labels}}}" if labels else s.name] = float(s.value)
        return out

    def start_profile(self, path: Path) -> bool:
        """Attach py-spy (if on PATH, e.g. `uv run --with py-spy`) and record raw stacks."""
        exe = shutil.which("py-spy")
        if exe is None or self.popen is None:
            return False
        self.profiler = subprocess.Popen(
            [
                exe,
                "record",
                "--pid",
                str(self.popen.pid),
                "-r",
                "100",
                "-f",
                "raw",
                "-o",
                str(path),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return True

    def stop_profile(self) -> None:
        if self.profiler is not None and self.profiler.poll() is None:
            self.profiler.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.profiler.wait(30)
        self.profiler = None

    def stop(self) -> None:
        self.stop_profile()
        p = self.popen
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
            p.wait(5)


def request_counts(cp: ControlPlane) -> Counter[tuple[str, str]]:
    """apiserver_request_total summed by (verb, resource), plus open long-running
    requests (watches) as ("WATCH-open", resource): the server's view of every
    request, reads included (the audit policy records writes only)."""
    status, body = cp.request("GET", "/metrics")
    if status != 200 or not isinstance(body, str):
        return Counter()
    out: Counter[tuple[str, str]] = Counter()
    for fam in text_string_to_metric_families(body):
        if fam.name == "apiserver_request":
            for s in fam.samples:
                if s.name == "apiserver_request_total":
                    out[(s.labels.get("verb", ""), s.labels.get("resource", ""))] += int(s.value)
        elif fam.name == "apiserver_longrunning_requests":
            for s in fam.samples:
                if s.labels.get("verb") == "WATCH":
                    out[("WATCH-open", s.labels.get("resource", ""))] += int(s.value)
    return out


#: Our kinds in the API server's storage metrics (group, resource).
OUR_KINDS = {
    ("nvidia.com", "dynamopoolrelays"),
    ("nvidia.com", "dynamographdeployments"),
    ("apps", "deployments"),
    ("", "services"),
    ("multicluster.x-k8s.io", "serviceexports"),
    ("about.k8s.io", "clusterproperties"),
}


def storage_reads(cp: ControlPlane) -> Counter[tuple[str, str]]:
    """What the API server read, from its own metrics, for our kinds: etcd requests by
    operation (`etcd_requests_total`: "list"/"listWithCount" are range reads of the
    objects, "getCurrentResourceVersion" the revision check of a consistent read from
    the watch cache), lists by where they were served (`apiserver_storage_list_total`
    by `storage`), and watch-lists (`apiserver_watch_list_duration_seconds_count`).
    Keys: (what, resource)."""
    status, body = cp.request("GET", "/metrics")
    if status != 200 or not isinstance(body, str):
        return Counter()
    out: Counter[tuple[str, str]] = Counter()
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            kind = (s.labels.get("group", ""), s.labels.get("resource", ""))
            if kind not in OUR_KINDS:
                continue
            if s.name == "etcd_requests_total":
                out[(f"etcd {s.labels.get('operation', '')}", kind[1])] += int(s.value)
            elif s.name == "apiserver_storage_list_total":
                out[(f"list from {s.labels.get('storage', '')}", kind[1])] += int(s.value)
            elif s.name == "apiserver_storage_list_fetched_objects_total":
                out[(f"objects fetched from {s.labels.get('storage', '')}", kind[1])] += int(
                    s.value
                )
            elif s.name == "apiserver_watch_list_duration_seconds_count":
                out[("watch-list", kind[1])] += int(s.value)
    return out


def diff(after: Counter[tuple[str, str]], before: Counter[tuple[str, str]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for key in after.keys() | before.keys():
        d = after[key] - before[key]
        if d:
            out[f"{key[0]} {key[1]}"] = d
    return dict(sorted(out.items()))
