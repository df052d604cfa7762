"""The cache's one transform hook (`runtime/cache/transform.py`): what no controller
reads is dropped, a kind's trim runs, what is alike is shared; equal chains are equal."""

from __future__ import annotations

from typing import Any

from dynamo_pool_operator.runtime.cache.sharing import Share
from dynamo_pool_operator.runtime.cache.transform import (
    Chain,
    for_cache,
    strip_last_applied,
    strip_managed_fields,
)
from tests.unit.runtime.cache.test_informer import obj


def test_strip_managed_fields_removes_only_managed_fields() -> None:
    o = obj("a")
    o["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    assert strip_managed_fields(o)["metadata"].keys() == {
        "name",
        "resourceVersion",
        "uid",
        "namespace",
    }


def test_kubectls_last_applied_annotation_is_dropped_and_nothing_else() -> None:
    o = obj("a")
    o["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": '{"spec": "large"}',
        "team": "infra",
    }
    assert strip_last_applied(o)["metadata"]["annotations"] == {"team": "infra"}


def _trim(o: dict[str, Any]) -> dict[str, Any]:
    o["trimmed"] = True
    return o


def test_a_cache_transform_strips_then_trims_then_shares_and_equal_ones_are_equal() -> None:
    chain = for_cache(_trim, shared=[("spec",)])
    assert chain.steps == (
        strip_managed_fields,
        strip_last_applied,
        _trim,
        Share(shared=frozenset({("spec",)})),
    )
    assert for_cache(_trim, shared=(("spec",),)) == chain
    assert for_cache(_trim) != chain
    kept = for_cache(managed_fields=True)
    assert strip_managed_fields not in kept.steps
    o = obj("a")
    o["metadata"]["managedFields"] = [{"manager": "m"}]
    done = chain(o)
    assert done["trimmed"] is True
    assert "managedFields" not in done["metadata"]
    assert isinstance(Chain(()), Chain)
