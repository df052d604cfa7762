"""The pools of a consuming cluster as the Global Router finds them (pure: no I/O).

The router reads imported EndpointSlices only, never ServiceImports nor the exports'
status, so only the slices make a pool live here: what it shows is what the router
would use.

- Standard MCS: a slice labelled `multicluster.kubernetes.io/service-name` is an
  import; `multicluster.kubernetes.io/source-cluster` says where it came from.
- Karmada: a slice on the control plane managed by Karmada's endpointslice controller,
  labelled `kubernetes.io/service-name: derived-<service>`; its cluster is the member of
  the Work's execution namespace (`work.karmada.io/namespace: karmada-es-<member>`).
  Karmada before v1.15.0 (v1.14.4, v1.13.7) sets no manager on them: `KARMADA_DERIVED`
  finds them by the `derived-` name alone, and says the router does not see them.
- Who wrote the slice: never Kubernetes' own EndpointSlice controllers, which copy any
  Service author's labels onto the slices they make (`mcs.KUBERNETES_SLICE_MANAGERS`);
  with an implementation named, only that implementation's manager.
- The pool key is (source cluster, namespace, DGD name), the DGD name being the relay
  Service's name without `-pool-relay`; a frontend is `<dgd>-frontend` from the same
  cluster and namespace. A pool is live while a relay endpoint is Ready (an endpoint
  without a `ready` condition counts as ready, as the EndpointSlice API defines it).

What the router would see but not use is `skipped`, with why. The Works (Karmada only)
and the ServiceImports (where they can be read) never make a pool live, since the router
reads neither; they explain. A slice whose Work is gone, which Karmada can leave behind
after a member fails; an import whose implementation says it writes no slices
(`status.endpointSliceObjects: Absent`), which the slices alone cannot show: its pool is
listed, not live, with that problem, so that the table and `--pool` name it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dynamo_pool_operator.api import mcs, names
from dynamo_pool_operator.discover.slices import (
    KARMADA_LABELLED_SINCE,
    NO_SLICES,
    Endpoint,
    Mode,
    absent_imports,
    as_map,
    as_str,
    endpoints_of,
    is_import,
    live_works,
    source_of,
    untrusted,
    work_of,
)

#: What the modules above read from here (the rules of one slice live in `slices`).
__all__ = ["Discovered", "Endpoint", "Imported", "Mode", "Pool", "Skipped", "endpoints_of", "find"]


@dataclass(frozen=True, slots=True)
class Imported:
    """One imported Service of one source cluster: its endpoints, over all its slices."""

    service: str
    endpoints: tuple[Endpoint, ...] = ()

    @property
    def ready(self) -> tuple[Endpoint, ...]:
        return tuple(e for e in self.endpoints if e.ready)

    def to_json(self) -> dict[str, Any]:
        return {"service": self.service, "endpoints": [e.to_json() for e in self.endpoints]}


@dataclass(frozen=True, slots=True)
class Pool:
    """A pool as the router keys it, with what it would use of it."""

    cluster: str
    namespace: str
    name: str
    relay: Imported
    frontends: tuple[Imported, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.cluster}/{self.namespace}/{self.name}"

    @property
    def live(self) -> bool:
        """The router's rule: live while a relay endpoint is Ready."""
        return bool(self.relay.ready)

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "namespace": self.namespace,
            "name": self.name,
            "live": self.live,
            "relay": self.relay.to_json(),
            "frontends": [f.to_json() for f in self.frontends],
            "problems": list(self.problems),
        }


@dataclass(frozen=True, slots=True, order=True)
class Skipped:
    """Something the router sees but would not use as (part of) a pool, and why."""

    namespace: str
    service: str
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "service": self.service, "why": self.why}


@dataclass(frozen=True, slots=True)
class Discovered:
    pools: tuple[Pool, ...] = ()
    skipped: tuple[Skipped, ...] = ()

    def pool(self, key: str) -> Pool | None:
        return next((p for p in self.pools if p.key == key), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "pools": [p.to_json() for p in self.pools],
            "skipped": [s.to_json() for s in self.skipped],
        }


