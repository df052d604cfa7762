"""`dynamo-pool-operator manifests crds --apply`: install or upgrade our CRD, then wait
until the API server serves it.

Helm installs a chart's `crds/` once and never upgrades them, so the chart runs this in
a pre-install/pre-upgrade hook Job from the operator image, which has no kubectl.

It is a forced server-side apply (`kubectl apply --server-side --force-conflicts`):
versions and schemas merge as whole values, so they become exactly this binary's even
when Helm made the CRD (tests/e2e/test_crd_upgrade.py); others' labels and annotations
are kept.

Refused before anything is written when the installed CRD was made by a newer operator
(its version annotation, compared as releases) or an incomparable one, unless
`--allow-downgrade`; or when objects are stored at a version (`status.storedVersions`)
this CRD does not serve, which would strand them (never lifted). A CRD without the
annotation is upgraded. The write carries the resourceVersion it was judged on.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from typing import Any, TextIO

from dynamo_pool_operator.api import crd
from dynamo_pool_operator.api.conditions import Status
from dynamo_pool_operator.exitcodes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from dynamo_pool_operator.runtime import Client, ConfigError, errors, load_config
from dynamo_pool_operator.runtime.objects import CRDS, Meta

FIELD_MANAGER = "dynamo-pool-operator"
USER_AGENT = "dynamo-pool-operator-crd-install"
#: Seconds to wait for the API server to establish the CRD after the write.
ESTABLISH_TIMEOUT = 60.0


#: Attempts at the guarded write when the CRD keeps changing between read and write.
WRITE_ATTEMPTS = 3
_RELEASE = re.compile(
    r"v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-.]?(?P<pre>dev|a|alpha|b|beta|c|rc)[-.]?(?P<pre_n>\d*))?"
    r"(?:[-.]?post[-.]?(?P<post>\d*))?"
    r"(?:\+[0-9A-Za-z.-]*)?"
)
_PRE_RANK = {"dev": 0, "a": 1, "alpha": 1, "b": 2, "beta": 2, "c": 3, "rc": 3}
_FINAL = 4


class Refused(Exception):
    """Applying this binary's CRD would downgrade the installed one or strand objects."""


def release_key(version: str) -> tuple[tuple[int, ...], int, int, int] | None:
    """A sortable key of a PEP 440 or SemVer release string, None if it is neither:
    release numbers (trailing zeros ignored), then dev < a < b < rc < final < post."""
    m = _RELEASE.fullmatch(version.strip())
    if m is None:
        return None
    numbers = [int(n) for n in m["release"].split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    rank = _PRE_RANK[m["pre"]] if m["pre"] else _FINAL
    post = int(m["post"] or 0) + 1 if m["post"] is not None else 0
    return tuple(numbers), rank, int(m["pre_n"] or 0), post


def made_by(obj: Mapping[str, Any]) -> str | None:
    """The operator version that made this CRD (its annotation), if it says."""
    value = Meta(obj).annotations.get(crd.VERSION_ANNOTATION)
    return str(value) if value is not None else None


def refusal(
    installed: Mapping[str, Any] | None, desired: Mapping[str, Any], *, allow_downgrade: bool
) -> str | None:
    """Why `desired` must not replace `installed`, or None when it may."""
    if installed is None:
        return None
    name = desired["metadata"]["name"]
    mine = made_by(desired) or "?"
    served = {v["name"] for v in desired["spec"]["versions"]}
    stored = (installed.get("status") or {}).get("storedVersions") or []
    stranded = [v for v in stored if v not in served]
    if stranded:
        return (
            f"objects of {name} are stored at {', '.join(stranded)} (status.storedVersions), "
            f"which the CRD of dynamo-pool-operator {mine} does not serve: they would become "
            "unreadable, so it is not applied (--allow-downgrade does not lift this). Use an "
            f"operator whose CRD serves {', '.join(stranded)}; or migrate every object to a "
            f"version this one serves ({', '.join(sorted(served))}) and remove "
            f"{', '.join(stranded)} from the CRD's status.storedVersions first"
        )
    theirs = made_by(installed)
    if theirs is None or allow_downgrade:
        return None
    new, old = release_key(mine), release_key(theirs)
    if new is None or old is None:
        return (
            f"the installed {name} was made by dynamo-pool-operator {theirs!r} and this is "
            f"{mine!r}: cannot tell which is newer, so it is not applied; pass "
            "--allow-downgrade (chart: crds.allowDowngrade=true) to apply it anyway"
        )
    if new < old:
        return (
            f"the installed {name} is from dynamo-pool-operator {theirs}, newer than this "
            f"binary ({mine}): applying would downgrade it, so it is not applied. Keep the "
            "newer CRD (it serves what this version needs; see docs/operations.md, "
            "rollback), or pass --allow-downgrade (chart: crds.allowDowngrade=true)"
        )
    return None


async def install(
    client: Client, desired: Mapping[str, Any], *, allow_downgrade: bool = False
) -> str:
    """Apply one CRD; "created", "configured" or "unchanged" (as kubectl says them).
    Raises Refused, having written nothing, when `refusal` says no."""
    name = desired["metadata"]["name"]
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        try:
            installed: dict[str, Any] | None = await client.get(CRDS, name)
        except errors.NotFound:
            installed = None
        if why := refusal(installed, desired, allow_downgrade=allow_downgrade):
            raise Refused(why)
        body = dict(desired)
        if installed is None:
            before = None
        else:
            # A precondition: a CRD changed since the decision is judged again.
            before = installed["metadata"]["resourceVersion"]
            body["metadata"] = {**desired["metadata"], "resourceVersion": before}
        try:
            stored = await client.apply(CRDS, body, field_manager=FIELD_MANAGER, force=True)
        except errors.Conflict:
            if attempt == WRITE_ATTEMPTS:
                raise
            continue
        if before is None:
            return "created"
        return "unchanged" if stored["metadata"].get("resourceVersion") == before else "configured"
    raise AssertionError("unreachable")


async def established(client: Client, name: str, timeout: float = ESTABLISH_TIMEOUT) -> None:
    """Wait until the CRD is Established (its names accepted, its API served)."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        obj = await client.get(CRDS, name)
        est, names = Meta(obj).condition("Established"), Meta(obj).condition("NamesAccepted")
        if (
            est
            and est.get("status") == Status.TRUE
            and (not names or names.get("status") == Status.TRUE)
        ):
            return
        bad = names if names and names.get("status") == Status.FALSE else est
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
    allow_downgrade: bool = False,
) -> int:
    """Install or upgrade every CRD this binary serves; one line per CRD, as kubectl
    prints them; exit 1 with one line saying why when it cannot or must not."""
    try:
        cluster = load_config(kubeconfig, context)
    except ConfigError as e:
        print(f"error: {e}", file=err)
        return EXIT_USAGE
    desired = crd.crd()
    name = desired["metadata"]["name"]
    async with Client(cluster, user_agent=USER_AGENT) as client:
        try:
            outcome = await install(client, desired, allow_downgrade=allow_downgrade)
            print(f"customresourcedefinition.apiextensions.k8s.io/{name} {outcome}", file=out)
            await established(client, name, timeout)
        except (Refused, TimeoutError) as e:
            print(f"error: {e}", file=err)
            return EXIT_FAILURE
        except errors.ApiError as e:
            print(f"error: {_explain(e, name)}", file=err)
            return EXIT_FAILURE
    print(f"customresourcedefinition.apiextensions.k8s.io/{name} established", file=out)
    return EXIT_OK
