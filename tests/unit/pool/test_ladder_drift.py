"""The drift rule (pool/ladder.py): one entry point for every kind a relay owns.

A relay object is answered from the view its cache keeps, or whole when there is
none; an export part by part, naming the parts that differ. For each kind, the object
as written is right and an edit of a field we own is drift.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.dgd import pool_from_object
from dynamo_pool_operator.api.mcs import serviceexports
from dynamo_pool_operator.api.relay import Relay, RelayDefaults, relay_from_object
from dynamo_pool_operator.pool import controller
from dynamo_pool_operator.pool.exports.plan import EXPORT_DRIFT, export_body
from dynamo_pool_operator.pool.ladder import NO_DRIFT, Drift, Part, Rule, drift
from dynamo_pool_operator.pool.relay import kinds, render
from dynamo_pool_operator.runtime.objects.diff import VIEW

SERVICE_EXPORTS = serviceexports("v1alpha1")


def make_relay() -> Relay:
    meta = {"name": "pool", "namespace": "team", "uid": "relay-uid"}
    return relay_from_object({"metadata": meta, "spec": {}}, RelayDefaults("relay:1", 8090))


def bodies() -> dict[str, tuple[Rule, dict[str, Any]]]:
    """Each owned kind's rule and a body of it."""
    relay = make_relay()
    pool = pool_from_object({"metadata": {"name": "pool", "namespace": "team"}})
    return {
        "Deployment": (
            kinds.rule("Deployment"),
            render.deployment(relay, pool, "c"),
        ),
        "Service": (kinds.rule("Service"), render.service(relay)),
        "ServiceExport": (EXPORT_DRIFT, export_body(SERVICE_EXPORTS, relay, "pool-pool-relay")),
    }


def served(body: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(body)
    out["metadata"] |= {"uid": "x", "resourceVersion": "3", "generation": 1}
    out["metadata"]["labels"]["someone-else"] = "theirs"
    return out


CACHED: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "Deployment": controller.Trim("Deployment"),
    "Service": controller.Trim("Service"),
    "ServiceExport": lambda o: o,  # the exports' cache keeps them whole
}


def edit_owned(kind: str, live: dict[str, Any]) -> None:
    """A user's edit of one field we own."""
    if kind == "Deployment":
        live["spec"]["template"]["spec"]["containers"][0]["image"] = "edited"
    elif kind == "Service":
        live["spec"]["ports"][0]["port"] = 1
    else:
        live["metadata"]["labels"][names.DGD_NAME] = "edited"


@pytest.mark.parametrize("kind", ["Deployment", "Service", "ServiceExport"])
def test_every_owned_kind_is_right_as_written_and_drifted_after_an_edit(kind: str) -> None:
    rule, body = bodies()[kind]
    live = served(body)
    assert drift(rule, CACHED[kind](copy.deepcopy(live)), body) == NO_DRIFT
    assert not drift(rule, live, body)
    edit_owned(kind, live)
    assert drift(rule, CACHED[kind](copy.deepcopy(live)), body)
    assert drift(rule, live, body)


def test_a_relay_object_is_answered_from_its_view_when_the_cache_keeps_one() -> None:
    rule, body = bodies()["Service"]
    live = controller.Trim("Service")(served(body))
    assert VIEW in live
    assert not drift(rule, live, body)
    live[VIEW] = dataclasses.replace(live[VIEW], digest="another")
    assert drift(rule, live, body), "the view decides, not the few fields kept whole"
    # Without a shape the rule compares whole: the trimmed object lacks the spec.
    assert drift(
        Rule(quantities=render.QUANTITY_PATHS), controller.Trim("Service")(served(body)), body
    )


def test_an_export_names_each_part_that_differs_in_order() -> None:
    rule, body = bodies()["ServiceExport"]
    live = served(body)
    live["metadata"]["labels"][names.DGD_NAME] = "other"
    assert drift(rule, live, body) == Drift(True, ("label",))
    live["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = False
    assert drift(rule, live, body) == Drift(True, ("label", "controllerReference"))
    live["metadata"]["ownerReferences"][0]["controller"] = False  # no controller at all
    assert drift(rule, live, body).fields == ("label", "controllerReference")


def test_quantities_are_compared_only_on_whole_objects() -> None:
    with pytest.raises(ValueError, match="no parts"):
        Rule(parts=(Part("a", lambda o: o),), quantities=frozenset({"spec.r"}))
    rule = Rule(quantities=frozenset({"spec.r"}))
    assert not drift(rule, {"spec": {"r": {"cpu": "1"}}}, {"spec": {"r": {"cpu": "1000m"}}})
    assert drift(Rule(), {"spec": {"r": {"cpu": "1"}}}, {"spec": {"r": {"cpu": "1000m"}}})
