"""Unit tests for runtime.auth.kubeconfig: reading, merging and resolving kubeconfig
files into a cluster config.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamo_pool_operator.runtime.auth.config import (
    ConfigError,
    load_config,
    load_kubeconfig,
)
from tests.unit.runtime.auth.support import (
    SERVER_NAME,
    V1,
    Pki,
    b64,
    simple_kubeconfig,
    tls_server,
    whoami,
    write_kubeconfig,
)


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


async def test_token_file_wins_over_token_and_token_is_the_fallback(tmp_path: Path) -> None:
    path = simple_kubeconfig(tmp_path / "config", {"token": "inline", "tokenFile": "tok"})
    assert await load_kubeconfig(path).credentials.headers() == {
        "Authorization": "Bearer inline"
    }, "file missing: start from the inline token"
    (tmp_path / "tok").write_text("from-file")
    assert await load_kubeconfig(path).credentials.headers() == {
        "Authorization": "Bearer from-file"
    }
