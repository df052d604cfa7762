"""The quiet-pass key is built from the snapshot itself (pool/model.py
`Snapshot.quiet_key`): every field declares its `Version`, so an input added to the
snapshot without one fails here instead of freezing what the pass decides on it."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from dynamo_pool_operator.api.mcs import ClusterID
from dynamo_pool_operator.pool.model import (
    NEVER_QUIET_IF_SET,
    UNVERSIONED_TIME,
    VERSION,
    Snapshot,
    Version,
)
from tests.unit.pool.relay.test_objects import make_pool, make_relay

FIELDS = {f.name: f for f in dataclasses.fields(Snapshot)}


def obj(uid: str = "u", rv: str = "1") -> dict[str, Any]:
    return {"metadata": {"uid": uid, "resourceVersion": rv}}


def base() -> Snapshot:
    return Snapshot(
        make_relay(),
        make_pool(),
        {"Deployment": obj("d"), "Service": None},
        {"e": obj("e")},
        ClusterID(True, obj("c"), "about/v1alpha1"),
        services={"s": obj("s")},
        component_deployments={"c": obj("c")},
    )


#: For each field that takes part in the key: another value that must move it.
MOVED: dict[str, Any] = {
    "relay": dataclasses.replace(make_relay(), resource_version="2"),
    "pool": None,
    "relay_objects": {"Deployment": obj("d", rv="2"), "Service": None},
    "exports": {"e": obj("e", rv="2")},
    "cluster_id": ClusterID(True, obj("c", rv="2"), "about/v1alpha1"),
    "exports_unavailable": "not served",
    "services": {"s": obj("s"), "t": obj("t")},
    "component_deployments": {},
    "pool_unreadable": "cannot decode",
    "hidden_unread": frozenset({"Deployment"}),
}
#: For each field that keeps any pass from being skipped: a value that does so.
NEVER_QUIET: dict[str, Any] = {
    "unreadable": (RuntimeError("cache not synced"),),
    "own_status_unseen": True,
}
#: Fields another field's version pins down, or that matter only through a later look.
UNKEYED: dict[str, Any] = {
    "shown_status": {"conditions": []},
    "read_at": datetime(2026, 1, 1, tzinfo=UTC),
    "decided_on": {"metadata": {"name": "r", "resourceVersion": "7"}},
}


@pytest.mark.parametrize("name", FIELDS)
def test_every_snapshot_field_declares_its_version(name: str) -> None:
    version = FIELDS[name].metadata.get(VERSION)
    assert isinstance(version, Version), f"Snapshot.{name} declares no Version"
    if version.covered_by:
        assert version.covered_by != name
        assert not FIELDS[version.covered_by].metadata[VERSION].covered_by


@pytest.mark.parametrize("name", FIELDS)
def test_every_field_is_shown_to_move_the_key_or_to_stay_out_of_it(name: str) -> None:
    """A new field is placed in one of the tables above, with a value that proves it."""
    version = FIELDS[name].metadata[VERSION]
    key = base().quiet_key()
    assert key is not None
    if not FIELDS[name].init:
        # Derived from other fields when the snapshot is made: it moves with them.
        assert version.covered_by, f"Snapshot.{name} is derived: cover it by its source"
        assert FIELDS[version.covered_by].init
    elif name in MOVED:
        moved = dataclasses.replace(base(), **{name: MOVED[name]}).quiet_key()
        assert moved is not None
        assert moved != key
    elif name in NEVER_QUIET:
        assert version is NEVER_QUIET_IF_SET
        assert dataclasses.replace(base(), **{name: NEVER_QUIET[name]}).quiet_key() is None
    else:
        assert name in UNKEYED, f"Snapshot.{name}: add it to MOVED, NEVER_QUIET or UNKEYED"
        assert version.covered_by or version is UNVERSIONED_TIME
        assert dataclasses.replace(base(), **{name: UNKEYED[name]}).quiet_key() == key


def test_the_same_inputs_read_again_give_the_same_key() -> None:
    assert base().quiet_key() == base().quiet_key()
