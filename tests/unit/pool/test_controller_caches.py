"""The relay controller's caches: what each keeps shared (`relay_caches`)."""

from __future__ import annotations

import copy
import dataclasses
import sys
import uuid
from typing import Any

import orjson
import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.dgd import pool_from_object
from dynamo_pool_operator.api.mcs import serviceexports
from dynamo_pool_operator.api.relay import HEADLESS_CLUSTER_IP, RelayDefaults, relay_from_object
from dynamo_pool_operator.api.shown import ShownLine, ShownStatus, read_conditions
from dynamo_pool_operator.pool import controller
from dynamo_pool_operator.pool.exports.plan import EXPORT_DRIFT, export_body
from dynamo_pool_operator.pool.ladder import NO_DRIFT, Rule, drift
from dynamo_pool_operator.pool.relay import kinds, render
from dynamo_pool_operator.runtime import EventType
from dynamo_pool_operator.runtime.cache import sharing
from dynamo_pool_operator.runtime.cache.shared import SharedInformers
from dynamo_pool_operator.runtime.cache.sharing import Share
from dynamo_pool_operator.runtime.objects import VIEW
from tests.unit.runtime.client.fake import FakeClient


def share_of(informer: Any) -> Share:
    """The sharing step of an informer's transform (`transform.for_cache`)."""
    (share,) = [step for step in informer.transform.steps if isinstance(step, Share)]
    return share


def _caches() -> Any:
    informers = SharedInformers(FakeClient())
    return controller.relay_caches(informers, namespace=None, dgd_version="v1beta1")


def test_relays_and_dgds_intern_their_own_vocabulary_and_not_their_names() -> None:
    """Export states and component types repeat across a fleet's relays and DGDs: one
    string each (a relay's as its cache reads the status, `ShownStatus`). Names (the
    pool's, an export's) are each object's own."""
    token = uuid.uuid4().hex[:8]
    state, kind = (sys.intern("".join([w, token])) for w in ("Exported", "frontend"))
    name = sys.intern("".join(["pool-", token]))
    caches = _caches()
    relay = orjson.loads(
        orjson.dumps(
            {
                "metadata": {"name": name, "namespace": "ns"},
                "status": {
                    "exports": [
                        {"name": name, "state": state, "ready": {"status": "True"}},
                    ]
                },
            }
        )
    )
    served = orjson.dumps(relay)
    (line,) = caches.relays._prepare(relay)["status"].exports
    (again,) = caches.relays._prepare(orjson.loads(served))["status"].exports
    assert line.state == state
    assert line.state is again.state, "one string for every relay that shows it"
    assert line.name is not name
    dgd = orjson.loads(
        orjson.dumps(
            {
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"components": [{"name": "Frontend", "type": kind}]},
            }
        )
    )
    component = caches.dgds._prepare(dgd)["spec"]["components"][0]
    assert component["type"] is kind
    assert share_of(caches.dgds).vocabulary == controller.DGD_VOCABULARY


def _full_status(token: str) -> dict[str, Any]:
    """A relay's status as the operator writes it, every message and view naming `token`."""

    def condition(type_: str, status: str, reason: str) -> dict[str, Any]:
        return {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": f"{type_} is {status}: {token} " + "x" * 120,
            "observedGeneration": 1,
            "lastTransitionTime": "2026-12-04T10:00:00Z",
        }

    return {
        "observedGeneration": 1,
        "conditions": [
            condition("Published", "True", "Published"),
            condition("RelayAvailable", "False", "Progressing"),
            condition("ClusterIDMatched", "True", "Matched"),
            condition("Exported", "True", "ExportExists"),
            condition("Ready", "False", "Progressing"),
        ],
        "serviceName": "pool-pool-relay",
        "clusterId": "east",
        "relayPods": "0/2",
        "exports": [
            {"name": "pool-pool-relay", "state": "Exported"},
            {
                "name": "pool-frontend",
                "state": "Pending",
                "reason": "Waiting",
                "message": f"waiting: {token}",
                "valid": {"status": "True", "reason": "ServiceExportValid", "message": token},
            },
        ],
    }


