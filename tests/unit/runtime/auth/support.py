"""Shared helpers for the runtime.auth tests: a throwaway PKI, a local TLS server that
says which client certificate it saw, and kubeconfig writers.

TLS material is checked by real handshakes, because an `SSLContext` cannot be asked
which client certificate it holds.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVER_NAME = "api.test.internal"


V1 = "client.authentication.k8s.io/v1"


V1BETA1 = "client.authentication.k8s.io/v1beta1"


@dataclass(frozen=True)
class Pki:
    ca_pem: bytes
    other_ca_pem: bytes
    server_cert_pem: bytes
    server_key_pem: bytes
    client_cert_pem: bytes
    client_key_pem: bytes


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_ca(cn: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def make_leaf(
    ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate, cn: str, *, server: bool
) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(SERVER_NAME)]), critical=False
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    else:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem(key)


@asynccontextmanager
async def tls_server(pki: Pki, tmp_path: Path) -> AsyncIterator[int]:
    """A TLS server that answers each connection with the client certificate's CN."""
    cert_file = tmp_path / "server.pem"
    cert_file.write_bytes(pki.server_cert_pem + pki.server_key_pem)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cadata=pki.ca_pem.decode())
    ctx.load_cert_chain(cert_file)
    ctx.verify_mode = ssl.CERT_OPTIONAL

    async def handle(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peercert") or {}
        cn = next((v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"), "")
        writer.write((cn or "anonymous").encode() + b"\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def whoami(ctx: ssl.SSLContext, port: int, server_hostname: str = SERVER_NAME) -> str:
    """Handshake with `ctx` and return who the server says we are."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=ctx, server_hostname=server_hostname
    )
    try:
        return (await reader.readline()).decode().strip()
    finally:
        writer.close()


def write_kubeconfig(
    path: Path,
    *,
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, dict[str, Any]] | None = None,
    current: str | None = None,
) -> Path:
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    if current is not None:
        doc["current-context"] = current
    for plural, singular, items in (
        ("clusters", "cluster", clusters),
        ("users", "user", users),
        ("contexts", "context", contexts),
    ):
        if items is not None:
            doc[plural] = [{"name": n, singular: body} for n, body in items.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def simple_kubeconfig(
    path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None
) -> Path:
    """One context `dev` joining cluster `c` and user `u`."""
    return write_kubeconfig(
        path,
        clusters={"c": cluster if cluster is not None else {"server": "https://k8s.example:6443"}},
        users={"u": user},
        contexts={"dev": {"cluster": "c", "user": "u"}},
        current="dev",
    )


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
