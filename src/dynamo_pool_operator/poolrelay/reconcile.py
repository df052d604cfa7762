"""The DynamoPoolRelay reconciler: the effectful shell around `decide` and `render`.

One pass, always in this order:

1. read the relay, its DGD and the objects named `<D>-pool-relay` from caches,
   and (with exports) the cluster's ID property;
2. `decide` publish or withdraw;
3. publish: the relay's Deployment and Service first (create, or a server-side
   apply only when the cache shows they would change), then the exports, which
   point at the Service. Withdraw: the exports first, then the relay objects this
   relay controls (deletes with uid + resourceVersion preconditions), so an MCS
   implementation never sees an export of a Service already gone;
4. each step runs whatever the other's writes did (a failed relay write must not
   hold back the exports, and vice versa);
5. a write that lost a race (a precondition refused, a name taken since the cache
   read) ends the pass without a status write: it is retried at once from fresh
   state, with no error;
6. the status, written only when it changes; a refused write of the relay's own
   objects keeps `Ready` False (`WriteRefused`, naming object, verb and answer);
7. any failed write is raised, so the queue retries the key with backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..api import names
from ..api.dgd import Pool, pool_from_object
from ..api.relay import Relay, RelayDefaults, relay_from_object
from ..exports.plan import ClusterID
from ..runtime import errors
from ..runtime.client import Client
from ..runtime.clock import Clock, SystemClock
from ..runtime.controller import Request, Result
from ..runtime.diff import needs_apply
from ..runtime.events import EventRecorder
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
    """What the export step reports back: status lines, the writes that failed (raised
    after the status is written), and the races it lost (the pass is retried)."""

    exports: list[ExportStatus] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)


class ExportStep(Protocol):
    """The seam for pool exports: the cluster ID before rendering, the exports after."""

    def read_cluster_id(self, relay: Relay) -> ClusterID:
        """The cluster's ID property (raises an `errors.Reported` when unreadable)."""

    async def reconcile(
        self, relay: Relay, pool: Pool | None, decision: Decision, cluster_id: ClusterID
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


class ReconcileErrors(errors.Failures):
    """Several writes failed in one pass; each is named."""


class LostRace(Exception):
    """A guarded write of a relay object was refused because the object changed since
    the cache read (or the name was taken): decide again from fresh state."""


@dataclass
class _Writes:
    """What one pass's writes of the relay objects came to."""

    failures: list[Exception] = field(default_factory=list)
    #: "verb Kind name: answer" for each refused write, for the Ready condition.
    refused: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)


