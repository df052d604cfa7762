"""Guarded writes: the only way the operator creates, applies or deletes what it owns.

"Never adopt, and write only what is still ours at the version we checked":

- **create**: a POST, exclusive, so a name taken since the cache read fails instead of
  adopting; its fields are then handed over to the apply manager (`hand_over`), so a
  later apply can change or remove each.
- **apply**: server-side apply carrying the checked `uid` and `resourceVersion`, so the
  server refuses (409) an object deleted, replaced or changed since.
- **delete**: with uid and resourceVersion preconditions; NotFound is success.

A guard's refusal, a taken name or a terminating namespace raise `LostRace` (decide
again from fresh state); any other refusal propagates as its `ApiError`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.meta import handed_over, managed_entries, needs_handover
from dynamo_pool_operator.runtime.objects.resources import Resource

log = logging.getLogger(__name__)


class HandoverLost(Exception):
    """The object changed hands (or is another object of the same name) before its
    fields could be handed over; the caller re-decides from fresh state."""


class LostRace(Exception):
    """The object changed (or the name was taken) since the cache read: decide again.
    The message names the object and the version it was read at."""


class NameTaken(LostRace):
    """An exclusive create found the name taken, by an object the cache has not shown yet
    or never shows (it watches by label selector). `GuardedWrites.read` tells which."""

    #: The object of that name as read after the refusal, when the caller read it.
    found: dict[str, Any] | None = None


class NamespaceGoing(LostRace):
    """The namespace is being deleted, and the relay with it: no retry can win, none is
    needed; never reported as a failure."""


def _at(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('name')} read at resourceVersion {meta.get('resourceVersion')}"


async def hand_over(
    client: Client,
    res: Resource,
    obj: Mapping[str, Any],
    manager: str,
    *,
    still_ours: Callable[[Mapping[str, Any]], bool],
    attempts: int = 3,
) -> dict[str, Any]:
    """Hand `obj`'s Update entry of `manager` over to its Apply entry; returns the object
    as the server now has it. `obj` carries its full `managedFields`. Raises `HandoverLost`
    if the object is gone, replaced or no longer `still_ours`."""
    current: dict[str, Any] = dict(obj)
    uid = current["metadata"]["uid"]
    name, namespace = current["metadata"]["name"], current["metadata"].get("namespace")
    for attempt in range(attempts):
        managed = handed_over(managed_entries(current), manager)
        if managed is None:
            return current
        patch = {
            "metadata": {
                "uid": uid,
                "resourceVersion": current["metadata"]["resourceVersion"],
                "managedFields": managed,
            }
        }
        try:
            return await client.merge_patch(res, name, patch, namespace, field_manager=manager)
        except errors.NotFound as e:
            raise HandoverLost(f"{res.kind} {name} is gone") from e
        except errors.Conflict:
            if attempt == attempts - 1:
                raise
        # Changed since read (a controller wrote its status, say): read it again.
        try:
            current = await client.get(res, name, namespace)
        except errors.NotFound as e:
            raise HandoverLost(f"{res.kind} {name} is gone") from e
        if current["metadata"].get("uid") != uid or not still_ours(current):
            raise HandoverLost(f"{res.kind} {name} changed hands since it was created")
    raise AssertionError("unreachable")  # pragma: no cover


class GuardedWrites:
    """Exclusive create, guarded apply, guarded delete, all as one field manager."""

    def __init__(self, client: Client, field_manager: str) -> None:
        self.client = client
        self.field_manager = field_manager

    async def create(self, res: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST `body` (exclusive: a name taken is a lost race, never adopted). Returns the
        object as stored; its fields stay with the create until `hand_over`."""
        name = body["metadata"]["name"]
        try:
            made = await self.client.create(res, dict(body), field_manager=self.field_manager)
        except errors.NamespaceTerminating as e:
            # The namespace is going, and the relay with it (Kubernetes' controllers drop
            # this refusal too).
            raise NamespaceGoing(
                f"create of {res.kind} {name}: its namespace is being deleted"
            ) from e
        except errors.AlreadyExists as e:
            raise NameTaken(f"create of {res.kind} {name}: the name is taken") from e
        return made

    async def read(self, res: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        """The object of that name as the API server has it (None: there is none)."""
        try:
            return await self.client.get(res, name, namespace)
        except errors.NotFound:
            return None

    async def hand_over(
        self,
        res: Resource,
        obj: Mapping[str, Any],
        *,
        still_ours: Callable[[Mapping[str, Any]], bool],
        fetch: bool = False,
    ) -> dict[str, Any]:
        """Hand `obj`'s create fields over to the apply manager; `fetch`: `obj` is a cache
        copy, read again first (and still the same object, still ours)."""
        current: Mapping[str, Any] = obj
        if fetch:
            meta = obj["metadata"]
            try:
                current = await self.client.get(res, meta["name"], meta.get("namespace"))
            except errors.NotFound as e:
                raise LostRace(f"{res.kind} {_at(obj)} is gone") from e
            if current["metadata"].get("uid") != meta.get("uid") or not still_ours(current):
                raise LostRace(f"{res.kind} {_at(obj)} changed hands")
            if not needs_handover(current, self.field_manager):
                return dict(current)
        try:
            return await hand_over(
                self.client, res, current, self.field_manager, still_ours=still_ours
            )
        except HandoverLost as e:
            raise LostRace(str(e)) from e
        except errors.Conflict as e:
            raise LostRace(f"hand-over of {res.kind} {_at(current)}: {e}") from e

    async def apply(
        self, res: Resource, body: Mapping[str, Any], live: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Apply `body` (only the fields we own) to the object `live` as checked."""
        meta = live["metadata"]
        guarded = {
            **body,
            "metadata": {
                **body["metadata"],
                "uid": meta["uid"],
                "resourceVersion": meta["resourceVersion"],
            },
        }
        try:
            return await self.client.apply(
                res, guarded, field_manager=self.field_manager, force=True
            )
        except errors.Conflict as e:
            raise LostRace(f"apply of {res.kind} {_at(live)}: {e}") from e

    async def delete(self, res: Resource, live: Mapping[str, Any]) -> bool:
        """Delete the object `live` as checked; False when it was already gone."""
        meta = live["metadata"]
        try:
            await self.client.delete(
                res,
                meta["name"],
                meta.get("namespace"),
                uid=meta["uid"],
                resource_version=meta["resourceVersion"],
                propagation_policy="Background",
            )
        except errors.NotFound:
            return False
        except errors.Conflict as e:
            raise LostRace(f"delete of {res.kind} {_at(live)}: {e}") from e
        return True
