"""Exec credential plugins (`users[].user.exec`), as client-go runs them.

The plugin's `ExecCredential` is cached until shortly before it expires (or a 401);
refreshes are serialized, so a burst after expiry runs it once, and time-limited, so a
hung helper cannot stall every request. Never interactive: `interactiveMode: Always`
is refused up front rather than failing obscurely.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from dynamo_pool_operator.runtime.auth.credentials import ConfigError, build_ssl_context
from dynamo_pool_operator.runtime.clock import Clock, SystemClock

log = logging.getLogger(__name__)

EXEC_API_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
)
#: Refresh this long before `expirationTimestamp` (at most half the lifetime).
EXEC_REFRESH_SKEW = timedelta(seconds=30)
EXEC_TIMEOUT_SECONDS = 60.0
#: What a plugin's stderr contributes to an error or a log line: its last characters.
_STDERR_TAIL = 2000
#: An ExecCredential is a few kilobytes: more is not held in memory.
EXEC_STDOUT_LIMIT = 1 << 20


@dataclass(frozen=True)
class ExecConfig:
    """The `exec` stanza of one kubeconfig user, with paths already resolved."""

    command: str
    api_version: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    install_hint: str = ""
    #: `spec.cluster` to send when the user sets `provideClusterInfo: true`.
    cluster_info: Mapping[str, Any] | None = None
    #: "user 'x' in /path/config", for error messages.
    what: str = "exec plugin"

    def __post_init__(self) -> None:
        if not self.command:
            raise ConfigError(f"{self.what}: exec.command is empty; set the plugin to run.")
        if self.api_version not in EXEC_API_VERSIONS:
            raise ConfigError(
                f"{self.what}: exec.apiVersion {self.api_version!r} is not supported; "
                f"use one of {', '.join(EXEC_API_VERSIONS)}."
            )


@dataclass(frozen=True)
class ExecResult:
    """What one plugin run returned."""

    token: str | None
    cert_pem: bytes | None
    key_pem: bytes | None
    #: None means "valid until the server says otherwise (401)".
    expires: datetime | None
    refresh_at: datetime | None


class ExecCredentials:
    """Credentials from an exec plugin: a bearer token, a client certificate, or both."""

    def __init__(
        self,
        config: ExecConfig,
        *,
        ca_pem: bytes | None = None,
        insecure: bool = False,
        timeout: float = EXEC_TIMEOUT_SECONDS,
        clock: Clock | None = None,
        tls_what: str = "TLS settings",
    ) -> None:
        self.config = config
        self._ca_pem = ca_pem
        self._insecure = insecure
        self._timeout = timeout
        self._clock = clock or SystemClock()
        # Built now so a bad CA fails at load time, not on the first request.
        self._base_ctx = build_ssl_context(ca_pem, None, None, insecure=insecure, what=tls_what)
        self._cert_ctx: tuple[bytes, bytes, ssl.SSLContext] | None = None
        self._result: ExecResult | None = None
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------ Credentials
    async def headers(self) -> dict[str, str]:
        result = await self.current()
        return {"Authorization": f"Bearer {result.token}"} if result.token else {}

    async def ssl_context(self) -> ssl.SSLContext:
        result = await self.current()
        if not (result.cert_pem and result.key_pem):
            return self._base_ctx
        cached = self._cert_ctx
        if cached is None or cached[:2] != (result.cert_pem, result.key_pem):
            # A new context also means new connections: aiohttp keys its pool by it.
            ctx = build_ssl_context(
                self._ca_pem,
                result.cert_pem,
                result.key_pem,
                insecure=self._insecure,
                what=f"{self.config.what}: client certificate returned by the exec plugin",
            )
            cached = self._cert_ctx = (result.cert_pem, result.key_pem, ctx)
        return cached[2]

    def invalidate(self) -> None:
        """Forget the cached credential so the next request runs the plugin again."""
        self._result = None

    # ------------------------------------------------------------ plugin runs
    def _fresh(self) -> ExecResult | None:
        result = self._result
        if result is None:
            return None
        if result.refresh_at is not None and self._clock.now() >= result.refresh_at:
            return None
        return result

    async def current(self) -> ExecResult:
        """The cached credential, or a new one if it is missing, expiring or invalidated."""
        result = self._fresh()
        if result is not None:
            return result
        async with self._lock:
            # Another caller may have refreshed while we waited for the lock.
            result = self._fresh()
            if result is None:
                result = await self._run()
                self._result = result
            return result

    def _exec_info(self) -> str:
        spec: dict[str, Any] = {"interactive": False}
        if self.config.cluster_info is not None:
            spec["cluster"] = dict(self.config.cluster_info)
        return json.dumps(
            {"apiVersion": self.config.api_version, "kind": "ExecCredential", "spec": spec}
        )

    async def _run(self) -> ExecResult:
        cfg = self.config
        env = {**os.environ, **cfg.env, "KUBERNETES_EXEC_INFO": self._exec_info()}
        name = f"exec plugin {cfg.command!r} ({cfg.what})"
        try:
            proc = await asyncio.create_subprocess_exec(
                cfg.command,
                *cfg.args,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except FileNotFoundError as e:
            hint = f"\n\n{cfg.install_hint.strip()}" if cfg.install_hint.strip() else ""
            raise ConfigError(
                f"{name}: executable not found; install it or fix exec.command "
                f"(looked on PATH unless the command is a path){hint}"
            ) from e
        except PermissionError as e:
            raise ConfigError(f"{name}: not executable ({e.strerror}); fix its permissions") from e
        assert proc.stdout is not None
        assert proc.stderr is not None
        try:
            (stdout, printed), stderr, _ = await asyncio.wait_for(
                asyncio.gather(
                    _head(proc.stdout, EXEC_STDOUT_LIMIT),
                    _tail(proc.stderr, _STDERR_TAIL * 4),
                    proc.wait(),
                ),
                self._timeout,
            )
        except TimeoutError:
            await _kill(proc)
            raise ConfigError(
                f"{name}: did not finish within {self._timeout:g}s; check that it can run "
                "without a terminal (we are not interactive) and can reach its identity provider"
            ) from None
        except asyncio.CancelledError:
            await asyncio.shield(_kill(proc))
            raise
        err_text = stderr.decode(errors="replace").strip()
        if proc.returncode != 0:
            tail = err_text[-_STDERR_TAIL:] or "(no output on stderr)"
            raise ConfigError(f"{name}: exited with code {proc.returncode}: {tail}")
        if err_text:
            log.debug("%s wrote to stderr: %s", name, err_text[-_STDERR_TAIL:])
        if printed > EXEC_STDOUT_LIMIT:
            raise ConfigError(
                f"{name}: printed more than {EXEC_STDOUT_LIMIT} bytes; an ExecCredential is "
                "a few kilobytes: check what the plugin writes to stdout"
            )
        return self._parse(stdout, name)

    def _parse(self, stdout: bytes, name: str) -> ExecResult:
        # Never quote stdout: what a plugin prints may be a credential in the wrong shape.
        try:
            doc = json.loads(stdout)
        except ValueError as e:
            raise ConfigError(
                f"{name}: printed {len(stdout)} bytes that are not an ExecCredential JSON "
                f"document ({e}); run it by hand to see what it prints"
            ) from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{name}: printed JSON that is not an object")
        if doc.get("kind") != "ExecCredential":
            raise ConfigError(f"{name}: returned kind {doc.get('kind')!r}, want ExecCredential")
        if doc.get("apiVersion") != self.config.api_version:
            raise ConfigError(
                f"{name}: is configured for apiVersion {self.config.api_version} but returned "
                f"{doc.get('apiVersion')!r}; set exec.apiVersion to what the plugin speaks"
            )
        status = doc.get("status")
        if not isinstance(status, dict):
            raise ConfigError(f"{name}: returned no status")
        token = status.get("token") or None
        cert = status.get("clientCertificateData") or None
        key = status.get("clientKeyData") or None
        for field_name, value in (
            ("token", token),
            ("clientCertificateData", cert),
            ("clientKeyData", key),
        ):
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{name}: status.{field_name} is not a string")
        if bool(cert) != bool(key):
            raise ConfigError(f"{name}: returned only one of clientCertificateData/clientKeyData")
        if not token and not cert:
            raise ConfigError(f"{name}: returned neither a token nor a client certificate")
        expires = self._expiry(status.get("expirationTimestamp"), name)
        refresh_at = None
        if expires is not None:
            lifetime = expires - self._clock.now()
            refresh_at = expires - max(min(EXEC_REFRESH_SKEW, lifetime / 2), timedelta(0))
        return ExecResult(
            token=token,
            cert_pem=cert.encode() if cert else None,
            key_pem=key.encode() if key else None,
            expires=expires,
            refresh_at=refresh_at,
        )

    def _expiry(self, raw: object, name: str) -> datetime | None:
        if raw is None or raw == "":
            return None
        if not isinstance(raw, str):
            raise ConfigError(f"{name}: status.expirationTimestamp is not a string")
        try:
            when = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError as e:
            raise ConfigError(
                f"{name}: status.expirationTimestamp {raw!r} is not an RFC 3339 time"
            ) from e
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when


async def _head(stream: asyncio.StreamReader, limit: int) -> tuple[bytes, int]:
    """The first `limit` bytes of `stream`, and how many it held (read to its end, so a
    plugin is never blocked writing)."""
    kept = bytearray()
    total = 0
    while chunk := await stream.read(1 << 16):
        total += len(chunk)
        if len(kept) < limit:
            kept += chunk[: limit - len(kept)]
    return bytes(kept), total


async def _tail(stream: asyncio.StreamReader, limit: int) -> bytes:
    """The last `limit` bytes of `stream` (read to its end)."""
    kept = b""
    while chunk := await stream.read(1 << 16):
        kept = (kept + chunk)[-limit:]
    return kept


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """Stop a plugin we gave up on and reap it, so no zombie or orphan is left."""
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    await proc.wait()
