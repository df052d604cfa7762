"""A tenant: a user with less RBAC than the operator, with her own client certificate.

`alice` may do anything with DynamoGraphDeployments and DynamoPoolRelays in her
namespace, read the Events there, and nothing else: no Deployments, no Services, no
ServiceExports. Whatever the operator does for her objects must give her nothing more
(docs/operations.md, "Security model"). The `alice` fixture (tests/conftest.py) is
this user in the test's namespace; tests that need another grant pass `extra_rules`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from dynamo_pool_operator import admission
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from tests.integration.support.relay_fixtures import RELAYS, relay_body

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

#: What a namespace user holds who was granted relays and nothing else: not even a read
#: of the DGDs beside them.
RELAY_ONLY_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": ["nvidia.com"], "resources": ["dynamopoolrelays"], "verbs": ["*"]},
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
    rules: Sequence[dict[str, Any]] = POOL_AUTHOR_RULES,
) -> AsyncIterator[Client]:
    """A client authenticated as `user` (a client certificate the API server's CA signed),
    holding `rules` (a pool author's by default) and `extra_rules` in `namespace` only."""
    grant(cp, namespace, [*rules, *extra_rules], user=user)
    path = cp.user_kubeconfig(user, groups=(TENANT_GROUP,))
    async with Client(load_kubeconfig(path), user_agent=f"dpo-tests-{user}") as c:
        yield c


POLICIES = "/apis/admissionregistration.k8s.io/v1"


@asynccontextmanager
async def relay_policy(cp: ControlPlane, namespace: str, author: Client) -> AsyncIterator[str]:
    """The shipped relay admission policy and its binding (`admission.render`), under names
    of `namespace` and bound to it only, so no other test sees it; yields once it is in
    force (`author`, who may not create Deployments, has a dry-run relay with an image
    refused), and deletes both afterwards."""
    docs = admission.render(namespace, suffix=f".{namespace}")
    for doc in docs:
        await asyncio.to_thread(cp.apply, doc)
    name = str(docs[0]["metadata"]["name"])
    probe = relay_body("probe", namespace, image="probe.example/relay:1")

    async def in_force() -> bool:
        try:
            await author.request(
                "POST", RELAYS.path(namespace), params={"dryRun": "All"}, body=probe
            )
        except errors.Forbidden as e:
            return "denied request" in str(e)
        return False

    try:
        deadline = time.monotonic() + 30
        while not await in_force():
            if time.monotonic() > deadline:
                raise TimeoutError(f"policy {name} not in force within 30s")
            await asyncio.sleep(0.1)
        yield name
    finally:
        for kind in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            await asyncio.to_thread(cp.request, "DELETE", f"{POLICIES}/{kind}/{name}")
