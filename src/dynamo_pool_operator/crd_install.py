"""`dynamo-pool-operator manifests crds --apply`: install or upgrade our CRD, then wait
until the API server serves it.

Why a command of ours: Helm installs the files in a chart's `crds/` once and never
upgrades them, so the chart runs this in a pre-install/pre-upgrade hook Job, from the
operator image, which has no kubectl. It is also the manual upgrade step.

It is `kubectl apply --server-side --force-conflicts` for our CRD: a forced server-side
apply with field manager `dynamo-pool-operator`. A CRD's versions and schemas merge as
whole values, so the forced apply makes them exactly this binary's, also when Helm (or
kubectl) created the CRD: a property or printer column the new version dropped goes
(tests/e2e/test_crd_upgrade.py). Labels and annotations others set are kept. An apply
that finds no CRD creates it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any, TextIO

from .api import crd
from .exitcodes import EXIT_FAILURE, EXIT_OK
from .runtime import errors
from .runtime.auth import ConfigError, load_config
from .runtime.client import Client
from .runtime.resources import CRDS

FIELD_MANAGER = "dynamo-pool-operator"
USER_AGENT = "dynamo-pool-operator-crd-install"
#: Seconds to wait for the API server to establish the CRD after the write.
ESTABLISH_TIMEOUT = 60.0


async def install(client: Client, desired: Mapping[str, Any]) -> str:
    """Apply one CRD; "created", "configured" or "unchanged" (as kubectl says them)."""
    name = desired["metadata"]["name"]
    try:
        before = (await client.get(CRDS, name))["metadata"].get("resourceVersion")
    except errors.NotFound:
        before = None
    stored = await client.apply(CRDS, dict(desired), field_manager=FIELD_MANAGER, force=True)
    if before is None:
        return "created"
    return "unchanged" if stored["metadata"].get("resourceVersion") == before else "configured"


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return c  # type: ignore[no-any-return]
    return None


async def established(client: Client, name: str, timeout: float = ESTABLISH_TIMEOUT) -> None:
    """Wait until the CRD is Established (its names accepted, its API served)."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        obj = await client.get(CRDS, name)
        est, names = _condition(obj, "Established"), _condition(obj, "NamesAccepted")
        if est and est.get("status") == "True" and (not names or names.get("status") == "True"):
            return
        bad = names if names and names.get("status") == "False" else est
        last = f"{bad.get('reason')}: {bad.get('message')}" if bad else "no conditions yet"
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{name} is not Established after {timeout:.0f}s ({last})")
        await asyncio.sleep(0.2)


def _explain(e: errors.ApiError, name: str) -> str:
    if isinstance(e, errors.Forbidden):
        return (
            f"not allowed to write the CRD {name}: {e}; the identity needs get, patch and "
            "create on customresourcedefinitions (that name), as the chart's CRD upgrade "
            "hook is granted"
        )
    if isinstance(e, errors.Unauthorized):
        return f"the cluster did not accept the credentials: {e}"
    return f"cannot install the CRD {name}: {e}"


async def run(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    out: TextIO,
    err: TextIO,
    timeout: float = ESTABLISH_TIMEOUT,
) -> int:
    """Install or upgrade every CRD this binary serves; one line per CRD, as kubectl
    prints them; exit 1 with one line saying why when it cannot."""
    try:
        cluster = load_config(kubeconfig, context)
    except ConfigError as e:
        print(f"error: {e}", file=err)
        return EXIT_FAILURE
    desired = crd.crd()
    name = desired["metadata"]["name"]
    async with Client(cluster, user_agent=USER_AGENT) as client:
        try:
            outcome = await install(client, desired)
            print(f"customresourcedefinition.apiextensions.k8s.io/{name} {outcome}", file=out)
            await established(client, name, timeout)
        except errors.ApiError as e:
            print(f"error: {_explain(e, name)}", file=err)
            return EXIT_FAILURE
        except TimeoutError as e:
            print(f"error: {e}", file=err)
            return EXIT_FAILURE
    print(f"customresourcedefinition.apiextensions.k8s.io/{name} established", file=out)
    return EXIT_OK
