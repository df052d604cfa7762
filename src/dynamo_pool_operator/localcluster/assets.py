"""Where the control-plane binaries come from, per binary: `TEST_ASSET_<NAME>`, then
`$KUBEBUILDER_ASSETS/<name>` (envtest's conventions, so envtest users skip our build),
then our cache, built by `tools/controlplane/build.sh`. kwok, the Lighthouse agent and
cilium-operator may be absent with envtest binaries: the tests that need them skip
(`Assets.missing_peers`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kubectl",
    "helm",
    "kwok",
    "lighthouse-agent",
    "cilium-operator-generic",
)
#: kwok, the Lighthouse agent and cilium-operator are optional: a test that needs one
#: skips with the reason when it is absent (envtest brings none); `make test` builds
#: them, so CI has them. `Assets.missing_peers()` with no names checks these two, what
#: the Lighthouse world needs.
PEERS = ("kwok", "lighthouse-agent")


class AssetsError(RuntimeError):
    """A binary cannot be found or built; the message says which and how to fix it."""


def repo_root() -> Path:
    """The source tree holding tools/controlplane (dev and test tooling lives there)."""
    for parent in Path(__file__).resolve().parents:
        if (parent / "tools" / "controlplane" / "versions.env").is_file():
            return parent
    raise AssetsError(
        "tools/controlplane/versions.env not found above "
        f"{Path(__file__).resolve()}: run from a source checkout of dynamo-pool-operator"
    )


def pinned_versions() -> dict[str, str]:
    """The versions pinned in tools/controlplane/versions.env."""
    out: dict[str, str] = {}
    text = (repo_root() / "tools" / "controlplane" / "versions.env").read_text()
    for line in text.splitlines():
        m = re.match(r"^([A-Z_]+)=(\S+)", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def cache_dir() -> Path:
    """The cache directory for the pinned versions (mirrors build.sh)."""
    v = pinned_versions()
    root = Path(os.environ.get("DPO_CACHE_DIR") or Path.home() / ".cache" / "dynamo-pool-operator")
    return root / (
        f"k8s-{v['KUBERNETES_VERSION']}_etcd-{v['ETCD_VERSION']}_helm-{v['HELM_VERSION']}"
    )


@dataclass(frozen=True)
class Assets:
    """Resolved paths of the binaries and of the upstream MCS CRDs."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path | None
    kubectl: Path | None
    helm: Path | None
    mcs_crd_dir: Path
    #: Fake nodes and pods (sigs.k8s.io/kwok).
    kwok: Path | None = None
    #: The Submariner Lighthouse agent, a real MCS implementation.
    lighthouse_agent: Path | None = None
    #: The mcs-api CRDs Lighthouse targets (older than `mcs_crd_dir`'s).
    lighthouse_mcs_crd_dir: Path | None = None
    #: cilium-operator (the build upstream names cilium-operator-generic): Cilium's
    #: MCS-API implementation, a second real one.
    cilium_operator_generic: Path | None = None

    def missing_peers(self, *names: str) -> str | None:
        """Why a test needing `names` (default: kwok and the Lighthouse agent) cannot
        run, or None."""
        wanted = names or PEERS
        absent = [n for n in wanted if getattr(self, n.replace("-", "_")) is None]
        if not absent:
            return None
        overrides = " / ".join("TEST_ASSET_" + n.upper().replace("-", "_") for n in absent)
        return (
            f"{', '.join(absent)} not built: run `bash tools/controlplane/build.sh` "
            f"(`make test` does) or set {overrides}"
        )


def _override(name: str) -> Path | None:
    env = "TEST_ASSET_" + re.sub(r"[^A-Z0-9]", "_", name.upper())
    if os.environ.get(env):
        return Path(os.environ[env])
    if os.environ.get("KUBEBUILDER_ASSETS"):
        p = Path(os.environ["KUBEBUILDER_ASSETS"]) / name
        if p.exists():
            return p
    return None


def build(what: str = "all", quiet: bool = False) -> Path:
    """Run build.sh (a no-op when the cache is complete); return the asset directory."""
    script = repo_root() / "tools" / "controlplane" / "build.sh"
    proc = subprocess.run(
        ["bash", str(script), what],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else None,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise AssetsError(
            f"building the control plane failed (exit {proc.returncode}); "
            f"re-run `bash {script}` to see why, or point TEST_ASSET_KUBE_APISERVER / "
            "TEST_ASSET_ETCD / KUBEBUILDER_ASSETS at existing binaries"
        )
    return Path(proc.stdout.strip().splitlines()[-1])


def resolve(build_missing: bool = True) -> Assets:
    """Find every binary, building the missing ones from Go modules when allowed."""
    found = {name: _override(name) for name in BINARIES}
    cached = cache_dir()
    versions = pinned_versions()
    mcs = cached / "crds" / f"mcs-api-{versions['MCS_API_VERSION']}"
    lighthouse_mcs = cached / "crds" / f"mcs-api-{versions['LIGHTHOUSE_MCS_API_VERSION']}"
    # With envtest binaries (etcd + kube-apiserver given) nothing is built; the
    # binaries envtest lacks (kube-controller-manager, helm, the peers) are then optional.
    brought = found["etcd"] is not None and found["kube-apiserver"] is not None
    missing = [n for n in BINARIES if found[n] is None and not (cached / "bin" / n).is_file()]
    if missing and not brought:
        if not build_missing:
            raise AssetsError(f"control-plane binaries missing in {cached}/bin: {missing}")
        print(
            "[controlplane] building binaries from Go modules (first run: 25-55 min)",
            file=sys.stderr,
            flush=True,
        )
        cached = build("all")
    crd_file = "multicluster.x-k8s.io_serviceexports.yaml"
    if not (mcs / crd_file).is_file() or not (lighthouse_mcs / crd_file).is_file():
        cached = build("crds")
    paths = {n: found[n] or cached / "bin" / n for n in BINARIES}
    for n in ("etcd", "kube-apiserver"):
        if not paths[n].is_file():
            raise AssetsError(f"{n} not found at {paths[n]}")

    def optional(name: str) -> Path | None:
        return paths[name] if paths[name].is_file() else None

    return Assets(
        etcd=paths["etcd"],
        kube_apiserver=paths["kube-apiserver"],
        kube_controller_manager=optional("kube-controller-manager"),
        kubectl=optional("kubectl"),
        helm=optional("helm"),
        mcs_crd_dir=mcs,
        kwok=optional("kwok"),
        lighthouse_agent=optional("lighthouse-agent"),
        lighthouse_mcs_crd_dir=lighthouse_mcs if (lighthouse_mcs / crd_file).is_file() else None,
        cilium_operator_generic=optional("cilium-operator-generic"),
    )
