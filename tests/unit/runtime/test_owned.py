"""Drift from a digest (runtime/owned.py): the view of a live object decides exactly
what `contains` decides on the whole object, for every edit of the live object."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from dynamo_pool_operator.runtime.diff import needs_apply, with_hash
from dynamo_pool_operator.runtime.owned import Shape

HASH = "example.com/render-hash"
SKIP = frozenset({"spec.containers.resources"})
OPEN = frozenset({"metadata.ownerReferences", "spec.nodeSelector"})


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


SHAPE = Shape(render(), open_paths=OPEN, skip=SKIP)


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
    main |= {"terminationMessagePath": "/dev/termination-log", "resources": {}}
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
    assert not needs_apply(live, body, skip=SKIP)
    assert not SHAPE.drifted(SHAPE.view(live), body, body["metadata"]["annotations"][HASH])


@pytest.mark.parametrize("body", [render(), render(image="img:2"), render(port=81)])
def test_the_view_decides_as_contains_does_for_every_edit(body: dict[str, Any]) -> None:
    """Rendered once, the served object edited in every single way: the view's verdict
    is `contains`'s on the whole object, each time."""
    base = as_served(render())
    wrong = []
    for what, live in _edits(base):
        expected = needs_apply(live, body, skip=SKIP)
        got = SHAPE.drifted(SHAPE.view(live), body, body["metadata"]["annotations"][HASH])
        if got != expected:
            wrong.append(f"{what}: view says {got}, contains says {expected}")
    assert not wrong, "\n".join(wrong)


def test_a_changed_render_has_drifted_until_applied() -> None:
    before, after = render(), render(image="img:2")
    live = as_served(before)
    assert SHAPE.drifted(SHAPE.view(live), after, after["metadata"]["annotations"][HASH])
    assert not SHAPE.drifted(
        SHAPE.view(as_served(after)), after, after["metadata"]["annotations"][HASH]
    )


def test_an_open_field_is_compared_as_contains_does() -> None:
    body = render()
    body["spec"]["nodeSelector"] = {"zone": "a"}
    live = as_served(body)
    live["spec"]["nodeSelector"]["other"] = "b"  # another key next to ours: no drift
    assert not SHAPE.drifted(SHAPE.view(live), body, None)
    live["spec"]["nodeSelector"]["zone"] = "c"
    assert SHAPE.drifted(SHAPE.view(live), body, None)
    del live["spec"]["nodeSelector"]
    assert SHAPE.drifted(SHAPE.view(live), body, None)


def test_a_render_the_shape_does_not_cover_is_named() -> None:
    assert SHAPE.uncovered(render()) == []
    # A field the sample did not have, and a closed field the render lacks.
    odd = render(workingDir="/x")
    del odd["spec"]["containers"][0]["image"]
    said = SHAPE.uncovered(odd)
    assert any("workingDir" in s for s in said)
    assert any("image" in s for s in said)
    # Open and skipped fields are covered.
    assert SHAPE.uncovered(render(resources={"limits": {"cpu": "1"}})) == []


def test_a_list_of_objects_without_keys_must_be_open() -> None:
    with pytest.raises(ValueError, match="declare it open"):
        Shape({"spec": {"tolerations": [{"key": "a"}]}}, open_paths=frozenset(), skip=frozenset())
    assert Shape(
        {"spec": {"tolerations": [{"key": "a"}]}},
        open_paths=frozenset({"spec.tolerations"}),
        skip=frozenset(),
    )
