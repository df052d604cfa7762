"""Equal parts of cached objects held once (`runtime/cache/sharing.py`): keys,
namespaces, owner references, labels, a kind's shared parts and its bounded vocabulary;
nothing changes value, and what changes without bound is never interned."""

from __future__ import annotations

import sys
import uuid
from typing import Any

import orjson

from dynamo_pool_operator.runtime.cache.sharing import Share, share_common_parts
from dynamo_pool_operator.runtime.cache.store import Obj
from dynamo_pool_operator.runtime.objects.diff import VIEW, View
from tests.unit.runtime.cache.test_informer import obj


def test_equal_owner_references_are_one_list_and_go_with_the_last_holder() -> None:
    """A relay's five objects carry the same owner reference: cached, they share it."""
    import gc

    from dynamo_pool_operator.runtime.cache import sharing

    def owned(name: str, owner: str) -> dict[str, Any]:
        o = obj(name)
        o["metadata"]["ownerReferences"] = [{"uid": owner, "controller": True, "name": "r"}]
        o["metadata"]["labels"] = {
            "pool": "p" + owner,
            "app.kubernetes.io/managed-by": "".join(["op", "erator"]),
        }
        return o

    # Owners no other test holds: what the table keeps is this test's alone.
    u1, u2 = (f"u-{uuid.uuid4().hex}" for _ in range(2))
    a, b, c = (share_common_parts(owned(n, u)) for n, u in (("a", u1), ("b", u1), ("c", u2)))
    refs = [x["metadata"]["ownerReferences"] for x in (a, b, c)]
    assert refs[0] is refs[1]
    assert refs[0] is not refs[2]
    assert refs[0] == [{"uid": u1, "controller": True, "name": "r"}]
    managed_by = [x["metadata"]["labels"]["app.kubernetes.io/managed-by"] for x in (a, b)]
    assert managed_by[0] is managed_by[1]  # a well-known label's value: vocabulary
    key_a, key_c = (sharing._owners_key(refs[i]) for i in (0, 2))
    del a, b, refs
    gc.collect()
    assert key_a not in sharing._SHARED_OWNERS
    assert key_c in sharing._SHARED_OWNERS  # c's is still held