def test_the_relay_cache_keeps_what_the_passes_read_of_a_status_not_its_messages() -> None:
    """Messages and the implementations' views were most of a cached relay, and no pass
    reads them: the cache keeps the status read (`ShownStatus`), and a pass on it
    decides as on the whole status."""
    token = uuid.uuid4().hex
    caches = _caches()
    status = _full_status(token)
    relay = {"metadata": {"name": "pool", "namespace": "ns"}, "status": copy.deepcopy(status)}
    cached = caches.relays._prepare(orjson.loads(orjson.dumps(relay)))["status"]
    assert token not in repr(cached)
    assert cached == ShownStatus.read(status)
    assert not cached.differs(status)
    said = read_conditions(cached)
    assert [(c.status, c.reason) for c in said.values()] == [
        ("True", "Published"),
        ("False", "Progressing"),
        ("True", "Matched"),
        ("True", "ExportExists"),
        ("False", "Progressing"),
    ]
    assert {c.since for c in said.values()} == {"2026-12-04T10:00:00Z"}
    assert cached.lines()["pool-frontend"] == ShownLine("pool-frontend", "Pending", "Waiting")
    assert cached.cluster_id == "east"
    moved = copy.deepcopy(status)
    moved["conditions"][0]["message"] = "another message"
    assert cached.differs(moved)
    viewed = copy.deepcopy(status)
    viewed["exports"][1]["valid"]["reason"] = "Conflict"
    assert cached.differs(viewed)


def test_relays_and_dgds_made_alike_share_one_spec() -> None:
    """A fleet's pools come from few templates: one cached spec per distinct one."""
    caches = _caches()
    assert share_of(caches.relays).shared == controller.RELAY_SHARED
    assert share_of(caches.dgds).shared == controller.DGD_SHARED

    def dgd(name: str, chat: str) -> Any:
        components = [
            {"name": "Frontend", "type": "frontend", "replicas": 1},
            {"name": chat, "type": "frontend", "replicas": 1},
        ]
        body = {"metadata": {"name": name, "namespace": "ns"}, "spec": {"components": components}}
        return caches.dgds._prepare(orjson.loads(orjson.dumps(body)))

    def relay(name: str, cluster: str) -> Any:
        body = {"metadata": {"name": name, "namespace": "ns"}, "spec": {"clusterId": cluster}}
        return caches.relays._prepare(orjson.loads(orjson.dumps(body)))

    a, b, c = dgd("a", "Chat"), dgd("b", "Chat"), dgd("c", "Other")
    assert a["spec"] is b["spec"]
    assert c["spec"] is not a["spec"]
    assert [x["name"] for x in c["spec"]["components"]] == ["Frontend", "Other"]
    assert relay("a", "east")["spec"] is relay("b", "east")["spec"]
    assert relay("c", "west")["spec"] == {"clusterId": "west"}


def test_the_relay_objects_are_watched_by_the_labels_only_they_carry() -> None:
    """The API server sends no other Deployment (decision 0006); with exports on, every
    Service is watched (a foreign one of a frontend's name must be seen), as stubs."""
    caches = _caches()
    selector = controller.RELAY_OBJECT_SELECTOR
    assert caches.of_kind("Deployment").label_selector == selector
    assert caches.of_kind("Service").label_selector == selector
    wanted = dict(pair.split("=") for pair in selector.split(","))
    assert wanted.items() <= names.owned_object_labels("pool").items()
    assert not wanted.items() <= names.selector("pool").items()  # not the pods' labels
    informers = SharedInformers(FakeClient())
    exported = controller.relay_caches(
        informers, namespace=None, dgd_version="v1beta1", frontends=True
    )
    assert exported.of_kind("Deployment").label_selector == selector
    assert exported.of_kind("Service").label_selector is None


