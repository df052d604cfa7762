"""Rules of the DynamoPoolRelay CRD schema (api/crd.py) that no API server test shows
as directly."""

from __future__ import annotations

import dataclasses
import re

from dynamo_pool_operator.api import crd
from dynamo_pool_operator.config import PoolRelayConfig


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def test_no_field_the_configuration_defaults_has_a_schema_default() -> None:
    """A schema default is stored in every relay at creation, so the operator's
    `poolRelay.*` default for that field would never be used."""
    spec = crd.spec_schema()["properties"]
    configured = [_camel(f.name) for f in dataclasses.fields(PoolRelayConfig)]
    shared = [name for name in configured if name in spec]
    assert {"image", "port", "replicas"} <= set(shared)
    for name in shared:
        assert "default" not in spec[name], f"spec.{name} has a schema default"
        assert re.search(r"defaults to the operator's poolRelay\.", spec[name]["description"])


def test_replicas_have_a_maximum() -> None:
    """docs/crd.md: `spec.replicas` is at most `MAX_REPLICAS` (the relay is a light
    process; a relay at 2^31-1 would ask the cluster for that many pods)."""
    replicas = crd.spec_schema()["properties"]["replicas"]
    assert (replicas["minimum"], replicas["maximum"]) == (0, crd.MAX_REPLICAS)
    assert crd.MAX_REPLICAS == 100