def test_sharing_owner_references_keeps_little_per_owner() -> None:
    """The table that makes equal owner references one list costs less than the lists it
    saves. Its key was an `orjson.dumps` result: a 4 kB buffer behind a 200-byte value,
    82 MB for the 20,000 owner lists of a 10,000-pool fleet."""
    import gc
    import sys
    import tracemalloc

    objs = []
    for i in range(2000):
        # Names interned already: what is measured is the owner table, not the interning.
        o = obj(sys.intern(f"o{i}"))
        o["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "nvidia.com/v1alpha1",
                "kind": "DynamoPoolRelay",
                "name": sys.intern(f"pool-{i:05d}"),
                "uid": f"0c4b2a8e-7a1b-4a40-9e0b-{i:012d}",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        objs.append(o)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        shared = [share_common_parts(o) for o in objs]
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert all(type(o["metadata"]["ownerReferences"]).__name__ == "_SharedList" for o in shared)
    assert grown / len(objs) < 1000, f"{grown / len(objs):.0f} bytes per owner list"


def test_owner_references_alike_in_any_key_order_are_one_list() -> None:
    """The server writes a reference's keys in the order its kind's codec has: a relay
    Deployment's start with `apiVersion, kind`, a ServiceExport's (a CRD) are sorted.
    Equal all the same: one list for the relay's Deployment, Service and exports."""
    ref = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoPoolRelay",
        "name": "pool-k",
        "uid": "u-key-order",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    a, b = obj("a"), obj("b")
    a["metadata"]["ownerReferences"] = [dict(ref)]
    b["metadata"]["ownerReferences"] = [dict(sorted(ref.items()))]
    shared = [share_common_parts(x)["metadata"]["ownerReferences"] for x in (a, b)]
    assert shared[0] is shared[1]


def test_an_owner_list_is_shared_only_with_an_equal_one() -> None:
    """The table is keyed by a hash: two lists that hash alike but differ stay apart."""
    from dynamo_pool_operator.runtime.cache import sharing

    a, b = obj("a"), obj("b")
    a["metadata"]["ownerReferences"] = [{"uid": "u1", "name": "r"}]
    b["metadata"]["ownerReferences"] = [{"uid": "u2", "name": "r"}]
    a = share_common_parts(a)
    held = a["metadata"]["ownerReferences"]
    # b's list under a's key: what a hash collision would look like.
    sharing._SHARED_OWNERS[sharing._owners_key(b["metadata"]["ownerReferences"])] = held
    b = share_common_parts(b)
    assert b["metadata"]["ownerReferences"] == [{"uid": "u2", "name": "r"}]
    assert b["metadata"]["ownerReferences"] is not held


def test_the_bounded_vocabulary_is_one_string_each() -> None:
    """Kinds, versions, condition types, statuses and reasons repeat across thousands of
    cached objects: each distinct one is kept once, and so is each key (the decoder's).
    Values that change without bound (a condition's time and message, names, uids,
    resourceVersions) are each object's own (see the next test); creation times are
    held alike in a table that starts over when full (a cold start stamps one second
    on many objects)."""

    def relay(name: str) -> Obj:
        o = orjson.loads(
            orjson.dumps(
                {
                    "apiVersion": "nvidia.com/v1alpha1",
                    "kind": "DynamoPoolRelay",
                    "metadata": {
                        "name": name,
                        "namespace": "ns",
                        "uid": f"uid-{name}",
                        "resourceVersion": "41",
                        "creationTimestamp": "2026-12-02T10:00:00Z",
                    },
                    "status": {
                        "conditions": [
                            {
                                "type": "Ready",
                                "status": "True",
                                "reason": "PoolReady",
                                "lastTransitionTime": "2026-12-02T10:00:01Z",
                                "message": "the pool is ready",
                                "observedGeneration": 1,
                            }
                        ],
                        "exports": [{"name": f"{name}-pool-relay", "state": "Exported"}],
                    },
                }
            )
        )
        return share_common_parts(o, frozenset({("status", "exports", "*", "state")}))

    a, b = relay("a"), relay("b")
    ca, cb = a["status"]["conditions"][0], b["status"]["conditions"][0]
    for key in ("type", "status", "reason"):
        assert ca[key] is cb[key], key
    assert a["apiVersion"] is b["apiVersion"]
    assert a["kind"] is b["kind"]
    # The kind's own vocabulary, given by the informer's owner.
    assert a["status"]["exports"][0]["state"] is b["status"]["exports"][0]["state"]
    assert all(x is y for x, y in zip(ca, cb, strict=True))  # keys
    assert all(x is y for x, y in zip(a["metadata"], b["metadata"], strict=True))
    for key in ("lastTransitionTime", "message"):
        assert ca[key] is not cb[key], key
    assert a["metadata"]["creationTimestamp"] is b["metadata"]["creationTimestamp"]
    assert a["metadata"]["resourceVersion"] is not b["metadata"]["resourceVersion"]
    assert ca["observedGeneration"] == 1


def _fresh(value: str) -> str:
    """An equal string that is no other string object (as a decoder whose key cache
    was crowded out hands it over)."""
    return "".join(list(value))


def _fresh_keys(node: Any) -> Any:
    if isinstance(node, dict):
        return {_fresh(k): _fresh_keys(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_fresh_keys(v) for v in node]
    return _fresh(node) if isinstance(node, str) else node


def _view_open(opened: dict[str, Any]) -> tuple[Any, ...]:
    """`View.open` of these places and values, every string fresh."""
    return tuple(x for at, value in opened.items() for x in (_fresh(at), _fresh_keys(value)))


def _opened(view: View) -> dict[str, Any]:
    return dict(zip(view.open[::2], view.open[1::2], strict=True))


def test_keys_and_namespaces_are_one_string_each_across_cached_objects() -> None:
    """Every cached object holds `metadata`, `namespace`, `uid`, ... and its namespace's
    name: one string each, however many objects (a pool caches seven)."""

    def export(name: str) -> Obj:
        return share_common_parts(
            _fresh_keys(
                {
                    "apiVersion": "multicluster.x-k8s.io/v1beta1",
                    "kind": "ServiceExport",
                    "metadata": {
                        "name": name,
                        "namespace": "team-a",
                        "uid": f"uid-{name}",
                        "labels": {"nvidia.com/dynamo-graph-deployment-name": name},
                    },
                }
            )
        )

    a, b = export("a"), export("b")
    assert all(x is y for x, y in zip(a, b, strict=True))
    assert all(x is y for x, y in zip(a["metadata"], b["metadata"], strict=True))
    assert all(
        x is y for x, y in zip(a["metadata"]["labels"], b["metadata"]["labels"], strict=True)
    )
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert a["metadata"]["name"] is not b["metadata"]["name"]


def test_equal_strings_within_one_object_are_one() -> None:
    """A relay's conditions moved at once share their transition time; a value met in
    another object is not taken from it (only the vocabulary, namespaces and creation
    times are)."""
    stamp = f"2026-12-03T10:00:00.{uuid.uuid4().int % 10**6:06d}Z"  # no other test's

    def relay() -> Obj:
        return share_common_parts(
            _fresh_keys(
                {
                    "metadata": {"name": "pool", "namespace": "ns", "creationTimestamp": stamp},
                    "status": {
                        "conditions": [
                            {"type": t, "status": "True", "lastTransitionTime": stamp}
                            for t in ("Ready", "Published", "Exported")
                        ]
                    },
                }
            )
        )

    a, b = relay(), relay()
    times = [c["lastTransitionTime"] for c in a["status"]["conditions"]]
    assert all(t is a["metadata"]["creationTimestamp"] for t in times)
    assert b["status"]["conditions"][0]["lastTransitionTime"] is not times[0]


def test_sharing_changes_no_value_and_no_order() -> None:
    """What readers see of a shared object is what was decoded: equal, keys in order."""
    o = _fresh_keys(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "pool-pool-relay",
                "namespace": "team",
                "ownerReferences": [{"uid": "u", "name": "pool", "controller": True}],
                "labels": {"z": "1", "a": "1"},
            },
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"args": ["a", "a"]}]}}},
        }
    )
    o[VIEW] = View(
        "d",
        _view_open(
            {
                "metadata.ownerReferences": [{"uid": "u", "name": "pool", "controller": True}],
                "spec.template.metadata.labels": {"app": "pool", "z": "1"},
            }
        ),
    )
    before = orjson.dumps(o)
    assert orjson.dumps(share_common_parts(o)) == before


