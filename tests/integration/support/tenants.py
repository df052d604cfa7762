"""A tenant: a user with less RBAC than the operator, with her own client certificate.

`alice` may do anything with DynamoGraphDeployments and DynamoPoolRelays in her
namespace, read the Events there, and nothing else: no Deployments, no Services, no
ServiceExports. Whatever the operator does for her objects must give her nothing more
(docs/operations.md, "Security model"). The `alice` fixture (tests/conftest.py) is
this user in the test's namespace; tests that need another grant pass `extra_rules`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client

TENANT = "alice"
TENANT_GROUP = "dpo-tenants"

#: What a pool's author holds in her namespace: her pools, and nothing they make.
POOL_AUTHOR_RULES: tuple[dict[str, Any], ...] = (
    {
        "apiGroups": ["nvidia.com"],
        "resources": ["dynamographdeployments", "dynamopoolrelays"],
        "verbs": ["*"],
    },
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["get", "list", "watch"]},
)


def grant(
    cp: ControlPlane,
    namespace: str,
    rules: Sequence[dict[str, Any]],
    *,
    user: str = TENANT,
    name: str | None = None,
) -> None:
    """A Role with `rules` in `namespace`, bound to `user`."""
    role = name or f"{user}-role"
    cp.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": role, "namespace": namespace},
            "rules": list(rules),
        }
    )
    cp.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": role, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        }
    )


@asynccontextmanager
async def tenant_client(
    cp: ControlPlane,
    namespace: str,
    *,
    user: str = TENANT,
    extra_rules: Sequence[dict[str, Any]] = (),
) -> AsyncIterator[Client]:
    """A client authenticated as `user` (a client certificate the API server's CA signed),
    holding `POOL_AUTHOR_RULES` (and `extra_rules`) in `namespace` only."""
    grant(cp, namespace, [*POOL_AUTHOR_RULES, *extra_rules], user=user)
    path = cp.user_kubeconfig(user, groups=(TENANT_GROUP,))
    async with Client(load_kubeconfig(path), user_agent=f"dpo-tests-{user}") as c:
        yield c
