"""Drift from a digest (runtime/objects/diff.py): the view of a live object decides exactly
what `contains` decides on the whole object, for every edit of the live object."""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from dynamo_pool_operator.runtime.objects.diff import Shape, View, _open, needs_apply, with_hash
from tests.shapes import uncovered

HASH = "example.com/render-hash"
QUANTITIES = frozenset({"spec.containers.resources.limits", "spec.containers.resources.requests"})
OPEN = frozenset({"metadata.ownerReferences", "spec.nodeSelector", "spec.containers.resources"})
RESOURCES = {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": 1}}


def render(image: str = "img:1", port: int = 80, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Thing",
        "metadata": {
            "name": "t",
            "labels": {"app": "t"},
            "ownerReferences": [{"uid": "owner-1", "controller": True, "name": "o"}],
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "ports": [{"name": "p", "containerPort": port}],
                    "env": [
                        {"name": "A", "value": "1"},
                        {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                    ],
                    "args": ["--x", "--y"],
                    "securityContext": {"runAsNonRoot": True, "privileged": False},
                    **extra,
                }
            ],
        },
    }
    return with_hash(obj, HASH)


def shape() -> Shape:
    """A fresh shape per use: one built at import would be built before a mutation run
    forks its mutants, and no mutant of the shape's construction would ever be tested."""
    return Shape(render(), open_paths=OPEN, quantities=QUANTITIES)


def opened(view: View) -> dict[str, Any]:
    """A view's open values by place."""
    return dict(zip(view.open[::2], view.open[1::2], strict=True))


def as_served(body: dict[str, Any]) -> dict[str, Any]:
    """`body` as the server returns it: defaults and other managers' fields added."""
    live = copy.deepcopy(body)
    live["metadata"] |= {
        "uid": "u1",
        "resourceVersion": "7",
        "annotations": {**live["metadata"]["annotations"], "other": "x"},
    }
    live["metadata"]["labels"]["team"] = "infra"
    live["spec"]["restartPolicy"] = "Always"
    main = live["spec"]["containers"][0]
    main["terminationMessagePath"] = "/dev/termination-log"
    main.setdefault("resources", {})
    main["ports"][0]["protocol"] = "TCP"
    main["env"].append({"name": "INJECTED", "value": "by a webhook"})
    live["spec"]["containers"].append({"name": "sidecar", "image": "proxy"})
    live["status"] = {"replicas": 1}
    return live


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


