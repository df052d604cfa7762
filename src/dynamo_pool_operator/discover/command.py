"""`dynamo-pool-operator discover`: the pools of a consuming cluster, as the router sees them.

The relay's `Ready` says what the MCS implementation reported on the exports; the
Global Router reads neither. This reads what it reads, the imported EndpointSlices (and,
only to explain, the ServiceImports and, with Karmada, the Works), and never writes: the
RBAC it needs is `list` on `endpointslices.discovery.k8s.io` (and on
`serviceimports.multicluster.x-k8s.io`, and `works.work.karmada.io` with `--karmada`,
without which it says what it cannot point out).

`--implementation` names who writes the imports: only slices carrying that
implementation's manager are taken (`mcs.Importer`). The operator's configuration does
not say it (`mcs` covers every standard implementation), and `discover` runs in the
consuming cluster, where the operator may not be: the option is the only source.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from dynamo_pool_operator.api.mcs import Importer
from dynamo_pool_operator.discover.find import Mode, Pool
from dynamo_pool_operator.discover.slices import KARMADA_LABELLED_SINCE
from dynamo_pool_operator.discover.view import explain, format_json, format_table, narrowed, read
from dynamo_pool_operator.exitcodes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from dynamo_pool_operator.runtime import Client, ConfigError, errors, load_config

USER_AGENT = "dynamo-pool-operator-discover"


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
    #: An `Importer` value: take only the slices that implementation manages.
    implementation: str | None = None


def importer(opts: Options) -> tuple[Importer | None, str]:
    """The implementation named, or why the options do not name one that fits."""
    if opts.implementation is None:
        return None, ""
    try:
        named = Importer(opts.implementation)
    except ValueError:
        known = ", ".join(i.value for i in Importer)
        return None, f"--implementation takes one of {known}, not {opts.implementation!r}"
    if opts.karmada and named is not Importer.KARMADA:
        return None, (
            f"--implementation {named.value} is a standard MCS implementation and --karmada "
            "reads a Karmada control plane: drop one"
        )
    return named, ""


def parse_pool(value: str) -> tuple[str, str, str] | None:
    """`CLUSTER/NAMESPACE/NAME` split, or None when it is not three non-empty parts."""
    parts = value.split("/")
    if len(parts) != 3 or not all(parts):
        return None
    return parts[0], parts[1], parts[2]


def not_found(key: str, pools: Sequence[Pool], *, all_namespaces: bool) -> str:
    """Why `--pool KEY` is not found, naming the pools that are: most often the cluster
    part is not the name the import gives the exporting cluster."""
    _, namespace, name = key.split("/")
    elsewhere = sorted(p.cluster for p in pools if (p.namespace, p.name) == (namespace, name))
    if elsewhere:
        return (
            f"pool {key} is not found: {namespace}/{name} is imported from "
            f"{', '.join(elsewhere)} (a pool's cluster is the exporting cluster's name, as "
            f"its imports say it): try --pool {elsewhere[0]}/{namespace}/{name}"
        )
    where = "here" if all_namespaces else f"in namespace {namespace}"
    if not pools:
        return f"pool {key} is not found: no pool is imported {where}"
    shown = ", ".join(f"{p.key} ({'live' if p.live else 'not live'})" for p in pools)
    return f"pool {key} is not found; the pools imported {where} are {shown}"


async def run(opts: Options, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Print the pools; 0 when the cluster could be read, 1 when it could not or
    `opts.pool` is not live, 2 on a usage error (exitcodes.py)."""
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
    implementation, why = importer(opts)
    if why:
        print(f"error: {why}", file=err)
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
    karmada = opts.karmada or implementation is Importer.KARMADA
    mode = Mode.KARMADA if karmada else Mode.MCS
    async with Client(cluster, user_agent=USER_AGENT) as client:
        try:
            reading = await read(client, mode, ns, strict=implementation is not None)
        except errors.ConnectionFailed as e:
            print(e, file=err)  # as kubectl says it
            return EXIT_FAILURE
        except errors.ApiError as e:
            print(f"error: {explain(e, 'EndpointSlices', ns)}", file=err)
            return EXIT_FAILURE
    for note in reading.notes:
        print(note, file=err)
    everything = reading.find(implementation)
    found = everything if key is None else narrowed(everything, key)
    if opts.output == "json":
        out.write(format_json(found))
    else:
        out.write(format_table(found, empty=f"No pool {key}." if key else None))
    if key is None:
        return EXIT_OK
    pool = found.pool(key)
    if pool is None:
        print(not_found(key, everything.pools, all_namespaces=opts.all_namespaces), file=err)
        return EXIT_FAILURE
    if not pool.live:
        print(f"pool {key} is not live: the router does not use it", file=err)
        return EXIT_FAILURE
    if reading.mode is Mode.KARMADA_DERIVED:
        print(
            f"pool {key} is found by its derived-<service> name alone: the router does not "
            f"see it until Karmada is upgraded ({KARMADA_LABELLED_SINCE} or later)",
            file=err,
        )
        return EXIT_FAILURE
    return EXIT_OK
