"""Where the API server is and how to prove who we are.

`ClusterConfig` is what the client needs: a server URL and `Credentials`, which
hand out the TLS context and the request headers *at request time*, so rotating
material (exec plugin tokens and certificates, projected service-account
tokens) is picked up without rebuilding the client.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml


class ConfigError(Exception):
    """The kubeconfig (or in-cluster environment) cannot be used; says what to change."""


class Credentials(Protocol):
    """Supplies TLS and auth headers per request; may refresh on expiry or after a 401."""

    async def ssl_context(self) -> ssl.SSLContext: ...

    async def headers(self) -> dict[str, str]: ...

    def invalidate(self) -> None:
        """Called after a 401: the next request must re-read or re-exec its credentials."""


@dataclass
class ClusterConfig:
    """A server to talk to and the credentials to use there."""

    server: str
    credentials: Credentials
    #: Name of the kubeconfig context (or "in-cluster"), for logs.
    source: str = ""


@dataclass
class StaticCredentials:
    """Fixed CA, optional client certificate and optional bearer token."""

    ca_pem: bytes | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    token: str | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    _ctx: ssl.SSLContext | None = field(default=None, repr=False)

    async def ssl_context(self) -> ssl.SSLContext:
        if self._ctx is None:
            self._ctx = build_ssl_context(
                self.ca_pem, self.cert_pem, self.key_pem, insecure=self.insecure
            )
        return self._ctx

    async def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def invalidate(self) -> None:
        """Static material cannot be refreshed."""


def build_ssl_context(
    ca_pem: bytes | None,
    cert_pem: bytes | None,
    key_pem: bytes | None,
    *,
    insecure: bool = False,
) -> ssl.SSLContext:
    """A client TLS context; `load_cert_chain` needs files, so PEM data goes through a
    private temporary file that is removed at once."""
    ctx = ssl.create_default_context(cadata=ca_pem.decode() if ca_pem else None)
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_pem and key_pem:
        fd, path = tempfile.mkstemp(prefix="dpo-client-", suffix=".pem")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(cert_pem + b"\n" + key_pem)
            ctx.load_cert_chain(path)
        finally:
            os.unlink(path)
    return ctx


def _data_or_file(entry: dict[str, Any], key: str, base: Path) -> bytes | None:
    """Read `<key>-data` (base64) or `<key>` (a path relative to the kubeconfig)."""
    data = entry.get(f"{key}-data")
    if data:
        return base64.b64decode(data)
    path = entry.get(key)
    if path:
        p = Path(path)
        return (p if p.is_absolute() else base / p).read_bytes()
    return None


def load_kubeconfig(path: str | os.PathLike[str], context: str | None = None) -> ClusterConfig:
    """Load one kubeconfig file (client certificate, token or CA) for `context`."""
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text()) or {}
    except OSError as e:
        raise ConfigError(f"kubeconfig {p}: {e.strerror}") from e
    ctx_name = context or doc.get("current-context")
    if not ctx_name:
        raise ConfigError(f"kubeconfig {p}: no current-context set and no --context given")
    by_name = {
        kind: {e["name"]: e.get(kind[:-1], {}) for e in doc.get(kind) or []}
        for kind in ("contexts", "clusters", "users")
    }
    ctx = by_name["contexts"].get(ctx_name)
    if ctx is None:
        raise ConfigError(f"kubeconfig {p}: context {ctx_name!r} not found")
    cluster = by_name["clusters"].get(ctx.get("cluster", ""))
    if cluster is None:
        raise ConfigError(f"kubeconfig {p}: cluster {ctx.get('cluster')!r} not found")
    user = by_name["users"].get(ctx.get("user", ""), {})
    base = p.parent
    creds = StaticCredentials(
        ca_pem=_data_or_file(cluster, "certificate-authority", base),
        cert_pem=_data_or_file(user, "client-certificate", base),
        key_pem=_data_or_file(user, "client-key", base),
        token=user.get("token"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
    )
    return ClusterConfig(server=cluster["server"].rstrip("/"), credentials=creds, source=ctx_name)