def test_a_views_owner_references_are_the_metadatas_shared_list() -> None:
    """A trimmed relay object's view keeps the owner references it compares: the same
    list as the metadata's, itself shared with the relay's other objects."""
    refs = [{"apiVersion": "nvidia.com/v1alpha1", "uid": "u9", "name": "pool", "controller": True}]

    def trimmed(name: str) -> Obj:
        return share_common_parts(
            _fresh_keys(
                {
                    "metadata": {"name": name, "namespace": "ns", "ownerReferences": refs},
                    VIEW: View("d", _view_open({"metadata.ownerReferences": refs})),
                }
            )
        )

    a, b = trimmed("a"), trimmed("b")
    assert _opened(a[VIEW])["metadata.ownerReferences"] is a["metadata"]["ownerReferences"]
    assert a["metadata"]["ownerReferences"] is b["metadata"]["ownerReferences"]
    other = trimmed("c")
    other[VIEW] = View("d", _view_open({"metadata.ownerReferences": [{"uid": "other"}]}))
    other = share_common_parts(other)
    assert _opened(other[VIEW])["metadata.ownerReferences"] == [{"uid": "other"}]


def test_a_views_open_values_are_compacted_as_the_objects_own_fields() -> None:
    """A view is a record, which the walk of an object's maps does not enter: its open
    values get the canonical keys and the object's own equal strings all the same, and
    a string a view shares across objects (its shape's sample's) stays the shared one,
    also where the object holds it before the view."""
    sample = _fresh("dynamo-pool-relay")

    def trimmed(name: str) -> Obj:
        obj = _fresh_keys(
            {"metadata": {"name": name, "namespace": "ns"}, "spec": {"app": "dynamo-pool-relay"}}
        )
        labels = _fresh_keys({"app.kubernetes.io/instance": name})
        labels[_fresh("app.kubernetes.io/name")] = sample
        obj[VIEW] = View(_fresh("d"), (_fresh("spec.template.metadata.labels"), labels))
        return share_common_parts(obj)

    a, b = trimmed("a"), trimmed("b")
    assert type(a[VIEW]) is View
    assert a[VIEW] == View(
        "d",
        (
            "spec.template.metadata.labels",
            {
                "app.kubernetes.io/instance": "a",
                "app.kubernetes.io/name": "dynamo-pool-relay",
            },
        ),
    )
    (at_a, labels_a), (at_b, labels_b) = a[VIEW].open, b[VIEW].open
    assert at_a is at_b
    assert all(x is y for x, y in zip(labels_a, labels_b, strict=True))  # keys
    assert labels_a["app.kubernetes.io/instance"] is a["metadata"]["name"]
    assert labels_a["app.kubernetes.io/name"] is sample
    assert labels_b["app.kubernetes.io/name"] is sample
    assert a["spec"]["app"] is sample


