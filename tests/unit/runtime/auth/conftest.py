"""Fixtures shared by the runtime.auth tests."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization

from tests.unit.runtime.auth.support import (
    SERVER_NAME,
    Pki,
    make_ca,
    make_leaf,
)


@pytest.fixture(scope="session")
def pki() -> Pki:
    ca_key, ca = make_ca("test-ca")
    _, other = make_ca("unrelated-ca")
    server_cert, server_key = make_leaf(ca_key, ca, SERVER_NAME, server=True)
    client_cert, client_key = make_leaf(ca_key, ca, "alice", server=False)
    return Pki(
        ca_pem=ca.public_bytes(serialization.Encoding.PEM),
        other_ca_pem=other.public_bytes(serialization.Encoding.PEM),
        server_cert_pem=server_cert,
        server_key_pem=server_key,
        client_cert_pem=client_cert,
        client_key_pem=client_key,
    )