def _served(body: dict[str, Any], **more: Any) -> dict[str, Any]:
    """`body` as the API server answers it: identity, a field manager's entry, more."""
    out = copy.deepcopy(body)
    out["metadata"] |= {
        "uid": "0c4b2a8e-7a1b-4a40-9e0b-000000000001",
        "resourceVersion": "3",
        "generation": 1,
        "creationTimestamp": "2026-12-03T10:00:00Z",
        "managedFields": [
            {
                "manager": "dynamo-pool-operator",
                "operation": "Apply",
                "apiVersion": body.get("apiVersion", "v1"),
                "time": "2026-12-03T10:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}},
            }
        ],
    }
    return out | more


def _realistic() -> dict[str, tuple[Any, dict[str, Any], Rule | None, dict[str, Any] | None]]:
    """Each kind the relay controller caches: its informer, an object as served, and
    for the objects a relay owns, the drift rule and the body it compares with."""
    informers = SharedInformers(FakeClient())
    caches = controller.relay_caches(
        informers, namespace=None, dgd_version="v1beta1", frontends=True
    )
    exports = informers.get(serviceexports("v1beta1"), None)
    meta = {"name": "pool", "namespace": "team", "uid": "0c4b2a8e-7a1b-4a40-9e0b-000000000002"}
    relay = relay_from_object({"metadata": meta, "spec": {}}, RelayDefaults("relay:1", 8090))
    pool = pool_from_object({"metadata": {"name": "pool", "namespace": "team"}})
    deployment = render.deployment(relay, pool, "c")
    service = render.service(relay)
    export = export_body(serviceexports("v1beta1"), relay, "pool-pool-relay")
    stamp = "2026-12-03T10:00:01Z"
    relay_status = {
        "observedGeneration": 1,
        "clusterId": "east",
        "conditions": [
            {
                "type": t,
                "status": "True",
                "reason": t,
                "message": f"{t}: pool-pool-relay",
                "lastTransitionTime": stamp,
                "observedGeneration": 1,
            }
            for t in ("Published", "RelayAvailable", "Exported", "Ready")
        ],
        "exports": [{"name": "pool-pool-relay", "state": "Exported"}],
    }
    dgd = {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "pool", "namespace": "team"},
        "spec": {"components": [{"name": "Frontend", "type": "frontend", "replicas": 1}]},
    }
    return {
        "relay": (
            caches.relays,
            _served(
                {
                    "apiVersion": "nvidia.com/v1alpha1",
                    "kind": "DynamoPoolRelay",
                    "metadata": dict(meta),
                    "spec": {"clusterId": "east"},
                },
                status=relay_status,
            ),
            None,
            None,
        ),
        "dgd": (caches.dgds, _served(dgd), None, None),
        "deployment": (
            caches.of_kind("Deployment"),
            _served(deployment, status={"observedGeneration": 1, "replicas": 2}),
            kinds.rule("Deployment"),
            deployment,
        ),
        "service": (
            caches.of_kind("Service"),
            _served(service, status={"loadBalancer": {}}),
            kinds.rule("Service"),
            service,
        ),
        "export": (exports, _served(export), EXPORT_DRIFT, export),
    }