def test_equal_labels_and_field_manager_summaries_are_one_part() -> None:
    """A pool's three exports carry the same labels, its relay objects the same summary
    of who wrote them: one map, one list, shared until the last holder goes."""
    import gc

    from dynamo_pool_operator.runtime.cache import sharing

    token = uuid.uuid4().hex[:8]

    def export(name: str, pool: str) -> Obj:
        return share_common_parts(
            _fresh_keys(
                {
                    "metadata": {
                        "name": name,
                        "namespace": "ns",
                        "labels": {"nvidia.com/dynamo-graph-deployment-name": pool},
                        "managedFields": [{"manager": f"op-{token}", "operation": "Update"}],
                    }
                }
            )
        )

    a, b, c = export("a", "p1"), export("b", "p1"), export("c", "p2")
    assert a["metadata"]["labels"] is b["metadata"]["labels"]
    assert c["metadata"]["labels"] is not a["metadata"]["labels"]
    assert c["metadata"]["labels"] == {"nvidia.com/dynamo-graph-deployment-name": "p2"}
    assert a["metadata"]["managedFields"] is c["metadata"]["managedFields"]
    assert orjson.dumps(a) == orjson.dumps(_fresh_keys(a))  # plain JSON as before
    before = len(sharing._SHARED_METADATA)
    del a, b
    gc.collect()
    assert len(sharing._SHARED_METADATA) == before - 1  # c's labels and list stay


def test_a_kinds_shared_parts_are_one_copy_across_its_objects() -> None:
    """Parts an informer is told are often alike (a fleet's specs, made from one
    template): equal ones are one map or list; others, and other places, their own."""
    share = Share(shared=frozenset({("spec",), ("status", "items"), ("a", "b")}))

    def cached(name: str, image: str) -> Obj:
        o = _fresh_keys(obj(name))
        o["spec"] = _fresh_keys({"image": image, "ports": [8090]})
        o["status"] = _fresh_keys({"items": [{"n": 1}], "other": [{"n": 1}]})
        o["a"] = "not a map"
        return share(o)

    a, b, c = cached("a", "relay:1"), cached("b", "relay:1"), cached("c", "relay:2")
    assert a["spec"] is b["spec"]
    assert a["spec"] == {"image": "relay:1", "ports": [8090]}
    assert c["spec"] is not a["spec"]
    assert c["spec"] == {"image": "relay:2", "ports": [8090]}
    assert a["status"]["items"] is c["status"]["items"]
    assert a["status"]["other"] is not b["status"]["other"]  # not a shared part
    assert a["a"] == "not a map"


def test_the_shared_string_tables_are_bounded() -> None:
    """Keys, namespace names and creation times are held in plain tables, not interned
    (see the next tests), and never more than their limit (`Alike`):
    a process that sees new names for months keeps at most that many."""
    from dynamo_pool_operator.runtime.cache import sharing

    tables = (sharing._KEYS, sharing._NAMESPACES, sharing._TIMES)
    assert all(0 < table.limit <= 16_384 for table in tables)
    assert sharing._TIMES.renew


def test_a_vocabulary_path_reaches_list_items_and_map_values_and_nothing_else() -> None:
    """`*` is every item of a list or value of a map; a place that holds no string, or
    a string too long to be a word, is left as it is."""
    token = uuid.uuid4().hex[:8]
    words = {w: _interned_copy(f"{w}-{token}") for w in ("a", "b", "c", "d")}
    long = "w" * 65 + token
    long_canary = _interned_copy(long)
    o = orjson.loads(
        orjson.dumps(
            {
                "spec": {
                    "services": {
                        "x": {"componentType": f"a-{token}", "other": f"b-{token}"},
                        "y": {"componentType": long},
                    },
                    "components": [{"type": f"c-{token}"}, {"type": 3}, f"d-{token}"],
                    "tags": [f"d-{token}"],
                }
            }
        )
    )
    vocabulary = frozenset(
        {
            ("spec", "services", "*", "componentType"),
            ("spec", "components", "*", "type"),
            ("spec", "tags", "*"),
        }
    )
    spec = share_common_parts(o, vocabulary)["spec"]
    assert spec["services"]["x"]["componentType"] is words["a"]
    assert spec["services"]["x"]["other"] is not words["b"]
    assert spec["services"]["y"]["componentType"] is not long_canary
    assert spec["components"][0]["type"] is words["c"]
    assert spec["components"][1]["type"] == 3
    assert spec["components"][2] is not words["d"]  # a list item, but not at a path
    assert spec["tags"][0] is words["d"]


