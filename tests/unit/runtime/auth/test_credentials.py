"""Unit tests for runtime.auth.credentials: static and token-file credentials,
client TLS material.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from dynamo_pool_operator.runtime.auth.config import (
    ConfigError,
    StaticCredentials,
    TokenFileCredentials,
    build_ssl_context,
    load_kubeconfig,
)
from tests.clock import FakeClock
from tests.unit.runtime.auth.support import (
    Pki,
    key_pem,
    simple_kubeconfig,
)


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


def test_client_key_not_matching_certificate(pki: Pki) -> None:
    other_key = key_pem(ec.generate_private_key(ec.SECP256R1()))
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
