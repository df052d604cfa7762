"""The pools of a consuming cluster as the router finds them: read, and shown.

Both `discover` and `dev --clusters 2` show them, so the reading and the table live
here, below the commands, which never import each other. Reading lists what the router
lists (the imported EndpointSlices) and, only to explain, the ServiceImports and (with
Karmada) the Works; a refused read of those is a note, never a failure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dynamo_pool_operator.api import mcs, names
from dynamo_pool_operator.discover.find import Discovered, Imported, Mode, Pool, find
from dynamo_pool_operator.discover.slices import KARMADA_LABELLED_SINCE
from dynamo_pool_operator.runtime import Client, errors
from dynamo_pool_operator.runtime.objects import Resource

ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
WORKS = Resource("work.karmada.io", "v1alpha1", "works", "Work")
HEADER = ("CLUSTER", "NAMESPACE", "NAME", "LIVE", "RELAY", "FRONTENDS")


def selector(mode: Mode) -> str:
    """The slices the router lists (then narrows by name). Karmada's older slices carry
    no manager and a label selector cannot match a value's prefix: every slice of a
    Service is listed, and `find` keeps the `derived-` ones."""
    if mode is Mode.KARMADA:
        return f"{names.SLICE_MANAGED_BY}={names.KARMADA_SLICE_MANAGER}"
    if mode is Mode.KARMADA_DERIVED:
        return names.SLICE_SERVICE_NAME
    return names.MCS_SERVICE_NAME


def _ready(imported: Imported) -> str:
    return f"{len(imported.ready)}/{len(imported.endpoints)} ready"


def _addresses(imported: Imported) -> str:
    if not imported.endpoints:
        return "no endpoints"
    return ", ".join(
        f"{e.address} {'ready' if e.ready else 'not ready'}" for e in imported.endpoints
    )


def _pool_block(p: Pool) -> list[str]:
    lines = [f"{p.key}:", f"  relay {p.relay.service}: {_addresses(p.relay)}"]
    lines += [f"  frontend {f.service}: {_addresses(f)}" for f in p.frontends]
    lines += [f"  problem: {problem}" for problem in p.problems]
    return lines


def format_table(found: Discovered, empty: str | None = None) -> str:
    """The pools, one line each, then each pool's endpoints and problems, then what the
    router would not use and why. `empty`: the line for no pool, when the pools were
    narrowed (to `--pool`'s) and others may be imported."""
    lines: list[str] = []
    if not found.pools:
        lines.append(empty or "No pools found: no imported relay Service (<dgd>-pool-relay).")
    else:
        cells = [HEADER] + [
            (
                p.cluster,
                p.namespace,
                p.name,
                "yes" if p.live else "no",
                _ready(p.relay),
                ", ".join(f"{f.service} ({_ready(f)})" for f in p.frontends) or "-",
            )
            for p in found.pools
        ]
        widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
        lines += [
            "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in cells
        ]
        for p in found.pools:
            lines += ["", *_pool_block(p)]
    if found.skipped:
        lines += ["", "Not used by the router:"]
        lines += [f"  {s.namespace}/{s.service}: {s.why}" for s in found.skipped]
    return "\n".join(lines) + "\n"


def format_json(found: Discovered) -> str:
    return json.dumps(found.to_json(), indent=2) + "\n"


def narrowed(found: Discovered, key: str) -> Discovered:
    """Only the pool `key` and what was skipped in its namespace."""
    namespace = key.split("/")[1]
    return Discovered(
        tuple(p for p in found.pools if p.key == key),
        tuple(s for s in found.skipped if s.namespace == namespace),
    )


def explain(e: errors.ApiError, what: str, namespace: str | None) -> str:
    """A refused list, said as what to look at."""
    where = f"namespace {namespace!r}" if namespace else "any namespace"
    if isinstance(e, errors.Forbidden):
        return f"not allowed to list {what} in {where}: {e}"
    if isinstance(e, errors.Unauthorized):
        return f"the cluster did not accept the credentials: {e}"
    if isinstance(e, errors.NotFound):
        return f"the {what} API is not served here: {e}"
    return f"cannot list {what} in {where}: {e}"


@dataclass(frozen=True, slots=True)
class Reading:
    """What was read, by which path (`mode`: Karmada's older slices are read by name),
    and what to tell the user about how (one line each)."""

    mode: Mode
    slices: list[Mapping[str, Any]]
    works: list[Mapping[str, Any]] | None = None
    imports: list[Mapping[str, Any]] | None = None
    notes: tuple[str, ...] = ()

    def find(self, implementation: mcs.Importer | None = None) -> Discovered:
        return find(
            self.slices, self.mode, self.works, imports=self.imports, implementation=implementation
        )


KARMADA_LABEL = f"{names.SLICE_MANAGED_BY}={names.KARMADA_SLICE_MANAGER}"
DERIVED_LABEL = f"{names.SLICE_SERVICE_NAME}={names.KARMADA_DERIVED_PREFIX}<service>"


async def _slices(
    client: Client, mode: Mode, namespace: str | None, *, strict: bool
) -> tuple[Mode, list[Mapping[str, Any]], list[str]]:
    """The slices by the router's selector; with Karmada, when none carries its manager
    (Karmada before v1.15.0) and `strict` is off, those named `derived-<service>`. Off
    the router's path (slices found only by that name), a note says which path was taken
    and which Karmada the router needs."""
    slices: list[Mapping[str, Any]] = list(
        (await client.list(ENDPOINT_SLICES, namespace, label_selector=selector(mode))).items
    )
    if mode is not Mode.KARMADA or slices:
        return mode, slices, []  # the router's own path: nothing to say
    if strict:
        note = (
            f"note: no EndpointSlice here is labelled {KARMADA_LABEL}, which Karmada sets "
            f"from {KARMADA_LABELLED_SINCE}: an older Karmada sets none, and without "
            f"--implementation karmada, --karmada reads its slices by {DERIVED_LABEL}"
        )
        return mode, slices, [note]
    derived = Mode.KARMADA_DERIVED
    slices = list(
        (await client.list(ENDPOINT_SLICES, namespace, label_selector=selector(derived))).items
    )
    if not slices:
        return mode, slices, []  # no slice either way (nothing exported): nothing to say
    note = (
        f"note: no EndpointSlice here is labelled {KARMADA_LABEL}, which Karmada sets from "
        f"{KARMADA_LABELLED_SINCE}: read instead the slices labelled {DERIVED_LABEL}. The "
        "router selects on the manager: it sees these pools only once Karmada is upgraded"
    )
    return derived, slices, [note]


async def _works(client: Client) -> tuple[list[Mapping[str, Any]] | None, str]:
    try:
        return list((await client.list(WORKS, None)).items), ""
    except errors.ApiError as e:
        return None, (
            f"note: the Works are not read ({explain(e, 'Works', None)}); a slice whose "
            "Work is gone is not pointed out"
        )


async def _imports(
    client: Client, namespace: str | None
) -> tuple[list[Mapping[str, Any]] | None, str]:
    """The ServiceImports at the newest version served; None with nothing to say when
    no version is (no MCS API: no import to explain), or with a note when refused."""
    for version in mcs.SERVICEIMPORT_VERSIONS:
        try:
            return list((await client.list(mcs.serviceimports(version), namespace)).items), ""
        except errors.NotFound:
            continue
        except errors.ApiError as e:
            why = explain(e, "ServiceImports", namespace)
            return None, (
                f"note: the ServiceImports are not read ({why}); "
                "an import for which the implementation writes no EndpointSlices is not "
                f"pointed out (it needs list on {mcs.SERVICEIMPORTS}.{mcs.MCS_GROUP})"
            )
    return None, ""


async def read(
    client: Client, mode: Mode, namespace: str | None, *, strict: bool = False
) -> Reading:
    """The slices the router would list, and the ServiceImports and (Karmada) the Works,
    or None for those with a note when they cannot be read: they only explain, so
    discover goes on without them. `strict`: Karmada's slices by their manager only."""
    mode, slices, notes = await _slices(client, mode, namespace, strict=strict)
    imports, note = await _imports(client, namespace)
    notes += [note] if note else []
    works: list[Mapping[str, Any]] | None = None
    if mode is not Mode.MCS:
        works, note = await _works(client)
        notes += [note] if note else []
    return Reading(mode, slices, works, imports, tuple(notes))


async def discovered(client: Client, mode: Mode, namespace: str | None) -> Discovered:
    """What the router would find in `namespace` (all with None), the notes dropped."""
    return (await read(client, mode, namespace)).find()