@dataclass
class _Source:
    """The slices of one (cluster, namespace, service)."""

    endpoints: dict[str, bool] = field(default_factory=dict)
    #: Karmada: the Works these slices came from, as `namespace/name`.
    works: set[str] = field(default_factory=set)

    def imported(self, service: str) -> Imported:
        return Imported(service, tuple(sorted(Endpoint(a, r) for a, r in self.endpoints.items())))


def _misnamed_frontends(
    unnamed: Iterable[tuple[str, str, str]], pools: Iterable[tuple[str, str, str]]
) -> dict[tuple[str, str, str], list[str]]:
    """Pool key -> the imported Services of its cluster and namespace named `<dgd>-...`
    that are neither its relay nor `<dgd>-frontend`: the operator exports only a pool's
    relay and frontends, so each is likely a frontend the router will not find. A name
    belongs to the longest pool name it starts with (`llama-big-api` to `llama-big`)."""
    by_place: dict[tuple[str, str], list[str]] = {}
    for cluster, namespace, dgd in pools:
        by_place.setdefault((cluster, namespace), []).append(dgd)
    out: dict[tuple[str, str, str], list[str]] = {}
    for cluster, namespace, service in sorted(unnamed):
        owners = [d for d in by_place.get((cluster, namespace), ()) if service.startswith(d + "-")]
        if owners:
            out.setdefault((cluster, namespace, max(owners, key=len)), []).append(service)
    return out


def _relay_problems(relay: Imported, absent: bool) -> list[str]:
    if absent:
        return [f"{relay.service}: {NO_SLICES}"]
    if not relay.endpoints:
        return [f"{relay.service} has no endpoints: not live"]
    if not relay.ready:
        n = len(relay.endpoints)
        return [
            f"no ready relay endpoint ({n} endpoint{'' if n == 1 else 's'}, none Ready): not live"
        ]
    return []


def _frontend_problems(
    cluster: str, dgd: str, frontend: Imported | None, absent: bool, misnamed: Iterable[str]
) -> list[str]:
    wanted = names.frontend_service_name(dgd)
    problems: list[str] = []
    if absent:
        problems.append(f"{wanted}: {NO_SLICES}")
    elif frontend is None:
        problems.append(
            f"no {wanted} imported from cluster {cluster}: the router finds no frontend for "
            "this pool"
        )
    elif not frontend.ready:
        problems.append(f"frontend {frontend.service} has no ready endpoint")
    problems += [
        f"{service} is imported from cluster {cluster} beside this pool but is not named "
        f"{wanted}: if it is the pool's frontend, the router will not find it (it finds a "
        f"frontend by the {names.FRONTEND_SUFFIX} suffix: name the DGD's frontend component "
        "Frontend)"
        for service in misnamed
    ]
    return problems


#: A pool found on Karmada's older slices, which the router does not list.
DERIVED_ONLY = (
    f"found by {names.SLICE_SERVICE_NAME}={names.KARMADA_DERIVED_PREFIX}<service> alone: its "
    f"slices carry no {names.SLICE_MANAGED_BY}={names.KARMADA_SLICE_MANAGER}, which the "
    f"router selects on (Karmada sets it from {KARMADA_LABELLED_SINCE}): the router does not "
    "see this pool until Karmada is upgraded"
)


def _gather(
    slices: Iterable[Mapping[str, Any]],
    mode: Mode,
    implementation: mcs.Importer | None,
    skipped: set[Skipped],
) -> dict[tuple[str, str, str], _Source]:
    """The slices the router would take, by (cluster, namespace, Service); the others
    into `skipped`, with why."""
    sources: dict[tuple[str, str, str], _Source] = {}
    for s in slices:
        if not is_import(s, mode):
            continue
        namespace = as_str(as_map(s.get("metadata")).get("namespace"))
        service, cluster, why = source_of(s, mode)
        if not why:
            why = untrusted(s, mode, implementation)
        if cluster is None or why:
            skipped.add(Skipped(namespace, service, why))
            continue
        source = sources.setdefault((cluster, namespace, service), _Source())
        for ep in endpoints_of(s):
            source.endpoints[ep.address] = source.endpoints.get(ep.address, False) or ep.ready
        if work := work_of(s):
            source.works.add(work)
    return sources


