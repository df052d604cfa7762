"""The TLS certificate a server of ours presents: mounted and re-read, or self-signed.

Mounted: `tls.crt` and `tls.key` of a `kubernetes.io/tls` Secret, re-read when their
content changes (polled, as controller-runtime's certwatcher does); new connections get
the new pair, and a pair that cannot be loaded keeps the previous one.

A new pair is loaded into a new `SSLContext` and swapped in only once loaded whole:
`load_cert_chain` is not atomic (a mismatched key leaves the context with a certificate
and no key). The server's one context only picks the latest at each handshake, in its
SNI callback (as Go's `GetCertificate`).

Self-signed (no directory): made at start, as controller-runtime does; `/metrics` is
then kept private by the token check, not the certificate.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import ipaddress
import logging
import os
import socket
import ssl
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
#: Seconds between checks of a mounted certificate for new content.
WATCH_INTERVAL = 10.0
SELF_SIGNED_VALIDITY = dt.timedelta(days=365)


class CertificateError(Exception):
    """The certificate cannot be used; the message names the files and what to fix."""


def _server_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    # HTTP/1.1 only: kubebuilder turns HTTP/2 off on its metrics server (CVE-2023-44487).
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def self_signed(hosts: list[str] | None = None) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) of a fresh self-signed ECDSA P-256 certificate for
    `hosts` (DNS names or IP addresses; default: localhost, 127.0.0.1, the host name)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    hosts = hosts or ["localhost", "127.0.0.1", socket.gethostname()]
    sans: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dynamo-pool-operator")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + SELF_SIGNED_VALIDITY)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _load_pem(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """`load_cert_chain` wants files: a private temporary one, removed at once."""
    fd, path = tempfile.mkstemp(prefix="dpo-serving-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(cert_pem + b"\n" + key_pem)
        ctx.load_cert_chain(path, password=lambda: b"")
    finally:
        os.unlink(path)


class ServingCertificate:
    """An `ssl.SSLContext` for a server, kept current with a mounted certificate: the
    server is given `context` once, and each handshake switches to `current`."""

    def __init__(self, cert_dir: str | os.PathLike[str] | None = None) -> None:
        self.cert_dir = Path(cert_dir) if cert_dir else None
        self._fingerprint: bytes | None = None
        #: Times a changed certificate was loaded after the first (for tests and logs).
        self.reloads = 0
        if self.cert_dir is None:
            cert, key = self_signed()
            self.current = _server_context()
            _load_pem(self.current, cert, key)
            log.info("serving metrics over HTTPS with a self-signed certificate")
        else:
            self._load(initial=True)
        self.context = _server_context()
        self.context.sni_callback = self._select

    def _select(self, conn: ssl.SSLObject, _server_name: str | None, _: ssl.SSLContext) -> None:
        """Each handshake uses the context loaded last (never a half-loaded one)."""
        conn.context = self.current

    @property
    def files(self) -> tuple[Path, Path]:
        assert self.cert_dir is not None
        return self.cert_dir / CERT_FILE, self.cert_dir / KEY_FILE

    def _read(self) -> tuple[bytes, bytes]:
        cert, key = self.files
        try:
            return cert.read_bytes(), key.read_bytes()
        except OSError as e:
            raise CertificateError(
                f"cannot read the serving certificate ({e}); mount a kubernetes.io/tls "
                f"Secret at {self.cert_dir} (files {CERT_FILE} and {KEY_FILE})"
            ) from e

    def _load(self, *, initial: bool = False) -> bool:
        cert_pem, key_pem = self._read()
        fingerprint = hashlib.sha256(cert_pem + b"\0" + key_pem).digest()
        if fingerprint == self._fingerprint:
            return False
        candidate = _server_context()
        try:
            _load_pem(candidate, cert_pem, key_pem)
        except (ssl.SSLError, ValueError) as e:
            raise CertificateError(
                f"{self.files[0]} and {self.files[1]} are not a usable certificate and key "
                f"({getattr(e, 'reason', None) or e}); both must be PEM, the key unencrypted "
                "and matching the certificate"
            ) from e
        self.current = candidate  # whole, or not at all
        self._fingerprint = fingerprint
        if not initial:
            self.reloads += 1
        log.info(
            "%s the metrics serving certificate from %s",
            "loaded" if initial else "reloaded",
            self.cert_dir,
        )
        return True

    def reload_if_changed(self) -> bool:
        """Load the mounted files again if their content changed; True if it did. A
        broken or missing new file keeps the certificate in use (and logs why)."""
        if self.cert_dir is None:
            return False
        try:
            return self._load()
        except CertificateError as e:
            log.warning("keeping the current metrics certificate: %s", e)
            return False

    async def watch(self, interval: float = WATCH_INTERVAL) -> None:
        """Re-read a mounted certificate until cancelled (nothing to do when self-signed)."""
        if self.cert_dir is None:
            return
        while True:
            await asyncio.sleep(interval)
            self.reload_if_changed()
