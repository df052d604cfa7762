"""Wiring of the DynamoPoolRelay controller: which caches it reads and what wakes it.

- Relays and DGDs, ignoring status-only updates (ours would loop; Dynamo writes DGD
  status constantly); a DGD maps to the relay of its name.
- Our relay Deployments (and Services, with exports off) by label selector
  (decision 0006), so the operator never holds other workloads' pod templates. An
  object of our name the selector hides is found by the create's 409.
- With exports on, every Service (others as small stubs), mapped to each relay whose
  DGD names it as a frontend's: whose Service of that name exists decides the export,
  and neither a name filter (a Service made before its DGD) nor a selector (a
  foreign, unlabelled one would be exported) can see that. DCDs are the export
  feature's own watch (`pool/exports/apis.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dynamo_pool_operator.api import crd, names
from dynamo_pool_operator.api.dgd import GROUP as DGD_GROUP
from dynamo_pool_operator.api.dgd import KIND as DGD_KIND
from dynamo_pool_operator.api.dgd import PLURAL as DGD_PLURAL
from dynamo_pool_operator.api.dgd import (
    pools_naming_service,
)
from dynamo_pool_operator.api.shown import ShownStatus
from dynamo_pool_operator.pool.reconciler import RelayCaches
from dynamo_pool_operator.pool.relay.kinds import BY_KIND, RELAY_KINDS, OwnedKind, shape
from dynamo_pool_operator.runtime import (
    Alike,
    Controller,
    EventType,
    Informer,
    MapFunc,
    Obj,
    Request,
    SharedInformers,
    VocabularyPath,
    for_cache,
    spec_or_metadata_changed,
)
from dynamo_pool_operator.runtime.objects import (
    VIEW,
    Meta,
    Resource,
    identity_stub,
    summarize_managed_fields,
)

CONTROLLER_NAME = "dynamopoolrelay"

RELAYS = crd.RELAYS

#: The DGDs' own: component names and types (`spec.components` of v1beta1, the
#: component types of v1alpha1's `spec.services`, whose names are keys).
DGD_VOCABULARY: frozenset[VocabularyPath] = frozenset(
    {
        ("spec", "components", "*", "name"),
        ("spec", "components", "*", "type"),
        ("spec", "services", "*", "componentType"),
        ("spec", "services", "*", "subComponentType"),
    }
)


#: Each relay's and DGD's `spec` as cached (the DGD's as `_keep_dgd_fields` keeps it):
#: a fleet's pools are made from few templates, so one copy of each distinct spec.
RELAY_SHARED: frozenset[VocabularyPath] = frozenset({("spec",)})
DGD_SHARED: frozenset[VocabularyPath] = frozenset({("spec",)})
#: Of a relay object, what its trim keeps of the spec (a replica count, a headless
#: Service's `clusterIP`) and of the status: alike for most pools.
RELAY_OBJECT_SHARED: frozenset[VocabularyPath] = frozenset({("spec",), ("status",)})


def dgd_resource(version: str) -> Resource:
    return Resource(DGD_GROUP, version, DGD_PLURAL, DGD_KIND)


#: The labels only our relay objects carry (`names.owned_object_labels`): the relay
#: objects' caches list and watch by them.
RELAY_OBJECT_SELECTOR = ",".join(
    f"{k}={v}"
    for k, v in (
        (names.APP_MANAGED_BY, names.MANAGED_BY),
        (names.APP_COMPONENT, names.RELAY_COMPONENT),
    )
)


def same_name(obj: Obj) -> Iterable[Request]:
    meta = Meta(obj)
    return [(meta.namespace, meta.name)]


def relay_of_object(obj: Obj) -> Iterable[Request]:
    """`<D>-pool-relay` -> relay D in the same namespace; other names map to nothing."""
    meta = Meta(obj)
    pool = names.pool_of(meta.name)
    return [] if pool is None else [(meta.namespace, pool)]


def is_relay_object(obj: Obj) -> bool:
    """Only objects named `<D>-pool-relay` concern us (ours, or a conflicting one)."""
    return bool(relay_of_object(obj))


#: A creation time no pass reads: a relay's, a DGD's, a relay Deployment's (a relay
#: Service's ends a hold, `exports/plan.py`; an export's a grace, `exports/verdict.py`).
_UNREAD_METADATA = "creationTimestamp"


def _drop_unread_metadata(obj: Obj) -> None:
    meta = obj.get("metadata")
    if type(meta) is dict:
        meta.pop(_UNREAD_METADATA, None)


#: Words and conditions a fleet's relays show alike, held once (a cold start stamps the
#: same second on many; ~650 bytes a relay at 10,000). Emptied when full.
_SHOWN_ALIKE: Alike[Any] = Alike(4096, renew=True)


def keep_relay_fields(obj: Obj) -> Obj:
    """An informer transform: a relay's status as the passes and the metrics read it
    (`api.shown.ShownStatus`), not its messages and views (most of a cached relay)."""
    if "status" in obj:
        obj["status"] = ShownStatus.read(obj["status"], _SHOWN_ALIKE)
    _drop_unread_metadata(obj)
    return obj


def _keep_dgd_fields(obj: Obj) -> Obj:
    """Cache only what the pool read-model reads: DGD pod templates can be large."""
    spec = obj.get("spec") or {}
    slim_spec: dict[str, Any] = {}
    components = spec.get("components")
    if isinstance(components, list):
        slim_spec["components"] = [
            {k: c[k] for k in ("name", "type", "globalDynamoNamespace") if k in c}
            for c in components
            if isinstance(c, dict)
        ]
    services = spec.get("services")
    if isinstance(services, dict):
        slim_spec["services"] = {
            n: {
                k: s[k]
                for k in ("componentType", "subComponentType", "globalDynamoNamespace")
                if k in s
            }
            for n, s in services.items()
            if isinstance(s, dict)
        }
    _drop_unread_metadata(obj)
    return {"apiVersion": obj.get("apiVersion"), "metadata": obj.get("metadata"), "spec": slim_spec}


#: Kept of a relay object's metadata: what the checks, guarded writes, status and
#: hand-over read; the rest we render is in the view's digest.
_RELAY_OBJECT_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "finalizers",
    "ownerReferences",
    "managedFields",
)
#: What is kept of each condition a relay object's cache keeps.
_CONDITION_FIELDS = ("type", "status", "reason", "message")


def _trimmed_metadata(meta: Mapping[str, Any], drop: str | None = None) -> dict[str, Any]:
    return {k: meta[k] for k in _RELAY_OBJECT_METADATA if k in meta and k != drop}


@dataclass(frozen=True, slots=True)
class Trim:
    """An informer transform for the relay objects of one kind: of `<D>-pool-relay`, what
    the reconciler reads and a view of what we render (a Deployment: ~13 kB of Python
    objects, ~3 kB kept); of any other object of a kind whose cache holds them all (the
    frontends' Services), its `identity_stub`. A value: equal for one kind."""

    kind: str

    def __call__(self, obj: Obj) -> Obj:
        entry = BY_KIND[self.kind]
        if entry.frontends and not is_relay_object(obj):
            return identity_stub(obj)
        summarize_managed_fields(obj)
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        kept: dict[str, Any] = {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "metadata": _trimmed_metadata(
                meta, drop=None if entry.creation_read else _UNREAD_METADATA
            ),
        }
        kept_spec = {k: spec[k] for k in entry.spec_kept if k in spec}
        if kept_spec:  # an empty map is 64 bytes for nothing (a budget keeps no spec)
            kept["spec"] = kept_spec
        if entry.status_kept or entry.conditions_kept:
            status = obj.get("status") or {}
            kept_status = {k: status[k] for k in entry.status_kept if k in status}
            conditions = status.get("conditions")
            if entry.conditions_kept and isinstance(conditions, list):
                kept_status["conditions"] = [
                    {k: c[k] for k in _CONDITION_FIELDS if k in c}
                    for c in conditions
                    if isinstance(c, Mapping) and c.get("type") in entry.conditions_kept
                ]
            if kept_status:
                kept["status"] = kept_status
        kept[VIEW] = shape(self.kind).view(obj)
        return kept


def dgd_cache(informers: SharedInformers, *, namespace: str | None, version: str) -> Informer:
    """The DGD informer at `version` (at start, and when the DGD API moves to another)."""
    return informers.get(
        dgd_resource(version),
        namespace,
        transform=for_cache(_keep_dgd_fields, vocabulary=DGD_VOCABULARY, shared=DGD_SHARED),
    )


def relay_caches(
    informers: SharedInformers,
    *,
    namespace: str | None,
    dgd_version: str,
    frontends: bool = False,
) -> RelayCaches:
    """Ask the shared factory for the informers this controller reads. `frontends`
    (exports on): every Service is cached, any other than the relay's as a stub."""
    return RelayCaches(
        relays=informers.get(
            RELAYS, namespace, transform=for_cache(keep_relay_fields, shared=RELAY_SHARED)
        ),
        dgds=dgd_cache(informers, namespace=namespace, version=dgd_version),
        objects={
            kind.kind: _objects(informers, kind, namespace, frontends) for kind in RELAY_KINDS
        },
    )


def _objects(
    informers: SharedInformers, kind: OwnedKind, namespace: str | None, frontends: bool
) -> Informer:
    """The cache of one kind of relay object: by our labels (`RELAY_OBJECT_SELECTOR`),
    or, for the kind that holds the frontends' Services while exports are on, every one."""
    every = frontends and kind.frontends
    return informers.get(
        kind.resource,
        namespace,
        label_selector=None if every else RELAY_OBJECT_SELECTOR,
        keep=None if every else is_relay_object,
        # Who wrote the relay objects how (not the field sets): kept by the trim, so an
        # object whose create was never handed over to the apply manager shows there.
        transform=for_cache(Trim(kind.kind), managed_fields=True, shared=RELAY_OBJECT_SHARED),
    )


def _view(obj: Obj | None) -> Any:
    return (obj or {}).get(VIEW)


def relay_object_changed(etype: EventType, old: Obj | None, new: Obj | None) -> bool:
    """A change of a relay object's spec or metadata, as far as the cache keeps them:
    what the reconciler reads, and the fields we render (their view)."""
    return spec_or_metadata_changed(etype, old, new) or _view(old) != _view(new)


def status_changed(etype: EventType, old: Obj | None, new: Obj | None) -> bool:
    """A change of a relay object's spec or metadata, or of the status its cache keeps
    (the Deployment's availability); other status writes are dropped by the trim."""
    return relay_object_changed(etype, old, new) or (old or {}).get("status") != (new or {}).get(
        "status"
    )


def relays_naming_service(caches: RelayCaches) -> MapFunc:
    """A Service -> its relay if it is named `<D>-pool-relay`, and each relay whose DGD
    (in the DGD cache in effect) names it as a frontend's Service (`pools_naming_service`)."""

    def relays(obj: Obj) -> Iterable[Request]:
        meta = Meta(obj)
        ns, store = meta.namespace, caches.dgds.store
        found = pools_naming_service(meta.name, lambda dgd: store.get(ns, dgd))
        return [*relay_of_object(obj), *((ns, dgd) for dgd in found)]

    return relays


def watch_dgds(controller: Controller, dgds: Informer) -> None:
    """The DGD watch (at start, and on the new cache when the DGD API moves)."""
    controller.watches(dgds, same_name, spec_or_metadata_changed)


def wire(controller: Controller, caches: RelayCaches) -> Controller:
    """Declare the controller's watches."""
    controller.for_(caches.relays, spec_or_metadata_changed)
    watch_dgds(controller, caches.dgds)
    for kind in RELAY_KINDS:
        controller.watches(
            caches.of_kind(kind.kind),
            relays_naming_service(caches) if kind.frontends else relay_of_object,
            status_changed if kind.status_wakes else relay_object_changed,
        )
    return controller