def find(
    slices: Iterable[Mapping[str, Any]],
    mode: Mode = Mode.MCS,
    works: Iterable[Mapping[str, Any]] | None = None,
    *,
    imports: Iterable[Mapping[str, Any]] | None = None,
    implementation: mcs.Importer | None = None,
) -> Discovered:
    """The pools the router would find in `slices`, and what it would skip.

    `works` (Karmada only; None when not read) adds a problem to a pool whose slices
    name a Work that is gone or going. `imports` (the ServiceImports; None when not
    read) adds one to a pool whose relay or frontend import has no slices, by the
    implementation's own word. `implementation` takes only the slices it manages."""
    skipped: set[Skipped] = set()
    sources = _gather(slices, mode, implementation, skipped)

    absent = absent_imports(imports) if imports is not None else {}
    for (namespace, service), clusters in absent.items():
        if names.pool_of(service) is None:
            continue  # a frontend's is said on its pool; any other is no pool's
        if not clusters:
            why = f"{NO_SLICES}, and it names no exporting cluster, so there is no pool key"
            skipped.add(Skipped(namespace, service, why))
        for cluster in clusters:
            sources.setdefault((cluster, namespace, service), _Source())

    relays: dict[tuple[str, str, str], str] = {}  # pool key -> relay Service
    frontends: dict[tuple[str, str, str], str] = {}  # pool key -> frontend Service
    unnamed: list[tuple[str, str, str]] = []  # neither a relay nor a frontend by name
    for cluster, namespace, service in sources:
        if (dgd := names.pool_of(service)) is not None:
            relays[(cluster, namespace, dgd)] = service
        elif (dgd := names.pool_of_frontend(service)) is not None:
            frontends[(cluster, namespace, dgd)] = service
        else:
            unnamed.append((cluster, namespace, service))
            skipped.add(
                Skipped(
                    namespace,
                    service,
                    f"not a pool's Service: the name ends in neither {names.RELAY_SUFFIX} nor "
                    f"{names.FRONTEND_SUFFIX}",
                )
            )
    for key, service in frontends.items():
        if key not in relays:
            cluster, namespace, dgd = key
            skipped.add(
                Skipped(
                    namespace,
                    service,
                    f"a frontend without a relay: no {names.relay_name(dgd)} imported from "
                    f"cluster {cluster} (the router finds a pool by its relay)",
                )
            )

    misnamed = _misnamed_frontends(unnamed, relays)
    standing = live_works(works) if works is not None else None
    pools: list[Pool] = []
    for key, relay_service in relays.items():
        cluster, namespace, dgd = key
        relay = sources[(cluster, namespace, relay_service)].imported(relay_service)
        frontend_service = frontends.get(key)
        frontend = (
            sources[(cluster, namespace, frontend_service)].imported(frontend_service)
            if frontend_service is not None
            else None
        )
        problems = _relay_problems(relay, (namespace, relay_service) in absent)
        problems += _frontend_problems(
            cluster,
            dgd,
            frontend,
            (namespace, names.frontend_service_name(dgd)) in absent,
            misnamed.get(key, ()),
        )
        if standing is not None:
            for imported in (relay, *([frontend] if frontend else [])):
                gone = sources[(cluster, namespace, imported.service)].works - standing
                problems += [
                    f"{imported.service}: its Work {work} is gone or going, yet its slices "
                    "stay (Karmada keeps them after a member fails) and the router reads them"
                    for work in sorted(gone)
                ]
        if mode is Mode.KARMADA_DERIVED:
            problems.append(DERIVED_ONLY)
        frontends_used = (frontend,) if frontend is not None else ()
        pool = Pool(cluster, namespace, dgd, relay, frontends_used, tuple(problems))
        if not pool.live:
            skipped.add(
                Skipped(
                    namespace,
                    relay_service,
                    f"no ready relay endpoint: pool {pool.key} is not live",
                )
            )
        pools.append(pool)
    pools.sort(key=lambda p: (p.cluster, p.namespace, p.name))
    return Discovered(tuple(pools), tuple(sorted(skipped)))
