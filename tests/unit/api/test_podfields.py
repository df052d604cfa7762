"""Pod field rules (api/podfields.py): what the API server would refuse in a relay's
resources, tolerations and image, each problem naming the relay field."""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.api import podfields
from dynamo_pool_operator.runtime.objects.diff import parse_quantity


def test_the_pattern_and_the_parser_agree() -> None:
    """The CRD uses QUANTITY_PATTERN; the read model uses `runtime.quantity.parse`. They
    agree but on a decimal exponent with a fraction, which only the parser refuses (as
    the API server's does)."""
    import re

    for raw in ["1", "100m", "1Gi", "1e3", "lots", "1 Gi", "-2", ".5", "5.", "1E", "1e-3"]:
        assert (re.fullmatch(podfields.QUANTITY_PATTERN, raw) is not None) == (
            parse_quantity(raw) is not None
        ), raw
    assert re.fullmatch(podfields.QUANTITY_PATTERN, "1e1.5")
    assert parse_quantity("1e1.5") is None


GOOD_RESOURCES: list[Any] = [
    None,
    {},
    {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
    {"limits": {"cpu": 1}, "requests": {"cpu": "1"}},
    {"limits": {"nvidia.com/gpu": 1}},
    {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": 2}},
    {"limits": {"hugepages-2Mi": "64Mi"}},
    {"claims": [{"name": "gpu"}]},
]


@pytest.mark.parametrize("resources", GOOD_RESOURCES)
def test_valid_resources(resources: Any) -> None:
    assert podfields.resources_errors(resources) == []


BAD_RESOURCES: list[tuple[Any, str]] = [
    ("1", "spec.resources: must be an object"),
    ({"limts": {"cpu": "1"}}, "spec.resources.limts: unknown field"),
    ({"limits": {"cpu": "lots"}}, "spec.resources.limits[cpu]: 'lots' is not a quantity"),
    ({"limits": {"cpu": "1e1.5"}}, "spec.resources.limits[cpu]: '1e1.5' is not a quantity"),
    ({"limits": ["cpu"]}, "spec.resources.limits: must be a map"),
    ({"requests": {"cpu": "-1"}}, "spec.resources.requests[cpu]: must be greater than or equal"),
    ({"requests": {"CPU": "1"}}, "spec.resources.requests[CPU]: invalid resource name"),
    ({"requests": {"gpu": "1"}}, "spec.resources.requests[gpu]: invalid resource name"),
    ({"requests": {"kubernetes.io/x": "1"}}, "spec.resources.requests[kubernetes.io/x]: invalid"),
    ({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
     "spec.resources.requests[cpu]: must be less than or equal to the limit '1'"),
    ({"requests": {"memory": "1Gi"}, "limits": {"memory": "1000Mi"}},
     "spec.resources.requests[memory]: must be less than or equal"),
    ({"limits": {"nvidia.com/gpu": "0.5"}},
     "spec.resources.limits[nvidia.com/gpu]: an extended resource must be a whole number"),
    ({"requests": {"nvidia.com/gpu": "1"}},
     "spec.resources.limits[nvidia.com/gpu]: an extended resource needs a limit"),
    ({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}},
     "spec.resources.requests[nvidia.com/gpu]: an extended resource cannot be overcommitted"),
    ({"claims": [{"nam": "x"}]}, "spec.resources.claims: must be a list"),
]  # fmt: skip


@pytest.mark.parametrize(("resources", "expected"), BAD_RESOURCES)
def test_invalid_resources_name_the_field(resources: Any, expected: str) -> None:
    problems = podfields.resources_errors(resources)
    assert any(p.startswith(expected) for p in problems), problems


GOOD_TOLERATIONS: list[Any] = [
    {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "gpu", "value": "yes"},
    {"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoExecute",
     "tolerationSeconds": 30},
    {"operator": "Exists"},
    {"key": "example.com/spot", "operator": "Exists"},
]  # fmt: skip


@pytest.mark.parametrize("toleration", GOOD_TOLERATIONS)
def test_valid_tolerations(toleration: Any) -> None:
    assert podfields.tolerations_errors([toleration]) == []


BAD_TOLERATIONS: list[tuple[Any, str]] = [
    ("gpu", "spec.tolerations[0]: must be an object"),
    ({"key": "gpu", "operator": "Gt"}, "spec.tolerations[0].operator: must be Exists or Equal"),
    ({"key": "gpu", "operator": "Exists", "value": "x"},
     "spec.tolerations[0].value: must be empty when operator is Exists"),
    ({"value": "x"}, "spec.tolerations[0].operator: must be Exists when key is empty"),
    ({"key": "a b", "operator": "Exists"}, "spec.tolerations[0].key: 'a b'"),
    ({"key": "gpu", "value": "not a label"}, "spec.tolerations[0].value: 'not a label'"),
    ({"key": "gpu", "effect": "Sometimes"}, "spec.tolerations[0].effect: must be one of"),
    ({"key": "gpu", "tolerationSeconds": 5}, "spec.tolerations[0].tolerationSeconds: only valid"),
    ({"key": "gpu", "effect": "NoExecute", "tolerationSeconds": "5"},
     "spec.tolerations[0].tolerationSeconds: must be an integer"),
    ({"key": "gpu", "operater": "Exists"}, "spec.tolerations[0].operater: unknown field"),
]  # fmt: skip


@pytest.mark.parametrize(("toleration", "expected"), BAD_TOLERATIONS)
def test_invalid_tolerations_name_the_field(toleration: Any, expected: str) -> None:
    problems = podfields.tolerations_errors([toleration])
    assert any(p.startswith(expected) for p in problems), problems


def test_the_index_of_the_bad_toleration_is_named() -> None:
    problems = podfields.tolerations_errors([{"operator": "Exists"}, {"value": "x"}])
    assert [p.split(":")[0] for p in problems] == ["spec.tolerations[1].operator"]
    assert podfields.tolerations_errors("x") == ["spec.tolerations: must be a list of tolerations"]


@pytest.mark.parametrize(
    ("image", "ok"),
    [("relay:1", True), ("reg.example/relay@sha256:ab", True), (" ", False),
     (" relay", False), ("relay ", False), ("re lay", False), ("relay\t", False)],
)  # fmt: skip
def test_images(image: str, ok: bool) -> None:
    assert (podfields.image_errors(image) == []) is ok


@pytest.mark.parametrize("raw", ["1e99999999", "1e-99999999", "9e2147483647"])
def test_a_huge_exponent_is_read_not_raised(raw: str) -> None:
    """The CRD's pattern admits any exponent; reading one must not raise (the relay
    would fail its reconcile forever instead of saying what is wrong)."""
    assert isinstance(podfields.resources_errors({"limits": {"cpu": raw}}), list)
