"""`dynamo-pool-operator discover`: the pools of a consuming cluster, as the router sees them.

The relay's `Ready` says what the MCS implementation reported on the exports; the
Global Router reads neither. This reads what it reads, the imported EndpointSlices (and,
with Karmada, the Works, only to explain), and never writes: the RBAC it needs is `list`
on `endpointslices.discovery.k8s.io` (and `works.work.karmada.io` with `--karmada`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from dynamo_pool_operator.api import names
from dynamo_pool_operator.discover.find import Discovered, Imported, Mode, Pool, find
from dynamo_pool_operator.exitcodes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from dynamo_pool_operator.runtime import Client, ConfigError, errors, load_config
from dynamo_pool_operator.runtime.objects import Resource

ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
WORKS = Resource("work.karmada.io", "v1alpha1", "works", "Work")
USER_AGENT = "dynamo-pool-operator-discover"
HEADER = ("CLUSTER", "NAMESPACE", "NAME", "LIVE", "RELAY", "FRONTENDS")


def selector(mode: Mode) -> str:
    """The slices the router lists (then narrows by name)."""
    if mode is Mode.KARMADA:
        return f"{names.SLICE_MANAGED_BY}={names.KARMADA_SLICE_MANAGER}"
    return names.MCS_SERVICE_NAME


@dataclass(frozen=True, slots=True)
class Options:
    kubeconfig: str | None = None
    context: str | None = None
    karmada: bool = False
    namespace: str | None = None
    all_namespaces: bool = False
    output: str = "table"
    #: `CLUSTER/NAMESPACE/NAME`: exit 1 unless this pool is live.
    pool: str | None = None


def parse_pool(value: str) -> tuple[str, str, str] | None:
    """`CLUSTER/NAMESPACE/NAME` split, or None when it is not three non-empty parts."""
    parts = value.split("/")
    if len(parts) != 3 or not all(parts):
        return None
    return parts[0], parts[1], parts[2]


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


def format_table(found: Discovered) -> str:
    """The pools, one line each, then each pool's endpoints and problems, then what the
    router would not use and why."""
    lines: list[str] = []
    if not found.pools:
        lines.append("No pools found: no imported relay Service (<dgd>-pool-relay).")
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


def _explain(e: errors.ApiError, what: str, namespace: str | None) -> str:
    where = f"namespace {namespace!r}" if namespace else "any namespace"
    if isinstance(e, errors.Forbidden):
        return f"not allowed to list {what} in {where}: {e}"
    if isinstance(e, errors.Unauthorized):
        return f"the cluster did not accept the credentials: {e}"
    if isinstance(e, errors.NotFound):
        return f"the {what} API is not served here: {e}"
    return f"cannot list {what} in {where}: {e}"


async def read(
    client: Client, mode: Mode, namespace: str | None
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]] | None, str]:
    """The slices the router would list and (Karmada) the Works, or None with a note
    when they cannot be read: they only explain, so discover goes on without them."""
    slices = (await client.list(ENDPOINT_SLICES, namespace, label_selector=selector(mode))).items
    if mode is not Mode.KARMADA:
        return list(slices), None, ""
    try:
        works = (await client.list(WORKS, None)).items
    except errors.ApiError as e:
        note = (
            f"note: the Works are not read ({_explain(e, 'Works', None)}); a slice whose "
            "Work is gone is not pointed out"
        )
        return list(slices), None, note
    return list(slices), list(works), ""


async def run(opts: Options, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Print the pools; 0 when the cluster could be read, 1 when `opts.pool` is not
    live, 2 on a usage or connection error."""
    out, err = out or sys.stdout, err or sys.stderr
    key: str | None = None
    if opts.pool is not None:
        parts = parse_pool(opts.pool)
        if parts is None:
            print("error: --pool takes CLUSTER/NAMESPACE/NAME", file=err)
            return EXIT_USAGE
        key = "/".join(parts)
        if opts.namespace is not None and opts.namespace != parts[1]:
            print(f"error: --pool {key} is not in namespace {opts.namespace!r}", file=err)
            return EXIT_USAGE
    try:
        cluster = load_config(opts.kubeconfig, opts.context)
    except ConfigError as e:
        print(f"error: {e}", file=err)
        return EXIT_USAGE
    if opts.all_namespaces:
        ns: str | None = None
    elif key is not None:
        ns = key.split("/")[1]
    else:
        ns = opts.namespace or cluster.namespace or "default"
    mode = Mode.KARMADA if opts.karmada else Mode.MCS
    async with Client(cluster, user_agent=USER_AGENT) as client:
        try:
            slices, works, note = await read(client, mode, ns)
        except errors.ApiError as e:
            print(f"error: {_explain(e, 'EndpointSlices', ns)}", file=err)
            return EXIT_USAGE
    if note:
        print(note, file=err)
    found = find(slices, mode, works)
    if key is not None:
        found = narrowed(found, key)
    out.write(format_json(found) if opts.output == "json" else format_table(found))
    if key is None:
        return EXIT_OK
    pool = found.pool(key)
    if pool is None or not pool.live:
        why = "not found" if pool is None else "not live"
        print(f"pool {key} is {why}: the router does not use it", file=err)
        return EXIT_FAILURE
    return EXIT_OK
