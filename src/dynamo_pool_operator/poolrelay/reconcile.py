"""The DynamoPoolRelay reconciler: the effectful shell around `decide` and `render`.

One pass, always in this order (SPEC §3, §4.7):

1. read the relay, its DGD and the objects named `<D>-pool-relay` from caches;
2. `decide` publish or withdraw;
3. publish: server-side apply of the Deployment and Service, only when the cache
   shows they would change; withdraw: delete only the objects this relay
   controls, with uid + resourceVersion preconditions;
4. the export step, whatever step 3's writes did (a failed relay write must not
   hold back withdrawing exports, and vice versa);
5. the status, written only when it changes;
6. any failed write is raised, so the queue retries the key with backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..api import names
from ..api.dgd import Pool, pool_from_object
from ..api.relay import Relay, RelayDefaults, relay_from_object
from ..runtime import errors
from ..runtime.client import Client
from ..runtime.clock import Clock, SystemClock
from ..runtime.controller import Request, Result
from ..runtime.diff import needs_apply
from ..runtime.handover import HandoverLost, hand_over, needs_handover
from ..runtime.informer import Informer
from ..runtime.resources import DEPLOYMENTS, SERVICES, Resource
from . import render
from .decide import Decision, controlled_by, decide
from .status import ExportStatus, desired_status, status_apply, status_changed

log = logging.getLogger(__name__)

FIELD_MANAGER = "dynamo-pool-operator"
RELAY_OBJECTS: tuple[tuple[str, Resource], ...] = (
    ("Deployment", DEPLOYMENTS),
    ("Service", SERVICES),
)


@dataclass
class ExportOutcome:
    """What the export step reports back: status lines, the effective cluster ID, and
    the writes that failed (raised after the status is written)."""

    exports: list[ExportStatus] = field(default_factory=list)
    cluster_id: str | None = None
    errors: list[Exception] = field(default_factory=list)


class ExportStep(Protocol):
    """The seam for pool exports (SPEC §4): called after the relay is rendered."""

    async def reconcile(
        self, relay: Relay, pool: Pool | None, decision: Decision
    ) -> ExportOutcome: ...

    def forget(self, request: Request) -> None:
        """The relay is gone (its exports go with it by garbage collection)."""


@dataclass
class RelayCaches:
    """The informers the reconciler reads (never the API server)."""

    relays: Informer
    dgds: Informer
    deployments: Informer
    services: Informer

    def relay_objects(self, namespace: str, relay: str) -> dict[str, Mapping[str, Any] | None]:
        name = names.relay_name(relay)
        return {
            "Deployment": self.deployments.store.get(namespace, name),
            "Service": self.services.store.get(namespace, name),
        }


class ReconcileErrors(Exception):
    """Several writes failed in one pass; each is named."""

    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        super().__init__("; ".join(str(e) for e in failures))


class PoolRelayReconciler:
    def __init__(
        self,
        client: Client,
        caches: RelayCaches,
        *,
        defaults: RelayDefaults,
        default_discovery_backend: str,
        exports: ExportStep | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.caches = caches
        self.defaults = defaults
        self.default_discovery_backend = default_discovery_backend
        self.exports = exports
        self.clock = clock or SystemClock()
        # Our last status write per relay: (uid, resourceVersion it was computed from,
        # status written). The relay cache may not hold that write yet when the next
        # pass runs; comparing with the stale cached status would then skip a needed
        # write (found by the guard-breaking pass: a status line stayed wrong).
        self._written: dict[Request, tuple[str, str, Mapping[str, Any]]] = {}

    async def reconcile(self, request: Request) -> Result | None:
        namespace, name = request
        relay_obj = self.caches.relays.store.get(namespace, name)
        if relay_obj is None:
            self._written.pop(request, None)
            if self.exports is not None:
                self.exports.forget(request)
            return None  # deleted: the garbage collector removes what it controlled
        relay = relay_from_object(relay_obj, self.defaults)
        if relay.terminating:
            return None
        dgd_obj = self.caches.dgds.store.get(namespace, name)
        pool = pool_from_object(dgd_obj) if dgd_obj is not None else None
        objects = self.caches.relay_objects(namespace, name)
        decision = decide(
            relay, pool, objects, default_discovery_backend=self.default_discovery_backend
        )
        log.debug(
            "decided %s",
            decision.reason.value,
            extra={"namespace": namespace, "object": name, "reason": decision.reason.value},
        )
        failures: list[Exception] = []
        if decision.publish:
            assert pool is not None
            await self._publish(relay, pool, objects, failures)
        elif names.is_valid_service_name(names.relay_name(name)):
            await self._withdraw(relay, objects, failures)

        outcome = ExportOutcome()
        if self.exports is not None:
            outcome = await self.exports.reconcile(relay, pool, decision)
            failures.extend(outcome.errors)

        current = self._shown_status(request, relay_obj)
        status = desired_status(
            relay,
            current if isinstance(current, Mapping) else None,
            decision,
            cluster_id=outcome.cluster_id if outcome.cluster_id is not None else relay.cluster_id,
            exports=outcome.exports,
            now=self.clock.now(),
        )
        if status_changed(current if isinstance(current, Mapping) else None, status):
            try:
                await self.client.apply(
                    self.caches.relays.resource,
                    status_apply(relay, status),
                    field_manager=FIELD_MANAGER,
                    force=True,
                    subresource="status",
                )
            except errors.ApiError as e:
                self._written.pop(request, None)  # unknown what the server shows now
                failures.append(e)
            else:
                read_at = str(relay_obj.get("metadata", {}).get("resourceVersion", ""))
                self._written[request] = (relay.uid, read_at, status)
        if failures:
            raise failures[0] if len(failures) == 1 else ReconcileErrors(failures)
        return None

    def _shown_status(self, request: Request, relay_obj: Mapping[str, Any]) -> Any:
        """The status the server shows: the cached one, unless the cache still holds the
        very version our last status write was computed from (then: what we wrote)."""
        cached = relay_obj.get("status")
        last = self._written.get(request)
        meta = relay_obj.get("metadata", {})
        read = (meta.get("uid"), meta.get("resourceVersion"))
        if last is not None and (last[0], last[1]) == read:
            return last[2]
        return cached

    async def _publish(
        self,
        relay: Relay,
        pool: Pool,
        objects: Mapping[str, Mapping[str, Any] | None],
        failures: list[Exception],
    ) -> None:
        desired = {"Deployment": render.deployment(relay, pool), "Service": render.service(relay)}
        for kind, res in RELAY_OBJECTS:
            try:
                await self._ensure(relay, res, objects[kind], desired[kind])
            except errors.ApiError as e:
                failures.append(e)

    async def _ensure(
        self, relay: Relay, res: Resource, live: Mapping[str, Any] | None, desired: dict[str, Any]
    ) -> None:
        """Create exclusively, or apply guarded by the uid and resourceVersion read.

        Never an unguarded apply: an apply is an upsert, and between our cache read
        and the write someone may have created (or taken over) an object of this
        name. The create fails with AlreadyExists then (a stale cache: the watch
        brings the object and the next pass decides again), and a guarded apply
        fails with Conflict if the object changed since we checked its controller.
        A create's fields are handed over to the apply manager at once
        (`runtime/handover.py`), so every field it set can later be changed or
        removed by an apply.
        """
        where = {
            "namespace": desired["metadata"]["namespace"],
            "object": desired["metadata"]["name"],
        }

        def still_ours(obj: Mapping[str, Any]) -> bool:
            return controlled_by(obj, relay.uid)

        try:
            if live is None:
                try:
                    created = await self.client.create(res, desired, field_manager=FIELD_MANAGER)
                except errors.AlreadyExists:
                    log.info(
                        "%s exists but is not cached yet; waiting for the watch",
                        res.kind,
                        extra=where,
                    )
                    return
                log.info("created %s", res.kind, extra=where)
                live = await hand_over(
                    self.client, res, created, FIELD_MANAGER, still_ours=still_ours
                )
            elif needs_handover(live, FIELD_MANAGER):
                # Created by a version without the handover, or its handover lost a race.
                fresh = await self.client.get(res, where["object"], where["namespace"])
                if fresh["metadata"].get("uid") != live["metadata"].get("uid"):
                    return  # replaced since the cache read: the watch requeues us
                if not still_ours(fresh):
                    return
                live = await hand_over(
                    self.client, res, fresh, FIELD_MANAGER, still_ours=still_ours
                )
                log.info("handed the create's fields of %s to the apply", res.kind, extra=where)
        except HandoverLost as e:
            log.info("%s; deciding again from the cache", e, extra=where)
            return
        if not needs_apply(live, desired, skip=render.NORMALIZED_PATHS):
            return
        meta = live["metadata"]
        guarded = {
            **desired,
            "metadata": {
                **desired["metadata"],
                "uid": meta["uid"],
                "resourceVersion": meta["resourceVersion"],
            },
        }
        await self.client.apply(res, guarded, field_manager=FIELD_MANAGER, force=True)
        log.info("applied %s", res.kind, extra=where)

    async def _withdraw(
        self,
        relay: Relay,
        objects: Mapping[str, Mapping[str, Any] | None],
        failures: list[Exception],
    ) -> None:
        for kind, res in RELAY_OBJECTS:
            obj = objects[kind]
            if obj is None or not controlled_by(obj, relay.uid):
                continue  # absent, or someone else's: never touched
            meta = obj["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            try:
                await self.client.delete(
                    res,
                    meta["name"],
                    meta["namespace"],
                    uid=meta["uid"],
                    resource_version=meta["resourceVersion"],
                    propagation_policy="Background",
                )
                log.info(
                    "withdrew %s",
                    kind,
                    extra={"namespace": relay.namespace, "object": meta["name"]},
                )
            except errors.NotFound:
                pass
            except errors.ApiError as e:
                failures.append(e)
