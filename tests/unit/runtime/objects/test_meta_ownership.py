"""Who controls an object (runtime/objects/meta.py): one reading of owner references."""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.runtime.objects.meta import (
    controller_is,
    controller_of,
    describe_controller,
    is_controlled_by,
)

REF = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoPoolRelay", "name": "a", "uid": "u1"}


def obj(*refs: Any) -> dict[str, Any]:
    return {"metadata": {"ownerReferences": list(refs)}}


@pytest.mark.parametrize(
    ("o", "controller"),
    [
        (obj({**REF, "controller": True}), "u1"),
        (obj({**REF, "controller": False}), None),
        (obj({**REF, "controller": "true"}), None),
        (obj(REF), None),
        (obj({**REF, "uid": "x"}, {**REF, "controller": True}), "u1"),
        ({"metadata": {"ownerReferences": "nope"}}, None),
        ({"metadata": {"ownerReferences": ["nope"]}}, None),
        ({"metadata": None}, None),
        ({}, None),
    ],
    ids=["controller", "not", "string-true", "unset", "second", "not-a-list", "not-a-map",
         "no-metadata", "empty"],
)  # fmt: skip
def test_the_controller_is_the_reference_marked_controller_true(
    o: dict[str, Any], controller: str | None
) -> None:
    ref = controller_of(o)
    assert (ref or {}).get("uid") == controller
    assert is_controlled_by(o, "u1") is (controller == "u1")


def test_an_empty_uid_controls_nothing() -> None:
    assert not is_controlled_by(obj({**REF, "uid": "", "controller": True}), "")


@pytest.mark.parametrize(
    ("api_version", "kind", "matches"),
    [
        ("nvidia.com/v1alpha1", "DynamoPoolRelay", True),
        ("nvidia.com/v1", "DynamoPoolRelay", True),
        ("example.com/v1", "DynamoPoolRelay", False),
        ("nvidia.com/v1alpha1", "DynamoGraphDeployment", False),
        ("v1", "DynamoPoolRelay", False),
    ],
)
def test_controller_is_a_kind_of_a_group_at_any_version(
    api_version: str, kind: str, matches: bool
) -> None:
    ref = {"apiVersion": api_version, "kind": kind}
    assert controller_is(ref, "nvidia.com", "DynamoPoolRelay") is matches
    assert controller_is(None, "nvidia.com", "DynamoPoolRelay") is False


def test_describe_controller() -> None:
    assert describe_controller(obj({**REF, "controller": True})) == "controller DynamoPoolRelay/a"
    assert describe_controller(obj(REF)) == "no controller"
