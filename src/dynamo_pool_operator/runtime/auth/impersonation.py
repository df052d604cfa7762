"""Acting as another user: kubectl's `--as`, the `Impersonate-User` header.

The API server authenticates the caller as usual, checks that the caller may
`impersonate` the named user (for `system:serviceaccount:NS:NAME`, the verb on that
ServiceAccount), and then authorizes the request as that user. For a ServiceAccount it
adds the account's groups itself, so no `Impersonate-Group` is needed.
"""

from __future__ import annotations

import dataclasses
import ssl
from dataclasses import dataclass

from dynamo_pool_operator.runtime.auth.credentials import ClusterConfig, Credentials


@dataclass
class ImpersonatingCredentials:
    """The caller's credentials, plus the header that names whom the request acts as."""

    inner: Credentials
    user: str

    async def ssl_context(self) -> ssl.SSLContext:
        return await self.inner.ssl_context()

    async def headers(self) -> dict[str, str]:
        return {**await self.inner.headers(), "Impersonate-User": self.user}

    def invalidate(self) -> None:
        self.inner.invalidate()


def impersonating(cluster: ClusterConfig, user: str) -> ClusterConfig:
    """The same cluster and caller, acting as `user`."""
    return dataclasses.replace(
        cluster, credentials=ImpersonatingCredentials(cluster.credentials, user)
    )
