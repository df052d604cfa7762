"""The kinds of object a relay owns (pool/relay/kinds.py): one table, and every part of
the operator that deals in them follows it (the plan, the caches and their watches, the
needs between writes, the RBAC)."""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator import rbac
from dynamo_pool_operator.pool import controller
from dynamo_pool_operator.pool.ladder import NO_DRIFT, drift
from dynamo_pool_operator.pool.relay import kinds
from dynamo_pool_operator.runtime.cache.shared import SharedInformers
from tests.unit.runtime.client.fake import FakeClient

KINDS = [k.kind for k in kinds.RELAY_KINDS]


def test_each_kind_is_written_after_only_kinds_written_before_it() -> None:
    seen: set[str] = set()
    for kind in kinds.RELAY_KINDS:
        assert set(kind.after) <= seen, f"{kind.kind} waits for a kind written after it"
        seen.add(kind.kind)
    assert len(seen) == len(kinds.RELAY_KINDS) == len(kinds.BY_KIND)


def test_one_kind_holds_the_frontends_services() -> None:
    assert [k.kind for k in kinds.RELAY_KINDS if k.frontends] == ["Service"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_operator_may_write_each_kind_and_nothing_more_of_it(kind: str) -> None:
    res = kinds.BY_KIND[kind].resource
    (rule,) = [r for r in rbac.MANAGER_RULES if r.resources == (res.plural,)]
    assert rule.api_group == res.group
    assert set(rule.verbs) == {"create", "delete", "get", "list", "patch", "watch"}
    assert rule.why == kinds.BY_KIND[kind].why


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_has_a_cache_by_our_labels_and_a_watch(kind: str) -> None:
    informers = SharedInformers(FakeClient())
    caches = controller.relay_caches(informers, namespace=None, dgd_version="v1beta1")
    assert set(caches.objects) == set(KINDS)
    assert caches.of_kind(kind).resource == kinds.BY_KIND[kind].resource
    assert caches.hides(kind), "watched by our labels: one without them is hidden"


@pytest.mark.parametrize("kind", KINDS)
def test_each_kinds_sample_render_is_right_as_its_cache_keeps_it(kind: str) -> None:
    """What a pass compares (the view its cache keeps) says the render is right."""
    sample: dict[str, Any] = dict(kinds.BY_KIND[kind].render(kinds._sample()) or {})
    assert sample, f"the sample relay renders no {kind}"
    served = {**sample, "metadata": {**sample["metadata"], "uid": "u", "resourceVersion": "1"}}
    cached = controller.Trim(kind)(served)
    assert drift(kinds.rule(kind), cached, sample) == NO_DRIFT
