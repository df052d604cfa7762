"""Unit tests for runtime.auth: kubeconfig loading and merging, every credential
method, exec plugins (run for real as tiny Python scripts) and in-cluster config.

TLS material is checked by real handshakes against a local asyncio TLS server,
because an `SSLContext` cannot be asked which client certificate it holds.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import os
import ssl
import stat
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from dynamo_pool_operator.runtime.auth.cluster import (
    ClusterConfig,
    ConfigError,
    ExecConfig,
    ExecCredentials,
    StaticCredentials,
    TokenFileCredentials,
    build_ssl_context,
    load_config,
    load_incluster_config,
    load_kubeconfig,
)
from dynamo_pool_operator.runtime.auth.exec_plugin import EXEC_STDOUT_LIMIT
from dynamo_pool_operator.runtime.clock import FakeClock

SERVER_NAME = "api.test.internal"
V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"


# ---------------------------------------------------------------- throwaway PKI
@dataclass(frozen=True)
class Pki:
    ca_pem: bytes
    other_ca_pem: bytes
    server_cert_pem: bytes
    server_key_pem: bytes
    client_cert_pem: bytes
    client_key_pem: bytes


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _ca(cn: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
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


def _leaf(
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
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


@pytest.fixture(scope="session")
def pki() -> Pki:
    ca_key, ca = _ca("test-ca")
    _, other = _ca("unrelated-ca")
    server_cert, server_key = _leaf(ca_key, ca, SERVER_NAME, server=True)
    client_cert, client_key = _leaf(ca_key, ca, "alice", server=False)
    return Pki(
        ca_pem=ca.public_bytes(serialization.Encoding.PEM),
        other_ca_pem=other.public_bytes(serialization.Encoding.PEM),
        server_cert_pem=server_cert,
        server_key_pem=server_key,
        client_cert_pem=client_cert,
        client_key_pem=client_key,
    )


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


# ---------------------------------------------------------------- kubeconfig helpers
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


# ---------------------------------------------------------------- static methods
async def test_token(tmp_path: Path) -> None:
    cfg = load_kubeconfig(simple_kubeconfig(tmp_path / "config", {"token": "abc"}))
    assert cfg.server == "https://k8s.example:6443"
    assert cfg.source == "dev"
    assert await cfg.credentials.headers() == {"Authorization": "Bearer abc"}
    cfg.credentials.invalidate()  # nothing to refresh, still works
    assert await cfg.credentials.headers() == {"Authorization": "Bearer abc"}


async def test_basic_auth(tmp_path: Path) -> None:
    path = simple_kubeconfig(tmp_path / "config", {"username": "admin", "password": "s3cret"})
    headers = await load_kubeconfig(path).credentials.headers()
    assert headers == {"Authorization": "Basic " + b64(b"admin:s3cret")}


async def test_static_credentials_keep_working_without_loader() -> None:
    creds = StaticCredentials(token="t")
    assert await creds.headers() == {"Authorization": "Bearer t"}
    assert isinstance(await creds.ssl_context(), ssl.SSLContext)


async def test_token_file_rotates_after_interval_and_on_invalidate(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "token").write_text("first\n")
    clock = FakeClock()
    # A relative tokenFile resolves against the kubeconfig's directory, not the cwd.
    path = simple_kubeconfig(tmp_path / "config", {"tokenFile": "secrets/token"})
    creds = load_kubeconfig(path, clock=clock).credentials
    assert await creds.headers() == {"Authorization": "Bearer first"}

    (tmp_path / "secrets" / "token").write_text("second")
    await clock.advance(30)
    assert await creds.headers() == {"Authorization": "Bearer first"}, "re-read too early"
    await clock.advance(31)
    assert await creds.headers() == {"Authorization": "Bearer second"}

    (tmp_path / "secrets" / "token").write_text("third")
    creds.invalidate()
    assert await creds.headers() == {"Authorization": "Bearer third"}


async def test_token_file_keeps_last_token_when_file_disappears(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("good")
    clock = FakeClock()
    creds = TokenFileCredentials(token, clock=clock)
    token.unlink()
    creds.invalidate()
    assert await creds.headers() == {"Authorization": "Bearer good"}


def test_token_file_missing_at_load_names_the_field(tmp_path: Path) -> None:
    path = simple_kubeconfig(tmp_path / "config", {"tokenFile": "nope"})
    with pytest.raises(ConfigError, match=r"user 'u' in .*config tokenFile.*nope"):
        load_kubeconfig(path)


@pytest.mark.parametrize("form", ["data", "file"])
async def test_client_certificate_and_ca(pki: Pki, tmp_path: Path, form: str) -> None:
    if form == "data":
        cluster = {"server": "https://x", "certificate-authority-data": b64(pki.ca_pem)}
        user = {
            "client-certificate-data": b64(pki.client_cert_pem),
            "client-key-data": b64(pki.client_key_pem),
        }
    else:
        (tmp_path / "pki").mkdir()
        (tmp_path / "pki" / "ca.crt").write_bytes(pki.ca_pem)
        (tmp_path / "pki" / "alice.crt").write_bytes(pki.client_cert_pem)
        (tmp_path / "pki" / "alice.key").write_bytes(pki.client_key_pem)
        cluster = {"server": "https://x", "certificate-authority": "pki/ca.crt"}
        user = {"client-certificate": "pki/alice.crt", "client-key": "pki/alice.key"}
    cfg = load_kubeconfig(simple_kubeconfig(tmp_path / "config", user, cluster))
    assert await cfg.credentials.headers() == {}
    async with tls_server(pki, tmp_path) as port:
        assert await whoami(await cfg.credentials.ssl_context(), port) == "alice"


async def test_ca_only_trusts_that_ca(pki: Pki, tmp_path: Path) -> None:
    good = simple_kubeconfig(
        tmp_path / "good",
        {"token": "t"},
        {"server": "https://x", "certificate-authority-data": b64(pki.ca_pem)},
    )
    wrong = simple_kubeconfig(
        tmp_path / "wrong",
        {"token": "t"},
        {"server": "https://x", "certificate-authority-data": b64(pki.other_ca_pem)},
    )
    async with tls_server(pki, tmp_path) as port:
        assert await whoami(await load_kubeconfig(good).credentials.ssl_context(), port) == (
            "anonymous"
        )
        with pytest.raises(ssl.SSLCertVerificationError):
            await whoami(await load_kubeconfig(wrong).credentials.ssl_context(), port)


async def test_insecure_skips_verification(pki: Pki, tmp_path: Path) -> None:
    path = simple_kubeconfig(
        tmp_path / "config",
        {"token": "t"},
        {"server": "https://x", "insecure-skip-tls-verify": True},
    )
    ctx = await load_kubeconfig(path).credentials.ssl_context()
    async with tls_server(pki, tmp_path) as port:
        assert await whoami(ctx, port, server_hostname="whatever.example") == "anonymous"


async def test_tls_server_name_proxy_and_namespace(pki: Pki, tmp_path: Path) -> None:
    path = write_kubeconfig(
        tmp_path / "config",
        clusters={
            "c": {
                "server": "https://10.0.0.1:6443/",
                "certificate-authority-data": b64(pki.ca_pem),
                "tls-server-name": SERVER_NAME,
                "proxy-url": "http://proxy.example:3128",
            }
        },
        users={"u": {"token": "t"}},
        contexts={"dev": {"cluster": "c", "user": "u", "namespace": "team-a"}},
        current="dev",
    )
    cfg = load_kubeconfig(path)
    assert cfg.server == "https://10.0.0.1:6443"
    assert cfg.server_hostname == SERVER_NAME
    assert cfg.proxy == "http://proxy.example:3128"
    assert cfg.namespace == "team-a"
    async with tls_server(pki, tmp_path) as port:
        ctx = await cfg.credentials.ssl_context()
        assert await whoami(ctx, port, server_hostname=cfg.server_hostname) == "anonymous"


@pytest.mark.parametrize(
    ("cluster", "server"),
    [
        ({"server": "localhost:8080"}, "http://localhost:8080"),
        ({"server": "k8s:6443", "insecure-skip-tls-verify": True}, "https://k8s:6443"),
    ],
)
def test_server_without_scheme_is_defaulted_like_client_go(
    tmp_path: Path, cluster: dict[str, Any], server: str
) -> None:
    assert load_kubeconfig(simple_kubeconfig(tmp_path / "c", {}, cluster)).server == server


# ---------------------------------------------------------------- merging and selection
def test_merge_first_file_wins_and_paths_resolve_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = write_kubeconfig(
        tmp_path / "a" / "config",
        clusters={"c": {"server": "https://a.example"}},
        users={"u": {"token": "a-token"}},
        contexts={"shared": {"cluster": "c", "user": "u"}},
    )
    (tmp_path / "b" / "tok").parent.mkdir(parents=True)
    (tmp_path / "b" / "tok").write_text("b-file-token")
    b = write_kubeconfig(
        tmp_path / "b" / "config",
        clusters={"c": {"server": "https://b.example"}, "cb": {"server": "https://cb.example"}},
        users={"u": {"token": "b-token"}, "ub": {"tokenFile": "tok"}},
        contexts={"shared": {"cluster": "cb", "user": "ub"}, "only-b": {"cluster": "cb"}},
        current="shared",
    )
    c = write_kubeconfig(tmp_path / "c" / "config", current="only-b")
    missing = tmp_path / "missing" / "config"
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(map(str, [missing, a, b, c])))

    cfg = load_config()
    # current-context comes from b (the first file that sets one), but the
    # `shared` context, its cluster and its user all come from a.
    assert cfg.source == "shared"
    assert cfg.server == "https://a.example"
    assert asyncio.run(cfg.credentials.headers()) == {"Authorization": "Bearer a-token"}

    other = load_config(context="only-b")
    assert other.server == "https://cb.example"
    assert asyncio.run(other.credentials.headers()) == {}


async def test_merged_user_token_file_resolves_against_its_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_kubeconfig(
        tmp_path / "users" / "config", users={"u": {"tokenFile": "tok"}}, current="dev"
    )
    (tmp_path / "users" / "tok").write_text("from-users-dir")
    write_kubeconfig(
        tmp_path / "ctx" / "config",
        clusters={"c": {"server": "https://x"}},
        contexts={"dev": {"cluster": "c", "user": "u"}},
    )
    env = os.pathsep.join(str(tmp_path / d / "config") for d in ("users", "ctx"))
    monkeypatch.setenv("KUBECONFIG", env)
    headers = await load_config().credentials.headers()
    assert headers == {"Authorization": "Bearer from-users-dir"}


def test_load_config_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    simple_kubeconfig(home / ".kube" / "config", {}, {"server": "https://home"})
    env_file = simple_kubeconfig(tmp_path / "env", {}, {"server": "https://env"})
    explicit = simple_kubeconfig(tmp_path / "explicit", {}, {"server": "https://explicit"})
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KUBECONFIG", str(env_file))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert load_config(str(explicit)).server == "https://explicit"
    assert load_config().server == "https://env"
    monkeypatch.delenv("KUBECONFIG")
    assert load_config().server == "https://home"


def test_load_config_falls_back_to_in_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token")
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    cfg = load_config(service_account_dir=sa)
    assert cfg.source == "in-cluster"
    assert cfg.server == "https://10.96.0.1:443"
    with pytest.raises(ConfigError, match="context 'dev' was requested"):
        load_config(context="dev", service_account_dir=sa)

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(ConfigError, match=r"no Kubernetes configuration found.*KUBECONFIG"):
        load_config(service_account_dir=sa)


def test_explicit_kubeconfig_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"kubeconfig .*nope: no such file"):
        load_config(str(tmp_path / "nope"))


@pytest.mark.parametrize(
    ("contexts", "current", "context", "message"),
    [
        ({"dev": {"cluster": "c"}}, None, None, r"no context selected; set current-context"),
        (
            {"dev": {"cluster": "c"}},
            "dev",
            "prod",
            r"context 'prod' not found \(known: dev\); pass one of those or add it",
        ),
        ({"dev": {"cluster": "gone"}}, "dev", None, r"cluster 'gone' is not defined in"),
        ({"dev": {"user": "u"}}, "dev", None, r"context 'dev' in .*: no cluster set"),
        ({"dev": {"cluster": "c", "user": "ghost"}}, "dev", None, r"user 'ghost' is not defined"),
    ],
)
def test_selection_errors_name_file_and_fix(
    tmp_path: Path,
    contexts: dict[str, dict[str, Any]],
    current: str | None,
    context: str | None,
    message: str,
) -> None:
    path = write_kubeconfig(
        tmp_path / "config",
        clusters={"c": {"server": "https://x"}},
        contexts=contexts,
        current=current,
    )
    with pytest.raises(ConfigError, match=message) as info:
        load_kubeconfig(path, context)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("cluster", "user", "message"),
    [
        ({}, {}, r"cluster 'c' in .*: no server; set server"),
        (
            {
                "server": "https://x",
                "certificate-authority": "ca",
                "certificate-authority-data": "e",
            },
            {},
            "both certificate-authority and certificate-authority-data are set",
        ),
        (
            {
                "server": "https://x",
                "certificate-authority-data": b64(b"CA"),
                "insecure-skip-tls-verify": True,
            },
            {},
            "insecure-skip-tls-verify is set together with a certificate authority",
        ),
        (
            {"server": "https://x", "certificate-authority-data": b64(b"not a cert")},
            {},
            "certificate authority is not a valid PEM",
        ),
        ({"server": "https://x", "certificate-authority-data": "@@@"}, {}, "not valid base64"),
        (
            {"server": "https://x", "certificate-authority": "pki/ca.crt"},
            {},
            r"cannot read certificate-authority .*pki/ca.crt.*relative paths are relative to",
        ),
        ({"server": "https://x", "proxy-url": "socks5://p:1080"}, {}, "only http:// and https://"),
        ({"server": "ftp://x"}, {}, "is not an http"),
        ({"server": "https://x"}, {"client-certificate-data": b64(b"c")}, "not client-key"),
        ({"server": "https://x"}, {"token": "t", "username": "u"}, "both token and username"),
        ({"server": "https://x"}, {"auth-provider": {"name": "gcp"}}, "gke-gcloud-auth-plugin"),
        ({"server": "https://x"}, {"as": "bob"}, "impersonation"),
        (
            {"server": "https://x"},
            {"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1alpha1"}},
            "v1alpha1' is not supported",
        ),
        (
            {"server": "https://x"},
            {"exec": {"command": "x", "apiVersion": V1, "interactiveMode": "Always"}},
            "no terminal",
        ),
        ({"server": "https://x"}, {"exec": {"apiVersion": V1}}, "exec.command is empty"),
    ],
)
def test_field_errors_name_entry_and_fix(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any], message: str
) -> None:
    path = simple_kubeconfig(tmp_path / "config", user, cluster)
    with pytest.raises(ConfigError, match=message) as info:
        load_kubeconfig(path)
    assert str(path) in str(info.value)


def test_duplicate_names_and_bad_yaml(tmp_path: Path) -> None:
    dup = tmp_path / "dup"
    dup.write_text(
        yaml.safe_dump({"clusters": [{"name": "c", "cluster": {}}, {"name": "c", "cluster": {}}]})
    )
    with pytest.raises(ConfigError, match="two entries named 'c'"):
        load_kubeconfig(dup)
    bad = tmp_path / "bad"
    bad.write_text("clusters: [unclosed")
    with pytest.raises(ConfigError, match=r"bad: not valid YAML"):
        load_kubeconfig(bad)


def test_client_key_not_matching_certificate(pki: Pki) -> None:
    other_key = _key_pem(ec.generate_private_key(ec.SECP256R1()))
    with pytest.raises(ConfigError, match="client certificate and key cannot be used"):
        build_ssl_context(None, pki.client_cert_pem, other_key, what="user 'u'")


def test_encrypted_client_key_fails_instead_of_prompting(pki: Pki) -> None:
    key = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    )
    with pytest.raises(ConfigError, match="key is unencrypted"):
        build_ssl_context(None, pki.client_cert_pem, key)


async def test_token_file_wins_over_token_and_token_is_the_fallback(tmp_path: Path) -> None:
    path = simple_kubeconfig(tmp_path / "config", {"token": "inline", "tokenFile": "tok"})
    assert await load_kubeconfig(path).credentials.headers() == {
        "Authorization": "Bearer inline"
    }, "file missing: start from the inline token"
    (tmp_path / "tok").write_text("from-file")
    assert await load_kubeconfig(path).credentials.headers() == {
        "Authorization": "Bearer from-file"
    }


# ---------------------------------------------------------------- exec plugins
PLUGIN = textwrap.dedent(
    """\
    import json, os, sys, time
    log = os.environ["PLUGIN_LOG"]
    with open(log, "a") as f:
        f.write(json.dumps({"argv": sys.argv[1:], "info": os.environ.get("KUBERNETES_EXEC_INFO"),
                            "extra": os.environ.get("PLUGIN_EXTRA")}) + "\\n")
    calls = sum(1 for _ in open(log))
    time.sleep(float(os.environ.get("PLUGIN_SLEEP", "0")))
    if os.environ.get("PLUGIN_FAIL"):
        sys.stderr.write(os.environ["PLUGIN_FAIL"])
        sys.exit(3)
    out = open(os.environ["PLUGIN_RESPONSE"]).read().replace("{n}", str(calls))
    sys.stdout.write(out)
    """
)


@dataclass
class Plugin:
    """A Python exec plugin whose answer and invocations the test controls."""

    dir: Path

    @property
    def log(self) -> Path:
        return self.dir / "calls.log"

    @property
    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def respond(self, status: dict[str, Any], api_version: str = V1, **extra: Any) -> None:
        doc = {"apiVersion": api_version, "kind": "ExecCredential", "status": status, **extra}
        (self.dir / "response.json").write_text(json.dumps(doc))

    def exec_stanza(self, api_version: str = V1, **env: str) -> dict[str, Any]:
        env = {
            "PLUGIN_LOG": str(self.log),
            "PLUGIN_RESPONSE": str(self.dir / "response.json"),
            **env,
        }
        return {
            "apiVersion": api_version,
            "command": sys.executable,
            "args": [str(self.dir / "plugin.py"), "--flag"],
            "env": [{"name": k, "value": v} for k, v in env.items()],
            "interactiveMode": "Never",
            "installHint": "install it with: pip install demo-auth",
        }

    def config(self, api_version: str = V1, **env: str) -> ExecConfig:
        stanza = self.exec_stanza(api_version, **env)
        return ExecConfig(
            command=stanza["command"],
            api_version=api_version,
            args=stanza["args"],
            env={e["name"]: e["value"] for e in stanza["env"]},
            install_hint=stanza["installHint"],
            what="user 'u' in test",
        )


@pytest.fixture
def plugin(tmp_path: Path) -> Plugin:
    d = tmp_path / "plugin"
    d.mkdir()
    (d / "plugin.py").write_text(PLUGIN)
    return Plugin(d)


@pytest.mark.parametrize("api_version", [V1, V1BETA1])
async def test_exec_token(tmp_path: Path, plugin: Plugin, api_version: str) -> None:
    plugin.respond({"token": "exec-token-{n}"}, api_version)
    stanza = plugin.exec_stanza(api_version, PLUGIN_EXTRA="from-env")
    stanza["provideClusterInfo"] = True
    cfg = load_kubeconfig(simple_kubeconfig(tmp_path / "config", {"exec": stanza}))
    assert await cfg.credentials.headers() == {"Authorization": "Bearer exec-token-1"}
    assert await cfg.credentials.headers() == {"Authorization": "Bearer exec-token-1"}, "cached"

    [call] = plugin.calls
    assert call["argv"] == ["--flag"]
    assert call["extra"] == "from-env"
    info = json.loads(call["info"])
    assert info["apiVersion"] == api_version
    assert info["kind"] == "ExecCredential"
    assert info["spec"]["interactive"] is False
    assert info["spec"]["cluster"]["server"] == "https://k8s.example:6443"


async def test_exec_relative_command_resolves_against_kubeconfig(
    tmp_path: Path, plugin: Plugin
) -> None:
    script = tmp_path / "bin" / "auth-plugin"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\n" + PLUGIN)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    plugin.respond({"token": "rel"})
    stanza = {**plugin.exec_stanza(), "command": "./bin/auth-plugin", "args": []}
    cfg = load_kubeconfig(simple_kubeconfig(tmp_path / "config", {"exec": stanza}))
    assert await cfg.credentials.headers() == {"Authorization": "Bearer rel"}


async def test_exec_refreshes_before_expiry(plugin: Plugin) -> None:
    clock = FakeClock()  # 2026-01-01T00:00:00Z
    plugin.respond({"token": "t{n}", "expirationTimestamp": "2026-01-01T00:01:00Z"})
    creds = ExecCredentials(plugin.config(), clock=clock)
    assert await creds.headers() == {"Authorization": "Bearer t1"}
    await clock.advance(20)
    assert await creds.headers() == {"Authorization": "Bearer t1"}
    await clock.advance(15)  # within 30 s of expiry: refresh early
    assert await creds.headers() == {"Authorization": "Bearer t2"}
    assert len(plugin.calls) == 2


async def test_exec_expired_credential_is_re_executed(plugin: Plugin) -> None:
    plugin.respond({"token": "t{n}", "expirationTimestamp": "2020-01-01T00:00:00Z"})
    creds = ExecCredentials(plugin.config())
    assert await creds.headers() == {"Authorization": "Bearer t1"}
    assert await creds.headers() == {"Authorization": "Bearer t2"}
    assert len(plugin.calls) == 2


async def test_exec_invalidate_re_executes_and_refreshes_are_serialized(plugin: Plugin) -> None:
    plugin.respond({"token": "t{n}"})  # no expiry: valid until a 401
    creds = ExecCredentials(plugin.config(PLUGIN_SLEEP="0.2"))
    results = await asyncio.gather(*(creds.headers() for _ in range(5)))
    assert {r["Authorization"] for r in results} == {"Bearer t1"}
    assert len(plugin.calls) == 1
    creds.invalidate()
    assert await creds.headers() == {"Authorization": "Bearer t2"}


async def test_exec_client_certificate(pki: Pki, tmp_path: Path, plugin: Plugin) -> None:
    plugin.respond(
        {
            "clientCertificateData": pki.client_cert_pem.decode(),
            "clientKeyData": pki.client_key_pem.decode(),
        }
    )
    cluster = {"server": "https://x", "certificate-authority-data": b64(pki.ca_pem)}
    cfg = load_kubeconfig(
        simple_kubeconfig(tmp_path / "config", {"exec": plugin.exec_stanza()}, cluster)
    )
    assert await cfg.credentials.headers() == {}
    ctx = await cfg.credentials.ssl_context()
    assert await cfg.credentials.ssl_context() is ctx, "same material, same context"
    async with tls_server(pki, tmp_path) as port:
        assert await whoami(ctx, port) == "alice"
    assert len(plugin.calls) == 1


async def test_exec_failure_reports_exit_code_and_stderr(plugin: Plugin) -> None:
    creds = ExecCredentials(plugin.config(PLUGIN_FAIL="error: token expired, run login"))
    with pytest.raises(ConfigError, match=r"exited with code 3: error: token expired, run login"):
        await creds.headers()


async def test_exec_missing_command_shows_install_hint(plugin: Plugin, tmp_path: Path) -> None:
    stanza = {**plugin.exec_stanza(), "command": "dpo-no-such-auth-plugin"}
    cfg = load_kubeconfig(simple_kubeconfig(tmp_path / "config", {"exec": stanza}))
    with pytest.raises(ConfigError) as info:
        await cfg.credentials.headers()
    message = str(info.value)
    assert "'dpo-no-such-auth-plugin'" in message
    assert "executable not found" in message
    assert "install it with: pip install demo-auth" in message
    assert "user 'u'" in message


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (lambda p: (p.dir / "response.json").write_text("not json"), "not an ExecCredential"),
        (lambda p: p.respond({"token": "x"}, V1BETA1), "configured for apiVersion .*v1 but"),
        (lambda p: p.respond({}), "neither a token nor a client certificate"),
        (lambda p: p.respond({"clientCertificateData": "c"}), "only one of clientCertificate"),
        (
            lambda p: p.respond({"token": "x", "expirationTimestamp": "soon"}),
            "not an RFC 3339 time",
        ),
    ],
)
async def test_exec_bad_output(
    plugin: Plugin, write: Callable[[Plugin], object], message: str
) -> None:
    write(plugin)
    with pytest.raises(ConfigError, match=message):
        await ExecCredentials(plugin.config()).headers()


async def test_exec_output_that_is_no_credential_is_never_quoted(plugin: Plugin) -> None:
    """Whatever a plugin prints on stdout may be a secret (a token in the wrong shape): an
    error says how much it printed, never what."""
    (plugin.dir / "response.json").write_text("token=s3cr3t-abcdef\n")
    with pytest.raises(ConfigError) as info:
        await ExecCredentials(plugin.config()).headers()
    assert "s3cr3t" not in str(info.value)
    assert "printed 20 bytes that are not an ExecCredential" in str(info.value)


async def test_exec_output_is_read_up_to_a_cap(plugin: Plugin) -> None:
    (plugin.dir / "response.json").write_text("x" * (EXEC_STDOUT_LIMIT + 1))
    with pytest.raises(ConfigError, match=r"printed more than 1048576 bytes"):
        await ExecCredentials(plugin.config()).headers()


async def test_exec_stderr_is_capped_to_its_tail(plugin: Plugin) -> None:
    noise = "n" * 100_000 + "the last words"
    creds = ExecCredentials(plugin.config(PLUGIN_FAIL=noise))
    with pytest.raises(ConfigError) as info:
        await creds.headers()
    message = str(info.value)
    assert message.endswith("the last words")
    assert len(message) < 2_300


async def test_exec_timeout_kills_plugin(plugin: Plugin) -> None:
    plugin.respond({"token": "late"})
    creds = ExecCredentials(plugin.config(PLUGIN_SLEEP="30"), timeout=0.5)
    with pytest.raises(ConfigError, match=r"did not finish within 0.5s"):
        await creds.headers()


def test_exec_ignored_when_static_token_is_set(tmp_path: Path, plugin: Plugin) -> None:
    user = {"token": "static", "exec": plugin.exec_stanza()}
    creds = load_kubeconfig(simple_kubeconfig(tmp_path / "config", user)).credentials
    assert asyncio.run(creds.headers()) == {"Authorization": "Bearer static"}
    assert plugin.calls == []


# ---------------------------------------------------------------- in-cluster
@pytest.fixture
def service_account(pki: Pki, tmp_path: Path) -> Path:
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text("sa-1")
    (sa / "ca.crt").write_bytes(pki.ca_pem)
    (sa / "namespace").write_text("operators\n")
    return sa


async def test_in_cluster(
    pki: Pki, tmp_path: Path, service_account: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    clock = FakeClock()
    cfg = load_incluster_config(directory=service_account, clock=clock)
    assert isinstance(cfg, ClusterConfig)
    assert (cfg.server, cfg.source, cfg.namespace) == (
        "https://10.96.0.1:443",
        "in-cluster",
        "operators",
    )
    assert await cfg.credentials.headers() == {"Authorization": "Bearer sa-1"}

    (service_account / "token").write_text("sa-2")
    await clock.advance(60)
    assert await cfg.credentials.headers() == {"Authorization": "Bearer sa-2"}
    (service_account / "token").write_text("sa-3")
    cfg.credentials.invalidate()  # a 401: the bound token rotated under us
    assert await cfg.credentials.headers() == {"Authorization": "Bearer sa-3"}

    async with tls_server(pki, tmp_path) as port:
        assert await whoami(await cfg.credentials.ssl_context(), port) == "anonymous"


def test_in_cluster_ipv6_host(service_account: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "fd00:10:96::1", "KUBERNETES_SERVICE_PORT": "443"}
    cfg = load_incluster_config(directory=service_account, environ=env)
    assert cfg.server == "https://[fd00:10:96::1]:443"


def test_in_cluster_errors(tmp_path: Path, service_account: Path) -> None:
    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT"):
        load_incluster_config(directory=service_account, environ={})
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(ConfigError, match=r"no service-account token at .*automountServiceAccount"):
        load_incluster_config(directory=tmp_path / "empty", environ=env)