def _edits(live: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every single edit of `live`: each field removed, replaced, emptied, or (maps)
    given one more key."""
    for path in list(_paths(live)):
        if not path:
            continue
        for how in ("remove", "replace", "empty", "add key", "int"):
            edited = copy.deepcopy(live)
            parent = edited
            for p in path[:-1]:
                parent = parent[p]
            last = path[-1]
            value = parent[last]
            if how == "remove":
                del parent[last]
            elif how == "replace":
                parent[last] = "changed"
            elif how == "empty":
                parent[last] = type(value)() if isinstance(value, str | list | dict) else None
            elif how == "int":
                parent[last] = 12345
            elif isinstance(value, dict):
                value["added"] = "by someone"
            else:
                continue
            yield f"{how} {'.'.join(map(str, path))}", edited


def test_an_object_as_served_has_not_drifted() -> None:
    body = render()
    live = as_served(body)
    assert not needs_apply(live, body, quantities=QUANTITIES)
    assert not shape().drifted(shape().view(live), body, body["metadata"]["annotations"][HASH])


@pytest.mark.parametrize(
    ("served", "body"),
    [
        (render(), render()),
        (render(), render(image="img:2")),
        (render(), render(port=81)),
        (render(resources=RESOURCES), render(resources=RESOURCES)),
        (render(resources=RESOURCES), render()),
        (render(), render(resources=RESOURCES)),
    ],
    ids=["same", "image", "port", "resources", "resources-dropped", "resources-added"],
)
def test_the_view_decides_as_contains_does_for_every_edit(
    served: dict[str, Any], body: dict[str, Any]
) -> None:
    """Rendered once, the served object edited in every single way: the view's verdict
    is `contains`'s on the whole object, each time."""
    base = as_served(served)
    wrong = []
    for what, live in _edits(base):
        expected = needs_apply(live, body, quantities=QUANTITIES)
        got = shape().drifted(shape().view(live), body, body["metadata"]["annotations"][HASH])
        if got != expected:
            wrong.append(f"{what}: view says {got}, contains says {expected}")
    assert not wrong, "\n".join(wrong)


def test_a_changed_render_has_drifted_until_applied() -> None:
    before, after = render(), render(image="img:2")
    live = as_served(before)
    assert shape().drifted(shape().view(live), after, after["metadata"]["annotations"][HASH])
    assert not shape().drifted(
        shape().view(as_served(after)), after, after["metadata"]["annotations"][HASH]
    )


def test_an_open_field_is_compared_as_contains_does() -> None:
    body = render()
    body["spec"]["nodeSelector"] = {"zone": "a"}
    live = as_served(body)
    live["spec"]["nodeSelector"]["other"] = "b"  # another key next to ours: no drift
    assert not shape().drifted(shape().view(live), body, None)
    live["spec"]["nodeSelector"]["zone"] = "c"
    assert shape().drifted(shape().view(live), body, None)
    del live["spec"]["nodeSelector"]
    assert shape().drifted(shape().view(live), body, None)


def test_a_render_the_shape_does_not_cover_is_named() -> None:
    assert uncovered(shape(), render()) == []
    # A field the sample did not have, and a closed field the render lacks.
    odd = render(workingDir="/x")
    del odd["spec"]["containers"][0]["image"]
    said = uncovered(shape(), odd)
    assert any("workingDir" in s for s in said)
    assert any("image" in s for s in said)
    # Open fields are covered, under a keyed list too.
    assert uncovered(shape(), render(resources={"limits": {"cpu": "1"}})) == []


def test_a_list_of_objects_without_keys_must_be_open() -> None:
    with pytest.raises(ValueError, match="declare it open"):
        Shape({"spec": {"tolerations": [{"key": "a"}]}}, open_paths=frozenset())
    assert Shape(
        {"spec": {"tolerations": [{"key": "a"}]}},
        open_paths=frozenset({"spec.tolerations"}),
    )


def _uncovered_after(edit: Any) -> list[str]:
    body = render()
    edit(body)
    return uncovered(shape(), body)


def _main(body: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = body["spec"]["containers"][0]
    return container


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda b: _main(b).update(args=[]), ["spec.containers[name=main].args (closed, empty)"]),
        (
            lambda b: b["spec"]["containers"].append({"image": "x"}),
            ["spec.containers (an element without a key)"],
        ),
        (
            lambda b: b["spec"]["containers"].append({"name": "other"}),
            ["spec.containers[name=other] (not in the shape)"],
        ),
        (
            lambda b: _main(b)["env"].pop(0),
            ["spec.containers[name=main].env[name=A] (closed, missing)"],
        ),
        (
            lambda b: _main(b).update(securityContext="x"),
            ["spec.containers[name=main].securityContext (closed, missing)"],
        ),
        (
            lambda b: _main(b).update(workingDir="/x"),
            ["spec.containers[name=main].workingDir (not in the shape)"],
        ),
        (
            lambda b: b["spec"].update(containers="x"),
            ["spec.containers[name=main] (closed, missing)"],
        ),
        (lambda b: b.pop("kind"), ["kind (closed, missing)"]),
        (lambda b: _main(b).pop("image"), ["spec.containers[name=main].image (closed, missing)"]),
    ],
    ids=[
        "empty",
        "no-key",
        "other-element",
        "missing-element",
        "not-a-map",
        "extra",
        "not-a-list",
        "top",
        "deep",
    ],
)
def test_each_way_a_render_leaves_the_shape_is_named_exactly(edit: Any, said: list[str]) -> None:
    assert _uncovered_after(edit) == said


def test_elements_of_other_managers_before_ours_are_left_out_of_the_digest() -> None:
    """An injected sidecar (or an element without a key) listed before our container
    changes nothing: every element of ours is still compared."""
    body = render()
    live = as_served(body)
    live["spec"]["containers"].insert(0, {"name": "injected", "image": "proxy"})
    live["spec"]["containers"].insert(0, {"image": "no-name"})
    assert not shape().drifted(shape().view(live), body, None)
    live["spec"]["containers"][-2]["image"] = "img:other"  # ours, after them
    assert shape().drifted(shape().view(live), body, None)


def test_an_empty_field_of_the_sample_is_not_in_the_shape() -> None:
    """The server drops empty values: a sample's empty field is no closed field."""
    sample = {"spec": {"a": "", "b": 1}}
    s = Shape(sample, open_paths=frozenset())
    assert uncovered(s, {"spec": {"b": 1}}) == []
    assert uncovered(s, {"spec": {"a": "x", "b": 1}}) == ["spec.a (not in the shape)"]