def test_a_kinds_own_vocabulary_is_interned() -> None:
    token = uuid.uuid4().hex[:8]
    canary = _interned_copy(f"Exported-{token}")
    share = Share(vocabulary=frozenset({("status", "exports", "*", "state")}))
    o = obj("a")
    o["status"] = {"exports": [{"state": "".join(["Exported-", token])}]}
    assert share(o)["status"]["exports"][0]["state"] is canary


def _interned_copy(value: str) -> str:
    """The string the intern table holds for `value`, made from an equal copy first, so
    that a cached value `is` it only if the cache interned it."""
    return sys.intern("".join(list(value)))


def test_values_that_change_without_bound_are_not_interned() -> None:
    """On CPython 3.12.0 to 3.12.4 and on free-threaded builds an interned string is
    immortal: a cache that interns every new timestamp, message or name keeps each one
    for the life of the process. Only a bounded vocabulary is interned (keys, kinds,
    apiVersions, conditions' type, status and reason, field managers and operations,
    finalizers, well-known label values); what changes with every write is not."""
    token = uuid.uuid4().hex[:8]  # values no other string in this process has
    unbounded = {
        "name": f"pool-{token}",
        "namespace": f"ns-{token}",
        "creationTimestamp": f"2026-12-03T10:{token[:2]}:00Z",
        "label": f"team-{token}",
        "annotation": f"note {token}",
        "owner name": f"relay-{token}",
        "managedFields time": f"2026-12-03T11:{token[:2]}:00Z",
        "message": f"relay {token} is ready",
        "lastTransitionTime": f"2026-12-03T12:{token[:2]}:00Z",
        "export name": f"exp-{token}",
    }
    bounded = {
        "apiVersion": f"example{token}.com/v1",
        "kind": f"Relay{token}",
        "owner apiVersion": f"owner{token}.com/v1",
        "owner kind": f"Owner{token}",
        "manager": f"manager-{token}",
        "operation": f"Apply{token}",
        "managedFields apiVersion": f"fields{token}/v1",
        "fieldsType": f"FieldsV{token}",
        "finalizer": f"example.com/{token}",
        "managed-by": f"operator-{token}",
        "type": f"Ready{token}",
        "status": f"True{token}",
        "reason": f"Reason{token}",
    }
    canaries = {what: _interned_copy(v) for what, v in {**unbounded, **bounded}.items()}
    u, b = unbounded, bounded
    o = orjson.loads(
        orjson.dumps(
            {
                "apiVersion": b["apiVersion"],
                "kind": b["kind"],
                "metadata": {
                    "name": u["name"],
                    "namespace": u["namespace"],
                    "uid": f"uid-{token}",
                    "resourceVersion": "41",
                    "creationTimestamp": u["creationTimestamp"],
                    "labels": {"team": u["label"], "app.kubernetes.io/managed-by": b["managed-by"]},
                    "annotations": {"note": u["annotation"]},
                    "finalizers": [b["finalizer"]],
                    "ownerReferences": [
                        {
                            "apiVersion": b["owner apiVersion"],
                            "kind": b["owner kind"],
                            "name": u["owner name"],
                            "uid": f"owner-{token}",
                        }
                    ],
                    "managedFields": [
                        {
                            "manager": b["manager"],
                            "operation": b["operation"],
                            "apiVersion": b["managedFields apiVersion"],
                            "fieldsType": b["fieldsType"],
                            "time": u["managedFields time"],
                        }
                    ],
                },
                "status": {
                    "conditions": [
                        {
                            "type": b["type"],
                            "status": b["status"],
                            "reason": b["reason"],
                            "message": u["message"],
                            "lastTransitionTime": u["lastTransitionTime"],
                        }
                    ],
                    "exports": [{"name": u["export name"]}],
                },
            }
        )
    )
    o = share_common_parts(o)
    meta, cond = o["metadata"], o["status"]["conditions"][0]
    owner, fields = meta["ownerReferences"][0], meta["managedFields"][0]
    cached = {
        "name": meta["name"],
        "namespace": meta["namespace"],
        "creationTimestamp": meta["creationTimestamp"],
        "label": meta["labels"]["team"],
        "annotation": meta["annotations"]["note"],
        "owner name": owner["name"],
        "managedFields time": fields["time"],
        "message": cond["message"],
        "lastTransitionTime": cond["lastTransitionTime"],
        "export name": o["status"]["exports"][0]["name"],
        "apiVersion": o["apiVersion"],
        "kind": o["kind"],
        "owner apiVersion": owner["apiVersion"],
        "owner kind": owner["kind"],
        "manager": fields["manager"],
        "operation": fields["operation"],
        "managedFields apiVersion": fields["apiVersion"],
        "fieldsType": fields["fieldsType"],
        "finalizer": meta["finalizers"][0],
        "managed-by": meta["labels"]["app.kubernetes.io/managed-by"],
        "type": cond["type"],
        "status": cond["status"],
        "reason": cond["reason"],
    }
    assert all(cached[what] == v for what, v in {**unbounded, **bounded}.items())
    interned = sorted(what for what in unbounded if cached[what] is canaries[what])
    assert interned == [], f"values that change without bound were interned: {interned}"
    left = sorted(what for what in bounded if cached[what] is not canaries[what])
    assert left == [], f"the bounded vocabulary was not interned: {left}"


