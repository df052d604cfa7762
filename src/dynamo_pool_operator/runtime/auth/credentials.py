"""The credential holders the client asks for TLS and headers on every request.

The client never caches what these return (`invalidate()` after a 401), so material
that rotates (a projected token, a sidecar's token file, exec-plugin output) is picked
up without rebuilding the client. `ConfigError` is about our own configuration, never
an answer from the API server, hence here and not in `errors`.
"""

from __future__ import annotations

import base64
import logging
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from dynamo_pool_operator.runtime.clock import Clock, SystemClock

log = logging.getLogger(__name__)

#: How often a token file is re-read; client-go's cached file token source uses a minute.
TOKEN_FILE_REFRESH_SECONDS = 60.0


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
    """A server to talk to and the credentials to use there. `server_hostname` and
    `proxy` are per-request aiohttp options, which TLS contexts cannot carry."""

    server: str
    credentials: Credentials
    #: Name of the kubeconfig context (or "in-cluster"), for logs.
    source: str = ""
    #: kubeconfig `tls-server-name`: the name for SNI and verification, when it differs
    #: from the host in `server`.
    server_hostname: str | None = None
    #: kubeconfig `proxy-url` (http or https), or None for a direct connection.
    proxy: str | None = None
    #: The context's (or the pod's) namespace, when one is set.
    namespace: str | None = None


def build_ssl_context(
    ca_pem: bytes | None,
    cert_pem: bytes | None,
    key_pem: bytes | None,
    *,
    insecure: bool = False,
    what: str = "TLS settings",
) -> ssl.SSLContext:
    """A client TLS context, or a `ConfigError` naming `what` and the bad part. With a CA
    only that CA is trusted, as client-go does. PEM data goes through a private temporary
    file (`load_cert_chain` wants files); the empty password callback keeps OpenSSL from
    prompting on the terminal for an encrypted key."""
    if insecure and ca_pem:
        raise ConfigError(
            f"{what}: insecure-skip-tls-verify is set together with a certificate authority; "
            "client-go refuses this too. Remove one of them."
        )
    if bool(cert_pem) != bool(key_pem):
        have, missing = ("certificate", "key") if cert_pem else ("key", "certificate")
        raise ConfigError(
            f"{what}: a client {have} is set but no client {missing}; "
            f"set client-{missing} (or client-{missing}-data) or remove the other half."
        )
    try:
        ctx = ssl.create_default_context(cadata=ca_pem.decode() if ca_pem else None)
    except (ssl.SSLError, ValueError, UnicodeDecodeError) as e:
        raise ConfigError(
            f"{what}: the certificate authority is not a valid PEM certificate ({e}); "
            "fix certificate-authority(-data)."
        ) from e
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_pem and key_pem:
        fd, path = tempfile.mkstemp(prefix="dpo-client-", suffix=".pem")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(cert_pem + b"\n" + key_pem)
            ctx.load_cert_chain(path, password=lambda: b"")
        except ssl.SSLError as e:
            raise ConfigError(
                f"{what}: the client certificate and key cannot be used ({e.reason or e}); "
                "check that both are PEM, that the key is unencrypted and matches the certificate."
            ) from e
        finally:
            os.unlink(path)
    return ctx


def basic_auth_header(username: str, password: str) -> str:
    """The `Authorization` value for HTTP basic auth."""
    raw = f"{username}:{password}".encode()
    return "Basic " + base64.b64encode(raw).decode()


@dataclass
class StaticCredentials:
    """Fixed CA, optional client certificate and optional bearer token or basic auth."""

    ca_pem: bytes | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    token: str | None = None
    insecure: bool = False
    _ctx: ssl.SSLContext | None = field(default=None, repr=False)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    #: Where the material came from, for error messages.
    what: str = "TLS settings"

    def tls_context(self) -> ssl.SSLContext:
        """Build (once) and return the TLS context; loaders call it to fail fast."""
        if self._ctx is None:
            self._ctx = build_ssl_context(
                self.ca_pem, self.cert_pem, self.key_pem, insecure=self.insecure, what=self.what
            )
        return self._ctx

    async def ssl_context(self) -> ssl.SSLContext:
        return self.tls_context()

    async def headers(self) -> dict[str, str]:
        if self.token:
            return {"Authorization": f"Bearer {self.token}"}
        if self.username is not None or self.password is not None:
            return {"Authorization": basic_auth_header(self.username or "", self.password or "")}
        return {}

    def invalidate(self) -> None:
        """Static material cannot be refreshed."""


class TokenFileCredentials:
    """A bearer token kept in a file that something else rotates (the in-cluster token,
    kubeconfig `tokenFile`). As client-go: re-read every `refresh_seconds` and after
    `invalidate()` (a 401); a failed re-read keeps the last good token (mid-rotation).
    `fallback_token` (kubeconfig `token`) serves until the file can be read."""

    def __init__(
        self,
        path: Path,
        *,
        ca_pem: bytes | None = None,
        cert_pem: bytes | None = None,
        key_pem: bytes | None = None,
        insecure: bool = False,
        what: str = "token file",
        refresh_seconds: float = TOKEN_FILE_REFRESH_SECONDS,
        clock: Clock | None = None,
        fallback_token: str | None = None,
    ) -> None:
        self.path = path
        self._what = what
        self._refresh = refresh_seconds
        self._clock = clock or SystemClock()
        self._ctx = build_ssl_context(ca_pem, cert_pem, key_pem, insecure=insecure, what=what)
        token = self._read()
        if isinstance(token, str):
            if not fallback_token:
                raise ConfigError(f"{what}: {token}; fix the path or the file")
            # client-go starts from `token` when `tokenFile` cannot be read yet.
            log.warning("%s: %s; using the kubeconfig token until it can be read", what, token)
            token = fallback_token.encode()
        self._token = token.decode()
        self._read_at = self._clock.monotonic()
        self._stale = False

    def _read(self) -> bytes | str:
        """The token, or a message saying why it cannot be read."""
        try:
            data = self.path.read_bytes().strip()
        except OSError as e:
            return f"cannot read token file {self.path}: {e.strerror or e}"
        if not data:
            return f"token file {self.path} is empty"
        return data

    def _refresh_now(self) -> None:
        token = self._read()
        self._read_at = self._clock.monotonic()
        self._stale = False
        if isinstance(token, str):
            log.warning("%s: %s; keeping the previous token", self._what, token)
            return
        self._token = token.decode()

    async def ssl_context(self) -> ssl.SSLContext:
        return self._ctx

    async def headers(self) -> dict[str, str]:
        if self._stale or self._clock.monotonic() - self._read_at >= self._refresh:
            self._refresh_now()
        return {"Authorization": f"Bearer {self._token}"}

    def invalidate(self) -> None:
        self._stale = True