class PoolRelayReconciler:
    def __init__(
        self,
        client: Client,
        caches: RelayCaches,
        *,
        defaults: RelayDefaults,
        default_discovery_backend: str,
        recorder: EventRecorder | None = None,
        exports: ExportStep | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.caches = caches
        self.defaults = defaults
        self.default_discovery_backend = default_discovery_backend
        self.recorder = recorder
        self.exports = exports
        self.clock = clock or SystemClock()
        # Our last status write per relay: (uid, resourceVersion it was computed from,
        # status written). The relay cache may not hold that write yet when the next
        # pass runs; comparing with the stale cached status would then skip a needed
        # write (a status line would stay wrong).
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
        cluster_id = ClusterID()
        if self.exports is not None and decision.publish:
            try:
                cluster_id = self.exports.read_cluster_id(relay)
            except errors.Reported as e:
                failures.append(e)
        effective_id = cluster_id.effective(relay.cluster_id)

        writes = _Writes()
        outcome = ExportOutcome()
        if decision.publish:
            assert pool is not None
            await self._publish(relay, pool, objects, effective_id, writes)
            outcome = await self._exports(relay, pool, decision, cluster_id)
        else:
            outcome = await self._exports(relay, pool, decision, cluster_id)
            if names.is_valid_service_name(names.relay_name(name)):
                await self._withdraw(relay, objects, writes)
        failures.extend(writes.failures)
        failures.extend(outcome.errors)

        lost = writes.lost + outcome.lost
        if lost:
            for race in lost:
                log.debug("lost a race: %s", race, extra={"namespace": namespace, "object": name})
            # No status from a pass that acted on stale state: the retry, from fresh
            # state, writes the right one (a failure of this pass is found again).
            return Result(requeue=True)

        current = self._shown_status(request, relay_obj)
        status = desired_status(
            relay,
            current if isinstance(current, Mapping) else None,
            decision,
            cluster_id=effective_id,
            exports=outcome.exports,
            now=self.clock.now(),
            refused="; ".join(writes.refused),
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

    async def _exports(
        self, relay: Relay, pool: Pool | None, decision: Decision, cluster_id: ClusterID
    ) -> ExportOutcome:
        if self.exports is None:
            return ExportOutcome()
        return await self.exports.reconcile(relay, pool, decision, cluster_id)

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

    def _refused(
        self, relay: Relay, writes: _Writes, verb: str, kind: str, name: str, e: errors.ApiError
    ) -> None:
        """A relay object write the API server refused: named in the Ready condition and
        in a Warning Event about that object, and raised for the backoff retry."""
        what = f"{verb} {kind} {name}: {e}"
        writes.failures.append(e)
        writes.refused.append(what)
        if self.recorder is not None:
            related = {
                "apiVersion": "apps/v1" if kind == "Deployment" else "v1",
                "kind": kind,
                "namespace": relay.namespace,
                "name": name,
            }
            self.recorder.emit(
                relay.reference(), related, "Warning", "RelayWriteFailed", verb.title(), what
            )

    async def _publish(
        self,
        relay: Relay,
        pool: Pool,
        objects: Mapping[str, Mapping[str, Any] | None],
        cluster_id: str,
        writes: _Writes,
    ) -> None:
        desired = {
            "Deployment": render.deployment(relay, pool, cluster_id),
            "Service": render.service(relay),
        }
        for kind, res in RELAY_OBJECTS:
            verb = "create" if objects[kind] is None else "apply"
            try:
                await self._ensure(relay, res, objects[kind], desired[kind])
            except LostRace as e:
                writes.lost.append(str(e))
            except errors.ApiError as e:
                self._refused(relay, writes, verb, kind, names.relay_name(relay.name), e)

    async def _ensure(
        self, relay: Relay, res: Resource, live: Mapping[str, Any] | None, desired: dict[str, Any]
    ) -> None:
        """Create exclusively, or apply guarded by the uid and resourceVersion read.

        Never an unguarded apply: an apply is an upsert, and between our cache read
        and the write someone may have created (or taken over) an object of this
        name. The create fails with AlreadyExists then (a stale cache: the watch
        brings the object and the next pass decides again), and a guarded apply
        fails with Conflict if the object changed since we checked its controller;
        both are lost races. A create's fields are handed over to the apply manager
        at once (`runtime/handover.py`), so every field it set can later be changed
        or removed by an apply.
        """
        name, namespace = desired["metadata"]["name"], desired["metadata"]["namespace"]
        where = {"namespace": namespace, "object": name}

        def still_ours(obj: Mapping[str, Any]) -> bool:
            return controlled_by(obj, relay.uid)

        try:
            if live is None:
                try:
                    created = await self.client.create(res, desired, field_manager=FIELD_MANAGER)
                except errors.AlreadyExists as e:
                    raise LostRace(f"create of {res.kind} {name}: exists, not cached yet") from e
                log.info("created %s", res.kind, extra=where)
                live = await hand_over(
                    self.client, res, created, FIELD_MANAGER, still_ours=still_ours
                )
            elif needs_handover(live, FIELD_MANAGER):
                # Created by a version without the handover, or its handover lost a race.
                fresh = await self.client.get(res, name, namespace)
                if fresh["metadata"].get("uid") != live["metadata"].get("uid") or not still_ours(
                    fresh
                ):
                    raise LostRace(f"{res.kind} {name} changed since the cache read")
                live = await hand_over(
                    self.client, res, fresh, FIELD_MANAGER, still_ours=still_ours
                )
                log.info("handed the create's fields of %s to the apply", res.kind, extra=where)
        except HandoverLost as e:
            raise LostRace(str(e)) from e
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
        try:
            await self.client.apply(res, guarded, field_manager=FIELD_MANAGER, force=True)
        except errors.Conflict as e:
            raise LostRace(
                f"apply of {res.kind} {name} read at resourceVersion {meta['resourceVersion']}: {e}"
            ) from e
        log.info("applied %s", res.kind, extra=where)

    async def _withdraw(
        self,
        relay: Relay,
        objects: Mapping[str, Mapping[str, Any] | None],
        writes: _Writes,
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
            except errors.Conflict as e:
                writes.lost.append(
                    f"withdrawal of {kind} {meta['name']} read at resourceVersion "
                    f"{meta['resourceVersion']}: {e}"
                )
            except errors.ApiError as e:
                self._refused(relay, writes, "delete", kind, meta["name"], e)
