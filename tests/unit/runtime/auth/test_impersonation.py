"""Unit tests for runtime.auth.impersonation: acting as another user via `Impersonate-User`."""

from __future__ import annotations

import ssl

from dynamo_pool_operator.runtime.auth.credentials import ClusterConfig, StaticCredentials
from dynamo_pool_operator.runtime.auth.impersonation import (
    ImpersonatingCredentials,
    impersonating,
)


class _Counting(StaticCredentials):
    """Static credentials that count how often they were told to refresh."""

    invalidated = 0

    def invalidate(self) -> None:
        self.invalidated += 1


async def test_headers_keep_the_callers_and_add_the_impersonated_user() -> None:
    creds = ImpersonatingCredentials(StaticCredentials(token="t"), "system:serviceaccount:ns:sa")
    assert await creds.headers() == {
        "Authorization": "Bearer t",
        "Impersonate-User": "system:serviceaccount:ns:sa",
    }


async def test_tls_and_refresh_go_to_the_callers_credentials() -> None:
    inner = _Counting(token="t")
    creds = ImpersonatingCredentials(inner, "bob")
    assert isinstance(await creds.ssl_context(), ssl.SSLContext)
    creds.invalidate()
    assert inner.invalidated == 1


async def test_impersonating_keeps_the_cluster_and_leaves_the_original_alone() -> None:
    inner = StaticCredentials(token="t")
    cluster = ClusterConfig(server="https://k8s.example:6443", credentials=inner)
    acting = impersonating(cluster, "bob")
    assert acting.server == cluster.server
    assert (await acting.credentials.headers())["Impersonate-User"] == "bob"
    assert cluster.credentials is inner
