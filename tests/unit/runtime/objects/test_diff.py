"""Would a server-side apply change anything? (runtime/objects/diff.py)

`contains(live, desired)`: every field we set is present in the live object with the same
value; fields others set are ignored; list elements are matched by their merge key
(uid, name, containerPort, port) when every desired element has one, else by position;
quantities, at the paths named, by value. `with_hash` stores a hash of the rendered intent that
excludes itself, so re-hashing is idempotent.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamo_pool_operator.runtime.objects.diff import contains, needs_apply, render_hash, with_hash

ANNOTATION = "example.com/render-hash"


# --------------------------------------------------------------------------- contains: maps


@pytest.mark.parametrize(
    ("live", "desired"),
    [
        pytest.param({"a": 1}, {"a": 1}, id="equal"),
        pytest.param({"a": 1, "b": 2}, {"a": 1}, id="extra-live-field"),
        pytest.param({"a": {"b": 1, "c": 2}}, {"a": {"b": 1}}, id="extra-nested-field"),
        pytest.param({"a": {"b": {"c": [1, 2]}}, "z": 0}, {"a": {"b": {"c": [1, 2]}}}, id="deep"),
        pytest.param({"a": 1}, {}, id="empty-desired"),
        pytest.param({"a": {}}, {"a": {}}, id="empty-nested-map"),
        pytest.param({"a": None}, {"a": None}, id="null-equal"),
        pytest.param("x", "x", id="scalar"),
    ],
)
def test_contains_holds_when_every_desired_field_is_present(live: Any, desired: Any) -> None:
    assert contains(live, desired)


@pytest.mark.parametrize(
    ("live", "desired"),
    [
        pytest.param({}, {"a": 1}, id="missing-field"),
        pytest.param({"a": 2}, {"a": 1}, id="different-value"),
        pytest.param({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}}, id="missing-nested-field"),
        pytest.param({"a": {"b": 2}}, {"a": {"b": 1}}, id="different-nested-value"),
        pytest.param({"a": "1"}, {"a": 1}, id="string-vs-int"),
        pytest.param({"a": [1]}, {"a": {"b": 1}}, id="list-where-map-wanted"),
        pytest.param({"a": "ab"}, {"a": ["a", "b"]}, id="string-where-list-wanted"),
        pytest.param({"a": ["a", "b"]}, {"a": "ab"}, id="list-where-string-wanted"),
        pytest.param({"a": None}, {"a": {}}, id="null-where-map-wanted"),
        pytest.param(None, {"a": 1}, id="live-null"),
        pytest.param({"a": None}, {"a": 0}, id="null-vs-zero"),
    ],
)
def test_contains_fails_on_missing_or_different_values(live: Any, desired: Any) -> None:
    assert not contains(live, desired)


@pytest.mark.parametrize(
    ("desired", "expected"),
    [
        pytest.param({"a": ""}, True, id="empty-string"),
        pytest.param({"a": []}, True, id="empty-list"),
        pytest.param({"a": {}}, True, id="empty-map"),
        pytest.param({"a": None}, True, id="null"),
        pytest.param({"a": False}, False, id="false-is-kept-by-the-server"),
        pytest.param({"a": 0}, False, id="zero-is-kept-by-the-server"),
        pytest.param({"a": " "}, False, id="blank-is-not-empty"),
        pytest.param({"a": [""]}, False, id="list-of-empty"),
        pytest.param({"a": {"b": ""}}, False, id="map-of-empty"),
    ],
)
def test_a_missing_field_matches_only_an_empty_desired_value(
    desired: dict[str, Any], expected: bool
) -> None:
    # The API server drops empty strings, lists and maps (Go's omitempty), so desiring
    # one must not look like a change forever; False and 0 (pointers) are kept.
    assert contains({"other": 1}, desired) is expected


def test_an_empty_env_value_matches_the_servers_omitted_value() -> None:
    live = {"env": [{"name": "DYN_CLUSTER_ID"}, {"name": "A", "value": "1"}]}
    assert contains(live, {"env": [{"name": "DYN_CLUSTER_ID", "value": ""}]})
    assert not contains(live, {"env": [{"name": "DYN_CLUSTER_ID", "value": "east"}]})
    assert not contains(live, {"env": [{"name": "A", "value": ""}]})


# --------------------------------------------------------------------------- contains: lists


@pytest.mark.parametrize(
    ("live", "desired"),
    [
        pytest.param(
            [{"name": "b", "value": "2"}, {"name": "a", "value": "1"}],
            [{"name": "a", "value": "1"}, {"name": "b", "value": "2"}],
            id="by-name-any-order",
        ),
        pytest.param(
            [{"uid": "2", "kind": "Y"}, {"uid": "1", "kind": "X", "controller": True}],
            [{"uid": "1", "kind": "X"}],
            id="by-uid-any-order-subset",
        ),
        pytest.param(
            [{"name": "a", "value": "1", "extra": True}],
            [{"name": "a", "value": "1"}],
            id="by-name-extra-element-field",
        ),
        pytest.param(
            [{"name": "c"}, {"name": "a", "value": "1"}],
            [{"name": "a", "value": "1"}],
            id="extra-live-element-keyed",
        ),
        pytest.param(
            [{"containerPort": 81}, {"containerPort": 80, "protocol": "TCP"}],
            [{"containerPort": 80}],
            id="by-container-port",
        ),
        pytest.param(
            [{"port": 443}, {"port": 80, "targetPort": 8080}],
            [{"port": 80, "targetPort": 8080}],
            id="by-port",
        ),
        pytest.param(["a", "b"], ["a", "b"], id="unkeyed-equal"),
        pytest.param([{"x": 1, "y": 2}], [{"x": 1}], id="unkeyed-maps-positional-subset"),
        pytest.param([], [], id="empty"),
    ],
)
def test_contains_matches_list_elements(live: Any, desired: Any) -> None:
    assert contains({"l": live}, {"l": desired})


@pytest.mark.parametrize(
    ("live", "desired"),
    [
        pytest.param(
            [{"name": "a", "value": "1"}],
            [{"name": "a", "value": "1"}, {"name": "b", "value": "2"}],
            id="keyed-element-missing",
        ),
        pytest.param(
            [{"name": "a", "value": "2"}], [{"name": "a", "value": "1"}], id="keyed-element-differs"
        ),
        pytest.param(
            [{"uid": "other", "controller": True}],
            [{"uid": "mine", "controller": True}],
            id="owner-ref-other-uid",
        ),
        pytest.param(["b", "a"], ["a", "b"], id="unkeyed-order-matters"),
        pytest.param(["a", "b", "c"], ["a", "b"], id="unkeyed-extra-live-element"),
        pytest.param(["a"], ["a", "b"], id="unkeyed-missing-element"),
        pytest.param([{"x": 2}], [{"x": 1}], id="unkeyed-map-differs"),
        pytest.param({"name": "a"}, [{"name": "a"}], id="map-where-list-wanted"),
        pytest.param("a", ["a"], id="string-where-list-wanted"),
        pytest.param(
            [{"name": "a"}, {"x": 1}],
            [{"x": 1}, {"name": "a"}],
            id="partly-keyed-is-positional",
        ),
    ],
)
def test_contains_detects_list_differences(live: Any, desired: Any) -> None:
    assert not contains({"l": live}, {"l": desired})


def test_keyed_lists_prefer_uid_over_name() -> None:
    # Owner references carry both; the uid decides (a recreated owner has a new uid).
    live = [{"uid": "old", "name": "r", "controller": True}]
    assert not contains(live, [{"uid": "new", "name": "r", "controller": True}])
    assert contains(live, [{"uid": "old", "name": "r", "controller": True}])


def test_owner_references_with_the_same_name_are_told_apart_by_uid() -> None:
    live = [
        {"uid": "new", "name": "r", "controller": True},
        {"uid": "old", "name": "r", "controller": False},
    ]
    assert contains(live, [{"uid": "new", "name": "r", "controller": True}])
    assert contains(live, [{"uid": "old", "name": "r", "controller": False}])


# --------------------------------------------------------------------------- contains: quantities
QUANTITIES = frozenset({"spec.containers.resources.limits", "spec.containers.resources.requests"})


def _resources(**resources: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "image": "i", "resources": resources}]}}


OURS = _resources(limits={"cpu": "500m", "memory": "1Gi"}, requests={"cpu": 1})


@pytest.mark.parametrize(
    "live",
    [
        pytest.param(OURS, id="as-rendered"),
        pytest.param(
            _resources(limits={"cpu": "0.5", "memory": "1024Mi"}, requests={"cpu": "1000m"}),
            id="another-form",
        ),
        pytest.param(
            _resources(limits={"cpu": "500m", "memory": "1073741824"}, requests={"cpu": "1"}),
            id="as-the-server-keeps-it",
        ),
        pytest.param(
            _resources(
                limits={"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1Gi"},
                requests={"cpu": "1", "memory": "1Gi"},
            ),
            id="another-managers-resource-beside-ours",
        ),
    ],
)
def test_an_equal_quantity_in_another_form_is_no_drift(live: dict[str, Any]) -> None:
    assert contains(live, OURS, quantities=QUANTITIES)
    assert not needs_apply(live, OURS, quantities=QUANTITIES)


@pytest.mark.parametrize(
    "live",
    [
        pytest.param(
            _resources(limits={"cpu": "64", "memory": "1Gi"}, requests={"cpu": "1"}),
            id="limit-changed",
        ),
        pytest.param(
            _resources(limits={"cpu": "500m", "memory": "1G"}, requests={"cpu": "1"}),
            id="Gi-to-G",
        ),
        pytest.param(
            _resources(limits={"cpu": "500m", "memory": "1Gi"}, requests={"cpu": "999m"}),
            id="request-changed",
        ),
        pytest.param(_resources(limits={"cpu": "500m"}, requests={"cpu": "1"}), id="one-removed"),
        pytest.param(_resources(requests={"cpu": "1"}), id="limits-removed"),
        pytest.param(_resources(), id="resources-emptied"),
        pytest.param({"spec": {"containers": [{"name": "c", "image": "i"}]}}, id="removed"),
        pytest.param(
            _resources(limits={"cpu": "lots", "memory": "1Gi"}, requests={"cpu": "1"}),
            id="not-a-quantity",
        ),
    ],
)
def test_a_changed_or_removed_quantity_is_drift(live: dict[str, Any]) -> None:
    assert not contains(live, OURS, quantities=QUANTITIES)
    assert needs_apply(live, OURS, quantities=QUANTITIES)


def test_quantities_are_compared_by_value_only_at_their_paths() -> None:
    """Elsewhere "1000m" is not "1": the value of an env var or a label is a string."""
    live = {"spec": {"containers": [{"name": "c", "image": "1000m", "resources": {}}]}}
    desired = {"spec": {"containers": [{"name": "c", "image": "1"}]}}
    assert not contains(live, desired, quantities=QUANTITIES)
    assert not contains(_resources(limits={"cpu": "1000m"}), _resources(limits={"cpu": "1"})), (
        "without the paths, quantities are compared as they are"
    )
    other = frozenset({"spec.containers.resources.requests"})
    assert not contains(
        _resources(limits={"cpu": "1000m"}), _resources(limits={"cpu": "1"}), quantities=other
    )


def test_an_empty_desired_quantity_matches_a_missing_one() -> None:
    """As everywhere: the server drops an empty value, so desiring one is no drift."""
    assert contains(_resources(limits={}), _resources(limits={"cpu": ""}), quantities=QUANTITIES)


# --------------------------------------------------------------------------- needs_apply


def test_needs_apply_when_the_object_does_not_exist() -> None:
    assert needs_apply(None, {"a": 1})
    assert needs_apply(None, {})


@pytest.mark.parametrize(
    ("live", "expected"),
    [
        pytest.param(
            {"metadata": {"name": "x", "uid": "u"}, "spec": {"a": 1, "b": 2}}, False, id="superset"
        ),
        pytest.param({"metadata": {"name": "x"}, "spec": {"a": 2}}, True, id="edited-field-we-own"),
        pytest.param({"metadata": {"name": "x"}, "spec": {}}, True, id="removed-field-we-own"),
    ],
)
def test_needs_apply_is_not_contains(live: dict[str, Any], expected: bool) -> None:
    desired = {"metadata": {"name": "x"}, "spec": {"a": 1}}
    assert needs_apply(live, desired) is expected


def test_needs_apply_passes_quantities_through() -> None:
    live = {"spec": {"r": {"cpu": "1000m"}}}
    desired = {"spec": {"r": {"cpu": "1"}}}
    assert needs_apply(live, desired)
    assert not needs_apply(live, desired, quantities=frozenset({"spec.r"}))


def test_a_removed_intent_is_seen_through_the_hash() -> None:
    # We stop setting a field: the live object is still a superset, but the hash differs.
    before = with_hash({"metadata": {"name": "x"}, "spec": {"a": 1, "b": 2}}, ANNOTATION)
    after = with_hash({"metadata": {"name": "x"}, "spec": {"a": 1}}, ANNOTATION)
    live = copy.deepcopy(before)
    assert contains(live["spec"], after["spec"])
    assert needs_apply(live, after)
    assert not needs_apply(copy.deepcopy(after) | {"spec": {"a": 1, "b": 2}}, after)


# --------------------------------------------------------------------------- hashing


def test_render_hash_is_stable_and_independent_of_key_order() -> None:
    a = {"b": 1, "a": {"y": 2, "x": [1, 2]}}
    b = {"a": {"x": [1, 2], "y": 2}, "b": 1}
    assert render_hash(a) == render_hash(b)
    assert len(render_hash(a)) == 16
    assert render_hash(a) != render_hash({"b": 1, "a": {"y": 2, "x": [2, 1]}})


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda o: o["spec"].update(a=2), id="value"),
        pytest.param(lambda o: o["spec"].pop("a"), id="removed-field"),
        pytest.param(lambda o: o["spec"].update(c=None), id="added-null-field"),
        pytest.param(lambda o: o["metadata"].setdefault("labels", {}).update(x="y"), id="label"),
        pytest.param(
            lambda o: o["metadata"].setdefault("annotations", {}).update(x="y"), id="annotation"
        ),
    ],
)
def test_with_hash_changes_when_any_field_changes(change: Any) -> None:
    base = {"metadata": {"name": "x"}, "spec": {"a": 1}}
    changed = copy.deepcopy(base)
    change(changed)
    h1 = with_hash(copy.deepcopy(base), ANNOTATION)["metadata"]["annotations"][ANNOTATION]
    h2 = with_hash(changed, ANNOTATION)["metadata"]["annotations"][ANNOTATION]
    assert h1 != h2


def test_with_hash_is_idempotent() -> None:
    once = with_hash({"metadata": {"name": "x"}, "spec": {"a": 1}}, ANNOTATION)
    first = once["metadata"]["annotations"][ANNOTATION]
    twice = with_hash(copy.deepcopy(once), ANNOTATION)
    assert twice == once
    assert twice["metadata"]["annotations"][ANNOTATION] == first


def test_with_hash_excludes_its_own_annotation() -> None:
    obj = {"metadata": {"name": "x", "annotations": {ANNOTATION: "stale"}}, "spec": {"a": 1}}
    fresh = {"metadata": {"name": "x"}, "spec": {"a": 1}}
    assert (
        with_hash(obj, ANNOTATION)["metadata"]["annotations"][ANNOTATION]
        == with_hash(fresh, ANNOTATION)["metadata"]["annotations"][ANNOTATION]
    )


def test_with_hash_equals_the_hash_of_the_object_without_it() -> None:
    obj = with_hash({"metadata": {"name": "x", "annotations": {"keep": "me"}}, "s": 1}, ANNOTATION)
    stripped = copy.deepcopy(obj)
    h = stripped["metadata"]["annotations"].pop(ANNOTATION)
    assert h == render_hash(stripped)


def test_with_hash_keeps_other_annotations_and_creates_metadata() -> None:
    obj = with_hash({"metadata": {"annotations": {"keep": "me"}}}, ANNOTATION)
    assert obj["metadata"]["annotations"]["keep"] == "me"
    bare = with_hash({"spec": {}}, ANNOTATION)
    assert set(bare["metadata"]["annotations"]) == {ANNOTATION}


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=15,
)


@given(st.dictionaries(st.text(max_size=5), JSON, max_size=4))
def test_every_object_contains_itself_and_with_hash_is_idempotent(obj: dict[str, Any]) -> None:
    obj = {k: v for k, v in obj.items() if k != "metadata"}
    assert contains(copy.deepcopy(obj), obj)
    hashed = with_hash(copy.deepcopy(obj), ANNOTATION)
    assert with_hash(copy.deepcopy(hashed), ANNOTATION) == hashed
    assert not needs_apply(copy.deepcopy(hashed), hashed)
