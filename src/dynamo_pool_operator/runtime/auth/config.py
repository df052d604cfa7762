"""Where the API server is and how to prove who we are: the auth face, and the
in-cluster loader.

`load_config` looks where client-go does for a controller: an explicit kubeconfig, else
`$KUBECONFIG` (merged), else `~/.kube/config`, else the pod's service account.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from dynamo_pool_operator.runtime.auth.credentials import (
    TOKEN_FILE_REFRESH_SECONDS,
    ClusterConfig,
    ConfigError,
    Credentials,
    StaticCredentials,
    TokenFileCredentials,
    build_ssl_context,
)
from dynamo_pool_operator.runtime.auth.exec_plugin import (
    EXEC_API_VERSIONS,
    ExecConfig,
    ExecCredentials,
)
from dynamo_pool_operator.runtime.auth.kubeconfig import (
    Kubeconfig,
    cluster_config,
    load_kubeconfig,
    read_kubeconfigs,
)
from dynamo_pool_operator.runtime.clock import Clock

__all__ = [
    "EXEC_API_VERSIONS",
    "IN_CLUSTER",
    "SERVICE_ACCOUNT_DIR",
    "TOKEN_FILE_REFRESH_SECONDS",
    "ClusterConfig",
    "ConfigError",
    "Credentials",
    "ExecConfig",
    "ExecCredentials",
    "Kubeconfig",
    "StaticCredentials",
    "TokenFileCredentials",
    "build_ssl_context",
    "in_cluster_available",
    "load_config",
    "load_incluster_config",
    "load_kubeconfig",
    "read_kubeconfigs",
]

log = logging.getLogger(__name__)

#: Where the kubelet mounts the pod's service-account token, CA and namespace.
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: `ClusterConfig.source` of an in-cluster configuration.
IN_CLUSTER = "in-cluster"


def in_cluster_available(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the service environment variables of a pod are set."""
    env = os.environ if environ is None else environ
    return bool(env.get("KUBERNETES_SERVICE_HOST") and env.get("KUBERNETES_SERVICE_PORT"))


def load_incluster_config(
    *,
    directory: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR,
    environ: Mapping[str, str] | None = None,
    clock: Clock | None = None,
) -> ClusterConfig:
    """The pod's own service account, as client-go's `InClusterConfig`: the bound token
    the kubelet rotates is re-read every minute and after a 401; a missing CA is only a
    warning (system roots)."""
    env = os.environ if environ is None else environ
    host = env.get("KUBERNETES_SERVICE_HOST", "")
    port = env.get("KUBERNETES_SERVICE_PORT", "")
    if not (host and port):
        raise ConfigError(
            "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
            "are not both set; pass a kubeconfig or set KUBECONFIG"
        )
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # IPv6 literal
    sa_dir = Path(directory)
    ca_path = sa_dir / "ca.crt"
    try:
        ca_pem: bytes | None = ca_path.read_bytes()
    except OSError as e:
        log.warning("in-cluster CA %s unreadable (%s); trusting system roots", ca_path, e)
        ca_pem = None
    token_path = sa_dir / "token"
    if not token_path.exists():
        raise ConfigError(
            f"in-cluster: no service-account token at {token_path}; mount one "
            "(automountServiceAccountToken: true) or pass a kubeconfig"
        )
    creds = TokenFileCredentials(
        token_path,
        ca_pem=ca_pem,
        what=f"in-cluster service account ({sa_dir})",
        clock=clock,
    )
    try:
        namespace: str | None = (sa_dir / "namespace").read_text().strip() or None
    except OSError:
        namespace = None
    return ClusterConfig(
        server=f"https://{host}:{port}",
        credentials=creds,
        source=IN_CLUSTER,
        namespace=namespace,
    )


def _home_kubeconfig() -> Path | None:
    try:
        return Path.home() / ".kube" / "config"
    except (RuntimeError, KeyError):  # no HOME and no passwd entry
        return None


def load_config(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    service_account_dir: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR,
    clock: Clock | None = None,
) -> ClusterConfig:
    """Find and load the cluster configuration in client-go's order: `kubeconfig` (must
    exist), `$KUBECONFIG`'s files merged (missing ones skipped), `~/.kube/config`, then
    the pod's service account (not with a `context`). A kubeconfig defining nothing
    counts as absent."""
    if kubeconfig:
        return load_kubeconfig(kubeconfig, context, clock=clock)
    env_value = os.environ.get("KUBECONFIG", "")
    paths: list[str | os.PathLike[str]]
    if env_value.strip():
        paths = [p for p in env_value.split(os.pathsep) if p.strip()]
        tried = f"KUBECONFIG={env_value}"
        merged = read_kubeconfigs(paths, skip_missing=True)
    else:
        home = _home_kubeconfig()
        tried = str(home) if home else "~/.kube/config (no home directory)"
        paths = [home] if home is not None else []
        merged = read_kubeconfigs(paths, skip_missing=True)
    if not merged.is_empty():
        return cluster_config(merged, context, clock=clock)
    if in_cluster_available():
        if context:
            raise ConfigError(
                f"context {context!r} was requested but {tried} provides no kubeconfig, and "
                "the in-cluster configuration has no contexts; point KUBECONFIG at the file "
                "that defines it or drop the context"
            )
        return load_incluster_config(directory=service_account_dir, clock=clock)
    raise ConfigError(
        f"no Kubernetes configuration found: {tried} names no usable kubeconfig and "
        "KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are unset (not in a pod); "
        "pass a kubeconfig or set KUBECONFIG"
    )
