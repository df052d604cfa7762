"""The store's indexes against a model: whatever the order of puts, deletes and
replaces, `by_index`/`index_keys`/`index_values` answer as a plain scan would, in
filing order, with no empty bucket left (a bucket of one object is held as the object)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from dynamo_pool_operator.runtime.cache.store import Key, Store


def _obj(name: str, values: list[str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "values": values}


def _by(obj: dict[str, Any]) -> list[str]:
    return list(obj["values"])


def _model(objects: dict[Key, dict[str, Any]], value: str) -> set[Key]:
    return {k for k, o in objects.items() if value in o["values"]}


@pytest.mark.parametrize("population", [8, 24], ids=["small-buckets", "large-buckets"])
@pytest.mark.parametrize("seed", range(20))
def test_indexes_answer_as_a_scan_whatever_the_changes(seed: int, population: int) -> None:
    rng = random.Random(seed)
    store = Store("test")
    store.add_index("v", _by)
    objects: dict[Key, dict[str, Any]] = {}
    names = [f"o{i}" for i in range(population)]
    words = ["a", "b", "c", "d"]
    filed: dict[str, list[Key]] = {w: [] for w in words}  # a changed object goes last
    for _ in range(300):
        roll = rng.random()
        if roll < 0.6:
            name = rng.choice(names)
            obj = _obj(name, rng.sample(words, rng.randint(0, 3)))
            store.put(obj)
            objects[("ns", name)] = obj
            for w in words:
                filed[w] = [k for k in filed[w] if k != ("ns", name)]
            for w in obj["values"]:
                filed[w].append(("ns", name))
        elif roll < 0.95:
            name = rng.choice(names)
            store.delete("ns", name)
            objects.pop(("ns", name), None)
        else:
            kept = [o for k, o in objects.items() if rng.random() < 0.5]
            store.replace(kept)
            objects = {("ns", o["metadata"]["name"]): o for o in kept}
            filed = {w: [k for k, o in objects.items() if w in o["values"]] for w in words}
        for w in words:
            assert set(store.index_keys("v", w)) == _model(objects, w)
            assert len(store.index_keys("v", w)) == len(_model(objects, w))
            assert store.index_keys("v", w) == [k for k in filed[w] if k in _model(objects, w)]
            assert {id(o) for o in store.by_index("v", w)} == {
                id(objects[k]) for k in _model(objects, w)
            }
        assert set(store.index_values("v")) == {w for w in words if _model(objects, w)}


def test_keys_come_in_filing_order_and_a_lone_key_survives_its_peers() -> None:
    store = Store("test")
    store.add_index("v", _by)
    for name in ("x", "y", "z"):
        store.put(_obj(name, ["a"]))
    assert store.index_keys("v", "a") == [("ns", "x"), ("ns", "y"), ("ns", "z")]
    store.delete("ns", "x")
    store.delete("ns", "z")
    assert store.index_keys("v", "a") == [("ns", "y")]
    store.put(_obj("w", ["a"]))
    assert store.index_keys("v", "a") == [("ns", "y"), ("ns", "w")]
    store.put(_obj("y", ["b"]))  # moved to another value
    assert store.index_keys("v", "a") == [("ns", "w")]
    assert store.index_keys("v", "b") == [("ns", "y")]
    store.put(_obj("y", ["b"]))  # filed again under the same value: once
    assert store.index_keys("v", "b") == [("ns", "y")]
    store.delete("ns", "w")
    store.delete("ns", "y")
    assert store.index_values("v") == []


def test_an_index_holds_its_objects_not_a_key_and_a_map_each() -> None:
    """A relay's three exports under its uid: the bucket holds the three objects (by
    identity, in filing order), not a tuple key and a map entry each, and no map of
    key to values (removal reads the old object's values: index functions are pure,
    as client-go's indexers). ~550 bytes a pool at 10,000 pools."""
    import gc
    import tracemalloc

    objs = [_obj(f"p{i:05d}-{s}", [f"uid-{i:05d}"]) for i in range(1000) for s in "abc"]
    gc.collect()
    store = Store("test")
    for o in objs:
        store.put(o)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        store.add_index("v", _by)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown / len(objs) < 64, f"{grown / len(objs):.0f} bytes an object"
    assert [id(o) for o in store.by_index("v", "uid-00007")] == [id(o) for o in objs[21:24]]
