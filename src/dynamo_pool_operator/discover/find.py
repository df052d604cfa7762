"""The pools of a consuming cluster as the Global Router finds them (pure: no I/O).

The router reads imported EndpointSlices only, never ServiceImports nor the exports'
status, so this reads nothing else either: what it shows is what the router would use.

- Standard MCS: a slice labelled `multicluster.kubernetes.io/service-name` is an
  import; `multicluster.kubernetes.io/source-cluster` says where it came from.
- Karmada: a slice on the control plane managed by Karmada's endpointslice controller,
  labelled `kubernetes.io/service-name: derived-<service>`; its cluster is the member of
  the Work's execution namespace (`work.karmada.io/namespace: karmada-es-<member>`).
- The pool key is (source cluster, namespace, DGD name), the DGD name being the relay
  Service's name without `-pool-relay`; a frontend is `<dgd>-frontend` from the same
  cluster and namespace. A pool is live while a relay endpoint is Ready (an endpoint
  without a `ready` condition counts as ready, as the EndpointSlice API defines it).

What the router would see but not use is `skipped`, with why. The Works (Karmada only)
never change which pools exist, since the router does not read them; they explain a
slice whose Work is gone, which Karmada can leave behind after a member fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from dynamo_pool_operator.api import names


class Mode(StrEnum):
    """Who imported the slices: a standard MCS implementation or Karmada."""

    MCS = "mcs"
    KARMADA = "karmada"


@dataclass(frozen=True, slots=True, order=True)
class Endpoint:
    address: str
    ready: bool

    def to_json(self) -> dict[str, Any]:
        return {"address": self.address, "ready": self.ready}


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


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def endpoints_of(slice_: Mapping[str, Any]) -> list[Endpoint]:
    """Each address of the slice with its readiness. `ready` unset means ready (the
    EndpointSlice API: "nil should be interpreted as true")."""
    out: list[Endpoint] = []
    for ep in slice_.get("endpoints") or ():
        if not isinstance(ep, Mapping):
            continue
        ready = _map(ep.get("conditions")).get("ready")
        for address in ep.get("addresses") or ():
            if isinstance(address, str) and address:
                out.append(Endpoint(address, ready is not False))
    return out


def is_import(slice_: Mapping[str, Any], mode: Mode) -> bool:
    """Whether the router would read this slice at all (its list selector)."""
    labels = _map(_map(slice_.get("metadata")).get("labels"))
    if mode is Mode.KARMADA:
        return labels.get(names.SLICE_MANAGED_BY) == names.KARMADA_SLICE_MANAGER
    return names.MCS_SERVICE_NAME in labels


def source_of(slice_: Mapping[str, Any], mode: Mode) -> tuple[str, str | None, str]:
    """(the imported Service's name, its source cluster or None, why there is none)."""
    meta = _map(slice_.get("metadata"))
    labels, annotations = _map(meta.get("labels")), _map(meta.get("annotations"))
    slice_name = _str(meta.get("name"))
    if mode is Mode.MCS:
        service = _str(labels.get(names.MCS_SERVICE_NAME))
        cluster = _str(labels.get(names.MCS_SOURCE_CLUSTER))
        if not cluster:
            return (
                service,
                None,
                f"EndpointSlice {slice_name} has no {names.MCS_SOURCE_CLUSTER} label: the "
                "router cannot tell which cluster it came from",
            )
        return service, cluster, ""
    label = _str(labels.get(names.SLICE_SERVICE_NAME))
    derived = names.karmada_derived_service(label)
    if derived is None:
        return (
            label,
            None,
            f"EndpointSlice {slice_name} is Karmada's but labelled "
            f"{names.SLICE_SERVICE_NAME}={label!r}, not {names.KARMADA_DERIVED_PREFIX}<service>",
        )
    space = _str(annotations.get(names.KARMADA_WORK_NAMESPACE))
    member = names.karmada_member(space)
    if member is None:
        return (
            derived,
            None,
            f"EndpointSlice {slice_name} has no {names.KARMADA_WORK_NAMESPACE} annotation "
            f"naming a {names.KARMADA_EXECUTION_SPACE_PREFIX}<member> namespace "
            f"({space or 'none'}): the router cannot tell which cluster it came from",
        )
    return derived, member, ""


def _work_of(slice_: Mapping[str, Any]) -> str:
    annotations = _map(_map(slice_.get("metadata")).get("annotations"))
    space = _str(annotations.get(names.KARMADA_WORK_NAMESPACE))
    name = _str(annotations.get(names.KARMADA_WORK_NAME))
    return f"{space}/{name}" if space and name else ""


def _live_works(works: Iterable[Mapping[str, Any]]) -> set[str]:
    out: set[str] = set()
    for work in works:
        meta = _map(work.get("metadata"))
        if not meta.get("deletionTimestamp"):
            out.add(f"{_str(meta.get('namespace'))}/{_str(meta.get('name'))}")
    return out


def find(
    slices: Iterable[Mapping[str, Any]],
    mode: Mode = Mode.MCS,
    works: Iterable[Mapping[str, Any]] | None = None,
) -> Discovered:
    """The pools the router would find in `slices`, and what it would skip.

    `works` (Karmada only; None when not read) adds a problem to a pool whose slices
    name a Work that is gone or going."""
    sources: dict[tuple[str, str, str], _Source] = {}
    skipped: set[Skipped] = set()
    for s in slices:
        if not is_import(s, mode):
            continue
        namespace = _str(_map(s.get("metadata")).get("namespace"))
        service, cluster, why = source_of(s, mode)
        if cluster is None:
            skipped.add(Skipped(namespace, service, why))
            continue
        source = sources.setdefault((cluster, namespace, service), _Source())
        for ep in endpoints_of(s):
            source.endpoints[ep.address] = source.endpoints.get(ep.address, False) or ep.ready
        if work := _work_of(s):
            source.works.add(work)

    relays: dict[tuple[str, str, str], str] = {}  # pool key -> relay Service
    frontends: dict[tuple[str, str, str], str] = {}  # pool key -> frontend Service
    for cluster, namespace, service in sources:
        if (dgd := names.pool_of(service)) is not None:
            relays[(cluster, namespace, dgd)] = service
        elif (dgd := names.pool_of_frontend(service)) is not None:
            frontends[(cluster, namespace, dgd)] = service
        else:
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

    live_works = _live_works(works) if works is not None else None
    pools: list[Pool] = []
    for key, relay_service in relays.items():
        cluster, namespace, dgd = key
        relay = sources[(cluster, namespace, relay_service)].imported(relay_service)
        imported: list[Imported] = []
        problems: list[str] = []
        if not relay.endpoints:
            problems.append(f"{relay_service} has no endpoints: not live")
        elif not relay.ready:
            n = len(relay.endpoints)
            problems.append(
                f"no ready relay endpoint ({n} endpoint{'' if n == 1 else 's'}, none Ready): "
                "not live"
            )
        frontend = frontends.get(key)
        if frontend is None:
            problems.append(
                f"no {names.frontend_service_name(dgd)} imported from cluster {cluster}: the "
                "router finds no frontend for this pool"
            )
        else:
            imported.append(sources[(cluster, namespace, frontend)].imported(frontend))
            if not imported[-1].ready:
                problems.append(f"frontend {frontend} has no ready endpoint")
        if live_works is not None:
            for service in (relay_service, *([frontend] if frontend else [])):
                for work in sorted(sources[(cluster, namespace, service)].works - live_works):
                    problems.append(
                        f"{service}: its Work {work} is gone or going, yet its slices stay "
                        "(Karmada keeps them after a member fails) and the router reads them"
                    )
        pool = Pool(cluster, namespace, dgd, relay, tuple(imported), tuple(problems))
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