@pytest.mark.parametrize("kind", ["relay", "dgd", "deployment", "service", "export"])
def test_what_the_caches_share_changes_no_value_and_no_decision(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caches make equal parts of their objects one (`share_common_parts`): keys,
    namespaces, owner references, the vocabulary. A reader sees exactly what the kind's
    transform keeps, keys in order, and the drift rule decides alike on it."""
    informer, served, rule, body = _realistic()[kind]
    with monkeypatch.context() as m:
        m.setattr(sharing, "share_common_parts", lambda obj, *parts: obj)
        unshared = informer.as_cached(orjson.loads(orjson.dumps(served)))
    cached = informer.as_cached(orjson.loads(orjson.dumps(served)))
    # A relay's status is a `ShownStatus`: its digests packed in bytes.
    assert orjson.dumps(cached, default=bytes.hex) == orjson.dumps(unshared, default=bytes.hex)
    if rule is not None and body is not None:
        assert drift(rule, cached, body) == drift(rule, unshared, body) == NO_DRIFT


def test_relay_objects_alike_share_what_their_trim_keeps_of_spec_and_status() -> None:
    """Every pool's relay Deployment keeps `{"replicas": 2}` of its spec, every relay
    Service `{"clusterIP": "None"}`: one copy each; a different one is its own."""
    realistic = _realistic()
    deployments, deployment = realistic["deployment"][:2]
    services, service = realistic["service"][:2]
    assert share_of(deployments).shared == controller.RELAY_OBJECT_SHARED
    assert share_of(services).shared == controller.RELAY_OBJECT_SHARED

    def cached(informer: Any, served: dict[str, Any], replicas: int | None = None) -> Any:
        body = orjson.loads(orjson.dumps(served))
        if replicas is not None:
            body["spec"]["replicas"] = replicas
        return informer.as_cached(body)

    a, b = cached(deployments, deployment), cached(deployments, deployment)
    c = cached(deployments, deployment, replicas=3)
    assert a["spec"] is b["spec"]
    assert a["status"] is b["status"]
    assert c["spec"] == {"replicas": 3}
    assert c["spec"] is not a["spec"]
    assert cached(services, service)["spec"] is cached(services, service)["spec"]


@pytest.mark.parametrize(
    ("kind", "kept"),
    [("relay", False), ("dgd", False), ("deployment", False), ("service", True)],
)
def test_a_creation_time_is_cached_only_where_a_pass_reads_it(kind: str, kept: bool) -> None:
    """A relay Service's creation time ends the hold after its replacement
    (`exports/plan.py`), an export's its grace for confirmation (`exports/verdict.py`);
    no pass reads a relay's, a DGD's or a relay Deployment's: ~70 bytes an object, and
    a relay's or DGD's metadata of five keys is a smaller map than one of six."""
    informer, served = _realistic()[kind][:2]
    cached = informer.as_cached(orjson.loads(orjson.dumps(served)))
    assert ("creationTimestamp" in cached["metadata"]) is kept


@pytest.mark.parametrize("kind", ["deployment", "service"])
def test_a_relay_objects_render_hash_is_kept_in_its_digest_only(kind: str) -> None:
    """The render-hash annotation is a closed field: the view's digest covers it, and no
    pass reads it from the cache. A map of its own for it would be ~250 bytes an object;
    an edit of it alone is still a change of the relay object (and drift)."""
    informer, served, rule, body = _realistic()[kind]
    cached = informer.as_cached(orjson.loads(orjson.dumps(served)))
    assert "annotations" not in cached["metadata"]
    edited = copy.deepcopy(served)
    edited["metadata"]["annotations"][names.RENDER_HASH] = "0000000000000000"
    recached = informer.as_cached(orjson.loads(orjson.dumps(edited)))
    assert controller.relay_object_changed(EventType.MODIFIED, cached, recached)
    assert drift(rule, recached, body)
    assert not drift(rule, cached, body)


def _cached_relay_objects(name: str, *, cluster_ip: str | None = None) -> dict[str, Any]:
    """A relay's Deployment and Service as their caches keep them, each decoded anew (no
    string of one is another's, as from the API server). `cluster_ip`: the Service is
    not headless, and the server gave it this one."""
    caches = _caches()
    meta = {"name": name, "namespace": "team", "uid": str(uuid.uuid4())}
    spec = {} if cluster_ip is None else {"service": {"headless": False}}
    relay = relay_from_object({"metadata": meta, "spec": spec}, RelayDefaults("relay:1", 8090))
    pool = pool_from_object({"metadata": {"name": name, "namespace": "team"}})
    deployment = _served(render.deployment(relay, pool, "c"))
    service = _served(render.service(relay))
    if cluster_ip is not None:
        service["spec"]["clusterIP"] = cluster_ip
    return {
        "deployment": caches.of_kind("Deployment").as_cached(
            orjson.loads(orjson.dumps(deployment))
        ),
        "service": caches.of_kind("Service").as_cached(orjson.loads(orjson.dumps(service))),
    }


def _held(value: Any, wanted: str) -> list[str]:
    """The strings equal to `wanted` that `value` holds, through maps, lists and a
    record's fields: whatever form a view takes."""
    if type(value) is str:
        return [value] if value == wanted else []
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, list | tuple):
        items = list(value)
    elif dataclasses.is_dataclass(value):
        items = [getattr(value, f.name) for f in dataclasses.fields(value)]
    else:
        return []
    return [s for item in items for s in _held(item, wanted)]


