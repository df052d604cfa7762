"""What the relay controller caches of Services and DCDs, and which relay each wakes
(pool/controller.py, pool/exports/wiring.py).

Whether a frontend is exported depends on whose Service of its name exists
(docs/exports.md, 'What is exported'): every Service is cached (the relay's own in full,
any other as a stub of its identity and controller), and a Service appearing, changing
hands or going wakes each relay whose DGD names it; a DCD changing hands wakes the relay
of the DGD that controls it, before and after.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from dynamo_pool_operator.pool.controller import Trim, relays_naming_service
from dynamo_pool_operator.pool.exports.wiring import relay_of_controller
from dynamo_pool_operator.pool.reconciler import RelayCaches
from dynamo_pool_operator.runtime.cache.store import Store
from dynamo_pool_operator.runtime.objects import VIEW, identity_stub

NS = "team"
trim_service = Trim("Service")


def dgd(name: str, *frontends: str, namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"components": [{"name": f, "type": "frontend"} for f in frontends]},
    }


def caches(*dgds: dict[str, Any]) -> RelayCaches:
    store = Store()
    for d in dgds:
        store.put(d)
    return cast("RelayCaches", SimpleNamespace(dgds=SimpleNamespace(store=store)))


def service(name: str, namespace: str = NS, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, **meta},
        "spec": {"ports": [{"port": 80}], "selector": {"app": "x"}},
        "status": {"loadBalancer": {}},
    }


def test_a_service_wakes_each_relay_whose_dgd_names_it_as_a_frontends() -> None:
    mapper = relays_naming_service(
        caches(dgd("pay", "ments-db"), dgd("pay-ments", "db"), dgd("pay-ments-db", "db"))
    )
    # `pay-ments-db` is pay's frontend `ments-db` and pay-ments' `db`; the DGD named
    # pay-ments-db does not name it (its own are pay-ments-db-<component>).
    assert sorted(mapper(service("pay-ments-db"))) == [(NS, "pay"), (NS, "pay-ments")]


def test_a_service_no_dgd_names_wakes_nobody_and_the_relay_service_its_relay() -> None:
    mapper = relays_naming_service(caches(dgd("payments", "db")))
    assert list(mapper(service("payments-web"))) == []
    assert list(mapper(service("payments-db", namespace="elsewhere"))) == []
    assert list(mapper(service("nodash"))) == []
    assert list(mapper(service("payments-pool-relay"))) == [(NS, "payments")]


def test_the_dgd_cache_in_effect_is_read_at_each_event() -> None:
    relay_caches = caches()
    mapper = relays_naming_service(relay_caches)
    assert list(mapper(service("payments-db"))) == []
    relay_caches.dgds = cast("Any", SimpleNamespace(store=Store()))
    relay_caches.dgds.store.put(dgd("payments", "DB"))
    assert list(mapper(service("payments-db"))) == [(NS, "payments")]


def controlled_by(kind: str, name: str, api_version: str = "nvidia.com/v1beta1") -> list[Any]:
    return [{"apiVersion": api_version, "kind": kind, "name": name, "uid": "u", "controller": True}]


def test_a_dcd_wakes_the_relay_of_the_dgd_controlling_it() -> None:
    def dcd(owners: list[Any] | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": "payments-db", "namespace": NS}
        if owners is not None:
            meta["ownerReferences"] = owners
        return {"kind": "DynamoComponentDeployment", "metadata": meta}

    assert list(relay_of_controller(dcd(controlled_by("DynamoGraphDeployment", "payments")))) == [
        (NS, "payments")
    ]
    assert list(relay_of_controller(dcd(None))) == []
    assert list(relay_of_controller(dcd(controlled_by("Deployment", "x", "apps/v1")))) == []
    other_group = controlled_by("DynamoGraphDeployment", "payments", "example.com/v1")
    assert list(relay_of_controller(dcd(other_group))) == []


def test_a_service_that_is_not_the_relays_is_cached_as_a_stub_of_whose_it_is() -> None:
    refs = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a", "uid": "1"},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "ledger-db",
            "uid": "2",
            "controller": True,
            "blockOwnerDeletion": True,
        },
    ]
    obj = service(
        "payments-db",
        uid="svc-1",
        resourceVersion="7",
        labels={"a": "b"},
        annotations={"c": "d"},
        ownerReferences=refs,
        managedFields=[{"manager": "kubectl"}],
    )
    assert trim_service(obj) == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "payments-db",
            "namespace": NS,
            "uid": "svc-1",
            "resourceVersion": "7",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": "ledger-db",
                    "uid": "2",
                    "controller": True,
                }
            ],
        },
    }
    assert "ownerReferences" not in identity_stub(service("x"))["metadata"]


def test_the_relay_service_is_still_cached_in_full() -> None:
    """Not a stub: what the reconciler reads (its clusterIP) and a view of what we render."""
    relay = service("payments-pool-relay", uid="1", resourceVersion="2")
    relay["spec"] = {"clusterIP": "None", "ports": [{"port": 80}]}
    kept = trim_service(relay)
    assert kept["spec"] == {"clusterIP": "None"}
    assert VIEW in kept
    assert VIEW not in trim_service(service("payments-db"))


def test_a_relay_object_keeps_no_empty_spec_or_status() -> None:
    """A budget's cache keeps none of its spec (its view compares it): no empty map is
    held for it, nor for a status with none of the fields kept (64 bytes each)."""
    budget = Trim("PodDisruptionBudget")(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "payments-pool-relay", "namespace": NS, "uid": "1"},
            "spec": {"minAvailable": 1},
        }
    )
    deployment = Trim("Deployment")(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "payments-pool-relay", "namespace": NS, "uid": "2"},
            "spec": {"replicas": 2},
            "status": {"collisionCount": 1},
        }
    )
    assert "spec" not in budget
    assert "status" not in budget
    assert deployment["spec"] == {"replicas": 2}
    assert "status" not in deployment
