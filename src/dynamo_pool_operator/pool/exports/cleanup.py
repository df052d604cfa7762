"""Feature off: withdraw the exports this operator made before (our DGD label, a relay
as controller), through the guarded writes. A pass never raises: a refused list or
delete, or an export still changing after three lost races, is a failure of the pass,
which the caller retries and reports.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.mcs import serviceexports
from dynamo_pool_operator.pool.exports.wiring import is_relay_controller
from dynamo_pool_operator.runtime import Client, GuardedWrites, LostRace, Obj, errors
from dynamo_pool_operator.runtime.objects import Meta, Resource

log = logging.getLogger(__name__)


@dataclass
class Cleanup:
    """One pass: how many exports it withdrew, and the failures (each naming the
    export, or the list) that a later pass retries."""

    withdrawn: int = 0
    failures: list[str] = field(default_factory=list)
    #: The exports whose delete failed, each with its failure (a subset of `failures`).
    refused: list[tuple[Obj, str]] = field(default_factory=list)


class Contended(errors.Reported):
    """The export changed under every guarded delete attempted in one pass."""


def ours(export: Obj) -> bool:
    """Made by this operator and not already going: a relay controls it, our label."""
    meta = Meta(export)
    return (
        not meta.terminating
        and is_relay_controller(meta.controller)
        and meta.labels.get(names.DGD_NAME) is not None
    )


async def withdraw_leftover_exports(client: Client, version: str, namespace: str | None) -> Cleanup:
    res = serviceexports(version)
    writes = GuardedWrites(client, names.FIELD_MANAGER)
    out = Cleanup()
    try:
        listed = await client.list(res, namespace, label_selector=names.DGD_NAME)
    except errors.ApiError as e:
        out.failures.append(f"list ServiceExports: {e}")
        return out
    for export in listed.items:
        try:
            out.withdrawn += await _withdraw_if_ours(client, writes, res, export)
        except (errors.ApiError, Contended) as e:
            meta = Meta(export)
            said = f"delete ServiceExport {meta.namespace}/{meta.name}: {e}"
            out.failures.append(said)
            out.refused.append((export, said))
    return out


async def _withdraw_if_ours(
    client: Client, writes: GuardedWrites, res: Resource, export: Obj, attempts: int = 3
) -> int:
    """Delete `export` if it is still ours at the version read; after a lost race, read
    it again and decide again."""
    for _ in range(attempts):
        if not ours(export):
            return 0
        meta = export["metadata"]
        try:
            if not await writes.delete(res, export):
                return 0
        except LostRace:
            try:
                export = await client.get(res, meta["name"], meta["namespace"])
            except errors.NotFound:
                return 0
            continue
        log.info(
            "feature off: withdrew ServiceExport",
            extra={"namespace": meta["namespace"], "object": meta["name"]},
        )
        return 1
    raise Contended(f"it changed under each of {attempts} guarded deletes (retried)")