@pytest.mark.parametrize("kind", ["deployment", "service"])
def test_a_cached_view_is_no_map_around_its_open_values(kind: str) -> None:
    """A cache keeps a view of each relay object, two a pool: the digest and the open
    values in a record smaller than the smallest map, not in a map of their own (184
    bytes on CPython 3.11)."""
    view = _cached_relay_objects("pool")[kind][VIEW]
    assert sys.getsizeof(view) < sys.getsizeof({})


@pytest.mark.parametrize(
    ("kind", "value"), [("deployment", names.RELAY_APP), ("service", HEADLESS_CLUSTER_IP)]
)
def test_what_every_render_holds_is_one_string_in_every_pools_view(kind: str, value: str) -> None:
    """Every relay Deployment's view holds its pods' `app.kubernetes.io/name`, every
    headless relay Service's its `clusterIP: None`: one string for all pools, not one
    each."""
    a, b = (_cached_relay_objects(f"pool-{uuid.uuid4().hex[:8]}")[kind][VIEW] for _ in "ab")
    (x,) = _held(a, value)
    (y,) = _held(b, value)
    assert x is y


def test_a_views_string_no_render_holds_is_its_own() -> None:
    """Only what a render holds is shared across views: a ClusterIP (the server's, one a
    Service) is each view's own, so nothing that grows without bound is kept."""
    ip = "10.96.0.10"
    a, b = (_cached_relay_objects("pool", cluster_ip=ip)["service"][VIEW] for _ in "ab")
    (x,) = _held(a, ip)
    (y,) = _held(b, ip)
    assert x is not y


@pytest.mark.parametrize("kind", ["deployment", "service"])
def test_a_views_owner_references_are_the_cached_metadatas(kind: str) -> None:
    """The owner references a view compares are the metadata's list, shared with the
    relay's other objects (`share_common_parts`)."""
    cached = _cached_relay_objects("pool")[kind]
    owners = dict(zip(cached[VIEW].open[::2], cached[VIEW].open[1::2], strict=True))
    assert owners["metadata.ownerReferences"] is cached["metadata"]["ownerReferences"]


@pytest.mark.parametrize("kind", ["deployment", "service"])
def test_a_relay_object_changed_as_its_view_says(kind: str) -> None:
    """Views are compared by value: the same object decoded again has not changed, an
    edit of a field we render (kept only in the digest) has."""
    informer, served = _realistic()[kind][:2]

    def cached(edit: bool = False) -> Any:
        body = orjson.loads(orjson.dumps(served))
        if edit and kind == "deployment":
            body["spec"]["template"]["spec"]["containers"][0]["image"] = "edited"
        elif edit:
            body["spec"]["ports"][0]["port"] = 1
        return informer.as_cached(body)

    old = cached()
    assert not controller.relay_object_changed(EventType.MODIFIED, old, cached())
    assert controller.relay_object_changed(EventType.MODIFIED, old, cached(edit=True))


def test_the_relay_caches_table_of_words_and_conditions_alike_stays_bounded() -> None:
    """The relay cache holds the words and conditions a fleet shows alike once
    (`keep_relay_fields`); a table that starts over when full, as old times fade."""
    table = controller._SHOWN_ALIKE
    for second in range(3 * table.limit):
        relay = {"metadata": {"name": "r"}, "status": _stamped_status(second)}
        controller.keep_relay_fields(relay)
        assert len(table) <= table.limit
    assert table.renew


def _stamped_status(second: int) -> dict[str, Any]:
    since = f"2026-12-04T10:{second // 60 % 60:02d}:{second % 60:02d}Z"
    return {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": since}]}


def _as_cached(informer: Any, served: dict[str, Any]) -> Any:
    return informer.as_cached(orjson.loads(orjson.dumps(served)))
