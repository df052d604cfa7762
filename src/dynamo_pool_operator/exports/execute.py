"""Carry out an export plan: create, repair, withdraw — each guarded (SPEC §4.4-§4.7).

- create: POST (never an upsert, so a same-named export made meanwhile is never
  adopted); AlreadyExists means our cache is stale, not an error.
- repair: a sparse server-side apply of only the DGD label and our controller
  reference, carrying the uid and resourceVersion of the export we checked, so
  the server refuses it if the export was deleted (never re-created) or changed
  hands since.
- withdraw: DELETE with uid + resourceVersion preconditions; NotFound is done.

A refused guard (Conflict, or a uid mismatch) or a create that finds the name
taken (a stale cache) is a lost race, not a failure: it is reported in
`Outcome.lost`, so the relay is retried at once from fresh state with no error,
no ExportFailed event and no status line for it. Any other failure records
Warning `ExportFailed` about that export and is returned as an error. Every
write goes to the resolved ServiceExport version.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from ..api import labels
from ..api.relay import Relay
from ..poolrelay.status import ExportStatus
from ..runtime import errors
from ..runtime.client import Client
from ..runtime.events import EventRecorder
from ..runtime.resources import Resource
from .plan import Action, Plan, Verb

log = logging.getLogger(__name__)

FIELD_MANAGER = "dynamo-pool-operator"


class StaleExport(Exception):
    """A guarded write was refused because the export changed since the cache read
    (or a create found the name taken): re-plan from fresh state."""


@dataclass
class Outcome:
    """One line per export name for `status.exports[]`, the failed writes, and the
    races lost to another writer (each a sentence naming the export and versions)."""

    statuses: list[ExportStatus] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)


def export_body(resource: Resource, relay: Relay, name: str) -> dict[str, Any]:
    """The fields we own on an export: name, the DGD label, our controller reference."""
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {
            "name": name,
            "namespace": relay.namespace,
            "labels": {labels.DGD_NAME: relay.name},
            "ownerReferences": [relay.owner_reference()],
        },
    }


class Writes:
    """`dynamo_pool_operator_export_writes_total{verb,outcome}`, once per registry."""

    _made: weakref.WeakKeyDictionary[CollectorRegistry, Counter] = weakref.WeakKeyDictionary()

    @classmethod
    def counter(cls, registry: CollectorRegistry) -> Counter:
        found = cls._made.get(registry)
        if found is None:
            found = cls._made[registry] = Counter(
                "dynamo_pool_operator_export_writes_total",
                "ServiceExport writes by verb and outcome",
                ["verb", "outcome"],
                registry=registry,
            )
        return found


class Executor:
    def __init__(
        self,
        client: Client,
        resource: Resource,
        recorder: EventRecorder,
        registry: CollectorRegistry,
    ) -> None:
        self.client = client
        self.resource = resource
        self.recorder = recorder
        self._writes = Writes.counter(registry)

    def _ref(self, export: Mapping[str, Any] | None, relay: Relay, name: str) -> dict[str, Any]:
        if export is not None:
            return self.resource.reference(dict(export))
        return {
            "apiVersion": self.resource.api_version,
            "kind": self.resource.kind,
            "namespace": relay.namespace,
            "name": name,
        }

    async def run(self, relay: Relay, plan: Plan) -> Outcome:
        out = Outcome()
        # One line per name: a skipped name whose withdrawal then fails shows the
        # failure (status.exports is a list keyed by name; two lines of one name
        # would make the API server refuse the whole status).
        lines = {s.name: s for s in plan.skipped}
        regarding = relay.reference()  # at the version read, as the related objects
        for action in plan.actions:
            try:
                state = await self._one(relay, regarding, action)
            except StaleExport as e:
                out.lost.append(str(e))
                continue
            except errors.ApiError as e:
                self._writes.labels(action.verb.value, "error").inc()
                self.recorder.emit(
                    regarding,
                    self._ref(action.export, relay, action.name),
                    "Warning",
                    "ExportFailed",
                    action.verb.value,
                    f"{action.verb.value.lower()} ServiceExport {action.name}: {e}",
                )
                out.errors.append(e)
                state = ExportStatus(action.name, "Failed", "ExportFailed", str(e))
            if state is not None:
                lines[action.name] = state
        out.statuses = list(lines.values())
        return out

    async def _one(
        self, relay: Relay, regarding: dict[str, Any], action: Action
    ) -> ExportStatus | None:
        name, where = action.name, {"namespace": relay.namespace, "object": action.name}
        if action.verb is Verb.CREATE:
            try:
                made = await self.client.create(
                    self.resource,
                    export_body(self.resource, relay, name),
                    field_manager=FIELD_MANAGER,
                )
            except errors.AlreadyExists as e:
                raise StaleExport(f"create of ServiceExport {name}: exists, not cached yet") from e
            self._writes.labels("Create", "ok").inc()
            log.info("created ServiceExport", extra=where)
            self.recorder.emit(
                regarding,
                self.resource.reference(made),
                "Normal",
                "ExportCreated",
                "Create",
                f"created ServiceExport {name}",
            )
            return ExportStatus(name, "Exported")
        if action.verb is Verb.REPAIR:
            assert action.export is not None
            meta = action.export["metadata"]
            body = export_body(self.resource, relay, name)
            body["metadata"]["uid"] = meta["uid"]
            body["metadata"]["resourceVersion"] = meta["resourceVersion"]
            try:
                await self.client.apply(
                    self.resource, body, field_manager=FIELD_MANAGER, force=True
                )
            except errors.Conflict as e:
                # Deleted (the uid is refused: never re-created), changed or taken over
                # since we looked: the server answers 409 for each. Anything else (e.g. an
                # admission refusal, 422) is a failure and recorded as ExportFailed.
                self._writes.labels("Repair", "stale").inc()
                raise StaleExport(
                    f"repair of ServiceExport {name} read at resourceVersion "
                    f"{meta['resourceVersion']} lost a race: {e}"
                ) from e
            self._writes.labels("Repair", "ok").inc()
            log.info("repaired ServiceExport (%s)", ", ".join(action.fields), extra=where)
            self.recorder.emit(
                regarding,
                self.resource.reference(dict(action.export)),
                "Normal",
                "ExportRepaired",
                "Repair",
                f"restored {', '.join(action.fields)} of ServiceExport {name}",
            )
            return ExportStatus(name, "Exported")
        if action.verb is Verb.WITHDRAW:
            assert action.export is not None
            meta = action.export["metadata"]
            try:
                await self.client.delete(
                    self.resource,
                    name,
                    relay.namespace,
                    uid=meta["uid"],
                    resource_version=meta["resourceVersion"],
                )
            except errors.NotFound:
                return None  # already gone: done
            except errors.Conflict as e:
                self._writes.labels("Withdraw", "stale").inc()
                raise StaleExport(
                    f"withdrawal of ServiceExport {name} read at resourceVersion "
                    f"{meta['resourceVersion']} lost a race: {e}"
                ) from e
            self._writes.labels("Withdraw", "ok").inc()
            log.info("withdrew ServiceExport", extra=where)
            self.recorder.emit(
                regarding,
                self.resource.reference(dict(action.export)),
                "Normal",
                "ExportDeleted",
                "Delete",
                f"deleted ServiceExport {name}",
            )
            return None
        if action.verb is Verb.WAIT:
            return ExportStatus(name, "Pending", "Terminating") if action.wanted else None
        if action.verb is Verb.FOREIGN:
            return ExportStatus(
                name,
                "Foreign",
                "NotControlled",
                "another owner (or none) controls this export; it is left alone",
            )
        return ExportStatus(name, "Exported")