def test_quantities_under_a_keyed_list_are_kept_and_compared_by_value() -> None:
    """A container's resources are open: kept verbatim for each of our containers (not
    for another manager's), and their quantities compared by value, so the server's
    canonical form is no drift and a user's edit is."""
    body = render(resources=RESOURCES)
    live = as_served(body)
    live["spec"]["containers"][1]["resources"] = {"limits": {"cpu": "9"}}  # the sidecar's
    assert opened(shape().view(live)) == {
        "metadata.ownerReferences": body["metadata"]["ownerReferences"],
        "spec.containers[name=main].resources": RESOURCES,
    }
    _main(live)["resources"] = {
        "limits": {"cpu": "0.5", "memory": "1024Mi"},
        "requests": {"cpu": "1000m"},
    }
    assert not needs_apply(live, body, quantities=QUANTITIES)
    assert not shape().drifted(shape().view(live), body, None)
    for edit in (
        lambda r: r["limits"].__setitem__("cpu", "64"),
        lambda r: r.pop("limits"),
        lambda r: r["requests"].pop("cpu"),
        lambda r: r.clear(),
    ):
        edited = copy.deepcopy(live)
        edit(_main(edited)["resources"])
        assert needs_apply(edited, body, quantities=QUANTITIES)
        assert shape().drifted(shape().view(edited), body, None)


def _walked(s: Shape, obj: Any) -> dict[str, Any]:
    """Every open value of `obj` as the general walk (`_open`) finds it, path by path."""
    out: dict[str, Any] = {}
    for path in s.open_paths:
        _open(obj, tuple(path.split(".")), s.closed, "", out)
    return out


@pytest.mark.parametrize(
    "edit",
    [
        lambda o: None,
        lambda o: o["spec"].__setitem__("nodeSelector", {"zone": "a"}),
        lambda o: o["spec"].__setitem__("nodeSelector", None),
        lambda o: o["spec"].__setitem__("nodeSelector", ["not", "a", "map"]),
        lambda o: o["metadata"].pop("ownerReferences"),
        lambda o: o.__setitem__("metadata", None),
        lambda o: o.__setitem__("spec", [{"name": "main"}]),
        lambda o: o["spec"].__setitem__("containers", {"name": "main"}),
        lambda o: _main(o).__setitem__("resources", RESOURCES),
    ],
)
def test_the_open_values_through_maps_are_what_the_general_walk_finds(edit: Any) -> None:
    """A path through maps only is read without the walk; what it finds (and misses)
    is what the walk would."""
    live = as_served(render())
    edit(live)
    s = shape()
    assert s.open_values(live) == _walked(s, live)


def _fresh(value: str) -> str:
    """An equal string that is no other string object (as a decoder hands it over)."""
    return "".join(list(value))


def test_a_views_open_values_are_a_flat_tuple_smaller_than_a_map_of_them() -> None:
    """One view per cached relay object: its places and values in one tuple (56-88
    bytes for one to three), not a map (184)."""
    view = shape().view(as_served(render(resources=RESOURCES)))
    assert type(view.open) is tuple
    assert len(opened(view)) == 2
    assert sys.getsizeof(view.open) < sys.getsizeof(opened(view))


def test_a_views_open_strings_equal_to_the_samples_are_the_samples_and_no_others() -> None:
    """What every render puts at an open place is one string in every view (the
    sample's); a value of the live object's own stays its own, and so does a list
    (its elements are matched by key, not by place)."""
    sample = render(resources=copy.deepcopy(RESOURCES))
    s = Shape(sample, open_paths=OPEN, quantities=QUANTITIES)
    live = as_served(render(resources=copy.deepcopy(RESOURCES)))
    limits = live["spec"]["containers"][0]["resources"]["limits"]
    limits["cpu"], limits["memory"] = _fresh("500m"), _fresh("250Mi")
    view = s.view(live)
    held = opened(view)["spec.containers[name=main].resources"]["limits"]
    assert held["cpu"] is sample["spec"]["containers"][0]["resources"]["limits"]["cpu"]
    assert held["memory"] is limits["memory"]  # not the sample's value: its own
    assert held == limits
    owners = opened(view)["metadata.ownerReferences"]
    assert owners is live["metadata"]["ownerReferences"]
    body = render(resources=copy.deepcopy(RESOURCES))
    assert s.drifted(view, body, None)  # 250Mi is not the 1Gi rendered
    served = s.view(as_served(render(resources=copy.deepcopy(RESOURCES))))
    assert not s.drifted(served, body, None)
