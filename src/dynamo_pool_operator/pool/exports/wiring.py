"""What wakes the relay controller about exports (only with an MCS implementation).

- ServiceExports: a creation, deletion or change of what we own requeues the relay
  that controls it and every relay whose pool exports a Service of that name (an index
  from frontend Service name to DGD makes that a lookup).
- The ClusterProperty `cluster.clusterset.k8s.io`: any change requeues every relay at
  low priority, so a user's change meanwhile is not served after all of them.
- DynamoComponentDeployments, as stubs, mapped to the relay of their controlling DGD
  before and after the change: a frontend's Service a DCD controls is the pool's while
  that DCD is the DGD's.

Which exist when follows the served APIs (`pool/exports/apis.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from dynamo_pool_operator.api import crd, names
from dynamo_pool_operator.api.dgd import DCD_KIND, DCD_PLURAL, pools_naming_service
from dynamo_pool_operator.api.dgd import GROUP as DGD_GROUP
from dynamo_pool_operator.api.dgd import KIND as DGD_KIND
from dynamo_pool_operator.pool.exports.verdict import view_of
from dynamo_pool_operator.runtime import (
    EventType,
    Informer,
    Obj,
    Request,
    SharedInformers,
    for_cache,
)
from dynamo_pool_operator.runtime.objects import (
    Meta,
    Resource,
    controller_is,
    controller_of,
    identity_stub,
)


def is_relay_controller(ref: Any) -> bool:
    """The reference names a DynamoPoolRelay (any version of our group)."""
    return controller_is(ref, crd.GROUP, crd.KIND)


def export_mapper(dgds: Callable[[], Informer]) -> Any:
    """`dgds` gives the DGD cache in effect at each event (it follows its API's version)."""

    def relays_for(export: Obj) -> Iterable[Request]:
        meta = Meta(export)
        ns, name = meta.namespace, meta.name
        keys: set[Request] = set()
        ref = meta.controller
        if ref is not None and is_relay_controller(ref):
            keys.add((ns, str(ref.get("name", ""))))
        pool = names.pool_of(name)
        if pool is not None:
            keys.add((ns, pool))
        store = dgds().store
        keys.update((ns, dgd) for dgd in pools_naming_service(name, lambda d: store.get(ns, d)))
        return keys

    return relays_for


def export_changed(etype: EventType, old: Obj | None, new: Obj | None) -> bool:
    """Creates and deletes; changes of our metadata, or of the spec while the export has a
    controller; and of what the MCS implementation says of it (Valid, Ready, Conflict)."""
    if etype is not EventType.MODIFIED:
        return True
    a, b = Meta(old), Meta(new)
    if a.controller is None and b.controller is None:
        return False
    if (a.labels, a.owner_references, a.terminating) != (
        b.labels,
        b.owner_references,
        b.terminating,
    ):
        return True
    if (old or {}).get("spec") != (new or {}).get("spec"):
        return True  # what it carries for its imports (`exportedAnnotations`, ...)
    return view_of(old or {}) != view_of(new or {})


def all_relays(relays: Informer) -> Any:
    def every(_: Obj) -> Iterable[Request]:
        return list(relays.store.keys())

    return every


def dcd_resource(version: str) -> Resource:
    return Resource(DGD_GROUP, version, DCD_PLURAL, DCD_KIND)


def dcd_cache(informers: SharedInformers, *, namespace: str | None, version: str) -> Informer:
    """The DynamoComponentDeployments at `version`, as stubs (`identity_stub`)."""
    return informers.get(dcd_resource(version), namespace, transform=for_cache(identity_stub))


def relay_of_controller(obj: Obj) -> Iterable[Request]:
    """A DCD -> the relay of the DGD that controls it (none without one)."""
    ref = controller_of(obj)
    if not controller_is(ref, DGD_GROUP, DGD_KIND) or ref is None:
        return []
    return [(Meta(obj).namespace, str(ref.get("name", "")))]
