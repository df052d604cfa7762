"""The metadata view (runtime/objects/meta.py): one reading of every object, malformed included."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamo_pool_operator.runtime.objects.meta import Meta, controller_of, is_terminating, labels_of

WHOLE: dict[str, Any] = {
    "metadata": {
        "name": "pool-pool-relay",
        "namespace": "team",
        "uid": "u-1",
        "resourceVersion": "42",
        "generation": 3,
        "creationTimestamp": "2026-12-01T10:00:00Z",
        "deletionTimestamp": "2026-12-01T11:00:00Z",
        "labels": {"a": "b"},
        "annotations": {"c": "d"},
        "ownerReferences": [
            {"kind": "X", "uid": "not-it"},
            {"kind": "DynamoPoolRelay", "uid": "r-1", "controller": True},
        ],
    },
    "status": {"conditions": [{"type": "Ready", "status": "True"}]},
}


def test_every_field_of_a_whole_object() -> None:
    m = Meta(WHOLE)
    assert (m.name, m.namespace, m.uid, m.resource_version, m.generation) == (
        "pool-pool-relay",
        "team",
        "u-1",
        "42",
        3,
    )
    assert (dict(m.labels), dict(m.annotations)) == ({"a": "b"}, {"c": "d"})
    assert m.terminating
    assert m.created == datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    assert m.age(datetime(2026, 12, 1, 10, 1, 30, tzinfo=UTC)) == 90.0
    assert m.controller == {"kind": "DynamoPoolRelay", "uid": "r-1", "controller": True}
    assert len(m.owner_references) == 2
    assert m.condition("Ready") == {"type": "Ready", "status": "True"}
    assert m.condition("Exported") is None


@pytest.mark.parametrize(
    "obj",
    [
        None,
        [],
        "text",
        {},
        {"metadata": None},
        {"metadata": []},
        {"metadata": {"name": 3, "generation": "3", "labels": [], "ownerReferences": {}}},
        {"metadata": {"generation": True, "creationTimestamp": "yesterday"}},
        {"status": "x"},
        {"status": {"conditions": "x"}},
    ],
    ids=repr,
)
def test_a_malformed_object_reads_as_absent_values(obj: Any) -> None:
    m = Meta(obj)
    assert (m.name, m.namespace, m.uid, m.resource_version) == ("", "", "", "")
    assert m.generation == 0
    assert (dict(m.labels), dict(m.annotations), m.owner_references) == ({}, {}, [])
    assert not m.terminating
    assert m.created is None
    assert m.age(datetime(2026, 1, 1, tzinfo=UTC)) is None
    assert m.controller is None
    assert m.condition("Ready") is None
    assert dict(labels_of(obj)) == {}
    assert not is_terminating(obj)
    assert controller_of(obj) is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
FIELDS = st.sampled_from(
    [
        "name",
        "namespace",
        "generation",
        "labels",
        "ownerReferences",
        "deletionTimestamp",
        "creationTimestamp",
    ]
)


@given(meta=JSON | st.dictionaries(FIELDS, JSON), status=JSON)
def test_reading_any_object_never_raises(meta: Any, status: Any) -> None:
    m = Meta({"metadata": meta, "status": status})
    assert isinstance(m.name, str)
    assert isinstance(m.generation, int)
    assert isinstance(m.terminating, bool)
    _ = (m.labels, m.annotations, m.owner_references, m.controller, m.created)
    _ = m.condition("Ready")
    obj = {"metadata": meta, "status": status}
    # The functions that read one field without making the view read it as the view does.
    assert labels_of(obj) == m.labels
    assert is_terminating(obj) is m.terminating
    refs = meta.get("ownerReferences") if isinstance(meta, dict) else None
    refs = refs if isinstance(refs, list) else []
    controllers = [r for r in refs if isinstance(r, dict) and r.get("controller") is True]
    expected = controllers[0] if controllers else None
    assert controller_of(obj) == expected


def test_is_map_takes_any_mapping_and_nothing_else() -> None:
    """Decoded objects are dicts, but a reader may hand any mapping (a read-only
    view of a cached object): both are maps; a list, a string or None is not."""
    from types import MappingProxyType

    from dynamo_pool_operator.runtime.objects import Meta, is_map

    view = MappingProxyType({"metadata": MappingProxyType({"name": "p"})})
    assert is_map({})
    assert is_map(view)
    assert not any(is_map(v) for v in ([], "metadata", None, 1))
    assert Meta(view).name == "p"


def test_the_labels_read_without_the_view_are_the_views_labels() -> None:
    """`labels_of` (the drift rule's reader) and `Meta.labels` are one reading: of a
    whole object, of read-only mappings at any level, and of the cache's dict subclass."""
    from types import MappingProxyType

    class Shared(dict[str, Any]):
        pass

    assert labels_of(WHOLE) == {"a": "b"}
    for obj in (
        MappingProxyType({"metadata": MappingProxyType({"labels": MappingProxyType({"a": "b"})})}),
        {"metadata": Shared(labels=Shared(a="b"))},
    ):
        assert labels_of(obj) == Meta(obj).labels == {"a": "b"}


def test_a_dict_subclass_is_a_map() -> None:
    from dynamo_pool_operator.runtime.objects import is_map

    class Shared(dict[str, Any]):
        pass

    assert is_map(Shared())
    assert Meta({"metadata": Shared(name="p")}).name == "p"
