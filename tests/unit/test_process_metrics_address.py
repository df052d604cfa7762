"""Where plain /metrics listens: every tenant's relay names are in it."""

from __future__ import annotations

import pytest

from dynamo_pool_operator.config import ServerConfig
from dynamo_pool_operator.process import metrics_listen


@pytest.mark.parametrize(
    ("address", "secure", "listen"),
    [
        (":8080", False, "127.0.0.1:8080"),  # plain, no host named: loopback only
        (":8080", True, ":8080"),  # secure: every interface, as configured
        ("0.0.0.0:9090", False, "0.0.0.0:9090"),  # a host named is the user's choice
        ("[::1]:9090", False, "[::1]:9090"),
        ("0", False, "0"),  # disabled stays disabled
    ],
)
def test_plain_metrics_without_a_host_listen_on_loopback(
    address: str, secure: bool, listen: str
) -> None:
    assert metrics_listen(ServerConfig(metrics_address=address, metrics_secure=secure)) == listen