def _keyed_alike(m: dict[str, Any]) -> bool:
    """Whether `m` is a key-sharing map: smaller than a plain map of the same items (its
    shape made often enough for CPython to size its maps to it)."""
    return type(m) is dict and sys.getsizeof(m) < sys.getsizeof(dict(m))


def _fleet(shape: str, extra: dict[str, Any], n: int = 300) -> list[Obj]:
    """`n` objects of one shape no other test makes (a key of its own), shared."""
    made = []
    for i in range(n):
        o = obj(f"{shape}-{i}")
        o["metadata"] |= {"generation": 1, shape: "x"}
        o["spec"] = dict(extra)
        made.append(share_common_parts(o))
    return made


def test_maps_of_one_shape_share_one_key_table_and_read_as_before() -> None:
    """A fleet's cached maps come in few shapes (a Deployment's metadata: 7 keys, 272
    bytes as decoded): each is made a key-sharing `dict` whose keys are held once for
    its shape (128 bytes), its items, order and JSON unchanged."""
    shape = f"shape-{uuid.uuid4().hex}"
    spec = {"replicas": 2, "paused": False, "minReadySeconds": 0, "strategy": "x"}
    plain = obj(f"{shape}-299")
    plain["metadata"] |= {"generation": 1, shape: "x"}
    plain["spec"] = dict(spec)
    fleet = _fleet(shape, spec)
    last = fleet[-1]
    assert orjson.dumps(last) == orjson.dumps(plain)
    for held in (last, last["metadata"], last["spec"]):
        assert _keyed_alike(held), (sys.getsizeof(held), held)
    assert list(last["metadata"]) == list(plain["metadata"])
    assert [o["metadata"]["name"] for o in fleet[:2]] == [f"{shape}-0", f"{shape}-1"]


def test_a_map_of_many_keys_or_past_the_shapes_limit_stays_plain(
    monkeypatch: Any,
) -> None:
    """Free-form maps (a kind's arbitrary keys) could make shapes without bound: past
    16 keys, or once the table holds its limit of shapes, a map is an ordinary one."""
    from dynamo_pool_operator.runtime.cache import sharing

    wide = _fleet(f"wide-{uuid.uuid4().hex}", {f"k{i}": i for i in range(17)})[-1]
    assert _keyed_alike(wide["metadata"])
    assert not _keyed_alike(wide["spec"])
    monkeypatch.setattr(sharing, "_SHAPES_LIMIT", len(sharing._SHAPES))
    late = _fleet(f"late-{uuid.uuid4().hex}", {"replicas": 1})[-1]
    assert not _keyed_alike(late["metadata"])
    assert late["metadata"]["generation"] == 1


def test_keys_that_name_a_class_attribute_are_items_all_the_same() -> None:
    """A map's keys go in as items, never as attributes of the shape's class: a key
    such as `__class__` or `__dict__` is data like any other."""
    odd = obj("odd")
    odd["spec"] = {"__class__": "c", "__dict__": {"x": 1}, "__weakref__": None, "get": 2}
    spec = share_common_parts(odd)["spec"]
    assert spec == {"__class__": "c", "__dict__": {"x": 1}, "__weakref__": None, "get": 2}
    assert type(spec) is dict
    assert spec.get("get") == 2
