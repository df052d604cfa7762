"""The DGD read-model (api/dgd.py): both served shapes become the same `Pool`.

The rules (docs/crd.md, 'Published reasons, in precedence order'; docs/exports.md,
'What is exported'): a worker is type worker/prefill/decode, a frontend is type
frontend; the discovery backend is the DGD annotation if present, else the operator
default; a component with `globalDynamoNamespace: true` uses the shared namespace. The DGD is
someone else's object, so reading it never raises, whatever it holds.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dynamo_pool_operator.api.dgd import (
    DISCOVERY_BACKEND_ANNOTATION,
    KIND,
    Component,
    Pool,
    pool_from_object,
    pools_naming_service,
)

V1BETA1 = "nvidia.com/v1beta1"
V1ALPHA1 = "nvidia.com/v1alpha1"


def meta(name: str = "pool", namespace: str = "team", **more: Any) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "uid": "u-1", "resourceVersion": "7", **more}


def beta(*components: Any, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": V1BETA1,
        "kind": KIND,
        "metadata": meta(**metadata),
        "spec": {"components": list(components)},
    }


def alpha(services: Any, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": V1ALPHA1,
        "kind": KIND,
        "metadata": meta(**metadata),
        "spec": {"services": services},
    }


# --------------------------------------------------------------------------- v1beta1


def test_v1beta1_components_are_read_in_order_with_type_and_global_flag() -> None:
    pool = pool_from_object(
        beta(
            {"name": "Frontend", "type": "frontend", "replicas": 1},
            {"name": "decode", "type": "decode", "globalDynamoNamespace": True},
            {"name": "GlobalRouter"},
        )
    )
    assert pool.components == (
        Component("Frontend", "frontend", False),
        Component("decode", "decode", True),
        Component("GlobalRouter", None, False),
    )
    assert pool.api_version == V1BETA1


def test_v1beta1_metadata_is_read() -> None:
    pool = pool_from_object(beta({"name": "w", "type": "worker"}))
    assert (pool.namespace, pool.name, pool.uid, pool.resource_version) == (
        "team",
        "pool",
        "u-1",
        "7",
    )
    assert not pool.terminating


def test_deletion_timestamp_marks_the_pool_terminating() -> None:
    pool = pool_from_object(beta(deletionTimestamp="2024-01-01T00:00:00Z"))
    assert pool.terminating


def test_missing_api_version_is_read_as_v1beta1() -> None:
    obj = beta({"name": "w", "type": "worker"})
    del obj["apiVersion"]
    pool = pool_from_object(obj)
    assert pool.api_version == V1BETA1
    assert [c.name for c in pool.workers] == ["w"]


def test_v1beta1_ignores_a_v1alpha1_services_map() -> None:
    obj = beta()
    obj["spec"]["services"] = {"w": {"componentType": "worker"}}
    assert pool_from_object(obj).components == ()


@pytest.mark.parametrize(
    ("components", "expected_names"),
    [
        pytest.param("not-a-list", [], id="components-is-a-string"),
        pytest.param({"w": {"type": "worker"}}, [], id="components-is-a-map"),
        pytest.param(None, [], id="components-is-null"),
        pytest.param([None, 3, "w", ["w"]], [], id="entries-not-maps"),
        pytest.param([{"type": "worker"}], [], id="entry-without-name"),
        pytest.param([{"name": "", "type": "worker"}], [], id="entry-with-empty-name"),
        pytest.param([{"name": 5, "type": "worker"}], [], id="entry-with-non-string-name"),
        pytest.param(
            [{"type": "worker"}, {"name": "ok", "type": "worker"}], ["ok"], id="bad-entry-skipped"
        ),
        pytest.param(
            [None, "w", {"name": "ok", "type": "worker"}, 3, {"name": "ok2"}],
            ["ok", "ok2"],
            id="non-map-entries-skipped-and-reading-goes-on",
        ),
    ],
)
def test_v1beta1_malformed_components_are_skipped_not_raised(
    components: Any, expected_names: list[str]
) -> None:
    obj = beta()
    obj["spec"]["components"] = components
    assert [c.name for c in pool_from_object(obj).components] == expected_names


@pytest.mark.parametrize("bad_type", [5, True, ["worker"], {"t": "worker"}, None])
def test_non_string_type_is_read_as_untyped(bad_type: Any) -> None:
    pool = pool_from_object(beta({"name": "w", "type": bad_type}))
    assert pool.components == (Component("w", None),)
    assert not pool.workers
    assert not pool.frontends


@pytest.mark.parametrize("flag", ["true", "True", 1, "yes", None, False, [True]])
def test_only_boolean_true_means_global_dynamo_namespace(flag: Any) -> None:
    pool = pool_from_object(beta({"name": "w", "type": "worker", "globalDynamoNamespace": flag}))
    assert not pool.uses_global_namespace


# --------------------------------------------------------------------------- v1alpha1


def test_v1alpha1_services_map_key_is_the_component_name() -> None:
    pool = pool_from_object(
        alpha(
            {
                "Frontend": {"componentType": "frontend"},
                "VllmWorker": {"componentType": "worker", "globalDynamoNamespace": True},
                "Planner": {"componentType": "planner"},
            }
        )
    )
    assert pool.api_version == V1ALPHA1
    assert pool.components == (
        Component("Frontend", "frontend", False),
        Component("VllmWorker", "worker", True),
        Component("Planner", "planner", False),
    )


@pytest.mark.parametrize(
    ("entry", "expected_type", "is_worker"),
    [
        ({"componentType": "worker", "subComponentType": "prefill"}, "prefill", True),
        ({"componentType": "worker", "subComponentType": "decode"}, "decode", True),
        ({"componentType": "worker"}, "worker", True),
        ({"subComponentType": "prefill"}, "prefill", True),
        ({"componentType": "worker", "subComponentType": "other"}, "worker", True),
        ({"componentType": "frontend", "subComponentType": None}, "frontend", False),
        ({"componentType": "planner"}, "planner", False),
        ({"componentType": 7}, None, False),
        ({}, None, False),
    ],
)
def test_v1alpha1_sub_component_type_refines_the_component_type(
    entry: dict[str, Any], expected_type: str | None, is_worker: bool
) -> None:
    pool = pool_from_object(alpha({"c": entry}))
    (component,) = pool.components
    assert component.type == expected_type
    assert component.is_worker is is_worker


@pytest.mark.parametrize(
    ("services", "expected_names"),
    [
        pytest.param([{"name": "w", "componentType": "worker"}], [], id="services-is-a-list"),
        pytest.param("w", [], id="services-is-a-string"),
        pytest.param(None, [], id="services-is-null"),
        pytest.param({"w": None, "x": "worker", "y": ["worker"]}, [], id="entries-not-maps"),
        pytest.param({"": {"componentType": "worker"}}, [], id="empty-key"),
        pytest.param({"bad": 1, "ok": {"componentType": "worker"}}, ["ok"], id="bad-entry-skipped"),
    ],
)
def test_v1alpha1_malformed_services_are_skipped_not_raised(
    services: Any, expected_names: list[str]
) -> None:
    assert [c.name for c in pool_from_object(alpha(services)).components] == expected_names


def test_v1alpha1_ignores_a_v1beta1_components_list() -> None:
    obj = alpha({})
    obj["spec"]["components"] = [{"name": "w", "type": "worker"}]
    assert pool_from_object(obj).components == ()


# --------------------------------------------------------------------------- missing parts


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param({}, id="empty"),
        pytest.param({"apiVersion": V1BETA1}, id="no-metadata-no-spec"),
        pytest.param({"metadata": None, "spec": None}, id="null-metadata-and-spec"),
        pytest.param({"metadata": "x", "spec": ["y"]}, id="wrong-types"),
        pytest.param({"apiVersion": 5, "metadata": {"name": 5, "namespace": []}}, id="bad-values"),
        pytest.param({"apiVersion": V1ALPHA1, "spec": {"services": {"w": {}}}}, id="alpha-no-meta"),
    ],
)
def test_missing_or_malformed_spec_and_metadata_never_raise(obj: dict[str, Any]) -> None:
    pool = pool_from_object(obj)
    assert isinstance(pool.name, str)
    assert isinstance(pool.namespace, str)
    assert isinstance(pool.api_version, str)
    assert not pool.workers


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param({"apiVersion": V1BETA1, "spec": {}}, id="no-metadata"),
        pytest.param({"metadata": {"name": 5, "namespace": None, "uid": 1}}, id="non-strings"),
    ],
)
def test_missing_metadata_reads_as_empty_strings(obj: dict[str, Any]) -> None:
    pool = pool_from_object(obj)
    assert (pool.namespace, pool.name, pool.uid, pool.resource_version) == ("", "", "", "")


def test_non_string_annotations_are_dropped() -> None:
    pool = pool_from_object(
        beta(annotations={DISCOVERY_BACKEND_ANNOTATION: 5, "ok": "v", 3: "int-key"})
    )
    assert dict(pool.annotations) == {"ok": "v"}


@pytest.mark.parametrize("annotations", [None, "x", ["a"], 5])
def test_malformed_annotations_read_as_empty(annotations: Any) -> None:
    assert dict(pool_from_object(beta(annotations=annotations)).annotations) == {}


# --------------------------------------------------------------------------- worker / frontend


@pytest.mark.parametrize(
    ("type_", "worker", "frontend"),
    [
        ("worker", True, False),
        ("prefill", True, False),
        ("decode", True, False),
        ("frontend", False, True),
        ("planner", False, False),
        ("epp", False, False),
        (None, False, False),
        ("Worker", False, False),
        ("FRONTEND", False, False),
    ],
)
def test_worker_and_frontend_are_decided_by_type(
    type_: str | None, worker: bool, frontend: bool
) -> None:
    c = Component("c", type_)
    assert c.is_worker is worker
    assert c.is_frontend is frontend


def test_workers_and_frontends_keep_component_order() -> None:
    pool = pool_from_object(
        beta(
            {"name": "d", "type": "decode"},
            {"name": "f2", "type": "frontend"},
            {"name": "p", "type": "prefill"},
            {"name": "f1", "type": "frontend"},
            {"name": "pl", "type": "planner"},
        )
    )
    assert [c.name for c in pool.workers] == ["d", "p"]
    assert [c.name for c in pool.frontends] == ["f2", "f1"]


# --------------------------------------------------------------------------- frontend Services


def test_frontend_service_names_follow_the_naming_rule_in_component_order() -> None:
    pool = pool_from_object(
        beta(
            {"name": "Frontend", "type": "frontend"},
            {"name": "w", "type": "worker"},
            {"name": "Edge.Frontend", "type": "frontend"},
            name="qwen3-0.6b",
        )
    )
    assert pool.frontend_services == (
        "qwen3-0-6b-frontend",
        "qwen3-0-6b-edge-frontend",
    )


def test_frontend_service_names_dedups_names_that_normalize_to_the_same_service() -> None:
    pool = pool_from_object(
        alpha(
            {
                "fe.a": {"componentType": "frontend"},
                "FE-A": {"componentType": "frontend"},
                "fe-a": {"componentType": "frontend"},
                "other": {"componentType": "frontend"},
            }
        )
    )
    assert pool.frontend_services == ("pool-fe-a", "pool-other")


def test_pool_without_frontend_has_no_frontend_services() -> None:
    pool = pool_from_object(beta({"name": "w", "type": "worker"}))
    assert pool.frontend_services == ()


# --------------------------------------------------------------------------- discovery backend


@pytest.mark.parametrize(
    ("annotation", "default", "expected"),
    [
        pytest.param(None, "kubernetes", "kubernetes", id="no-annotation-default-kubernetes"),
        pytest.param(None, "etcd", "etcd", id="no-annotation-default-etcd"),
        pytest.param("etcd", "kubernetes", "etcd", id="annotation-etcd-wins"),
        pytest.param("kubernetes", "etcd", "kubernetes", id="annotation-kubernetes-wins"),
        pytest.param("", "kubernetes", "", id="empty-annotation-still-wins"),
        pytest.param("Kubernetes", "kubernetes", "Kubernetes", id="annotation-kept-verbatim"),
    ],
)
def test_discovery_backend_annotation_wins_over_default(
    annotation: str | None, default: str, expected: str
) -> None:
    annotations = {} if annotation is None else {DISCOVERY_BACKEND_ANNOTATION: annotation}
    pool = pool_from_object(beta(annotations=annotations))
    assert pool.discovery_backend(default) == expected


def test_discovery_backend_annotation_key_is_dynamos() -> None:
    assert DISCOVERY_BACKEND_ANNOTATION == "nvidia.com/dynamo-discovery-backend"


# --------------------------------------------------------------------------- namespace, reference


@pytest.mark.parametrize(
    ("namespace", "name", "expected"),
    [("team", "pool", "team-pool"), ("team", "qwen3-0.6b", "team-qwen3-0-6b")],
)
def test_dynamo_namespace_is_namespace_dash_dgd_with_dots_as_dashes(
    namespace: str, name: str, expected: str
) -> None:
    assert pool_from_object(beta(name=name, namespace=namespace)).dynamo_namespace == expected


def test_any_global_component_makes_the_pool_use_the_global_namespace() -> None:
    pool = pool_from_object(
        beta(
            {"name": "w", "type": "worker"},
            {"name": "planner", "type": "planner", "globalDynamoNamespace": True},
        )
    )
    assert pool.uses_global_namespace


def test_reference_names_the_dgd_at_the_resource_version_read() -> None:
    pool = pool_from_object(alpha({}, name="pool", namespace="team"))
    assert pool.reference() == {
        "apiVersion": V1ALPHA1,
        "kind": "DynamoGraphDeployment",
        "namespace": "team",
        "name": "pool",
        "uid": "u-1",
        "resourceVersion": "7",
    }


def test_pool_default_annotations_are_not_shared_between_instances() -> None:
    a = Pool("n", "a", "u", "1", V1BETA1, False)
    b = Pool("n", "b", "u", "1", V1BETA1, False)
    assert a.annotations is not b.annotations


# --------------------------------------------------------------------------- properties

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)

COMPONENT_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "name": JSON | st.text(max_size=8),
        "type": JSON | st.sampled_from(["worker", "prefill", "decode", "frontend", "planner"]),
        "componentType": JSON | st.sampled_from(["worker", "frontend"]),
        "subComponentType": JSON | st.sampled_from(["prefill", "decode"]),
        "globalDynamoNamespace": JSON,
    },
)

DGD_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": st.sampled_from([V1BETA1, V1ALPHA1]) | JSON,
        "metadata": JSON
        | st.fixed_dictionaries(
            {},
            optional={
                "name": JSON,
                "namespace": JSON,
                "uid": JSON,
                "resourceVersion": JSON,
                "deletionTimestamp": JSON,
                "annotations": JSON,
            },
        ),
        "spec": JSON
        | st.fixed_dictionaries(
            {},
            optional={
                "components": JSON | st.lists(COMPONENT_LIKE | JSON, max_size=4),
                "services": JSON | st.dictionaries(st.text(max_size=6), COMPONENT_LIKE | JSON),
            },
        ),
    },
)


@settings(max_examples=300)
@given(DGD_LIKE)
def test_pool_from_object_never_raises_for_arbitrary_json(obj: dict[str, Any]) -> None:
    pool = pool_from_object(obj)
    for c in pool.components:
        assert isinstance(c.name, str)
        assert c.name
        assert c.type is None or isinstance(c.type, str)
        assert isinstance(c.global_dynamo_namespace, bool)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in pool.annotations.items())
    assert isinstance(pool.discovery_backend("kubernetes"), str)
    for service in pool.frontend_services:
        assert "." not in service
        assert service == service.lower()
    pool.reference()


# --------------------------------------------------------------------------- by Service


def test_the_pools_naming_a_service_are_read_by_the_names_prefixes() -> None:
    """`<D>-<component>`: D is a prefix before a dash; each prefix is read by name, and
    a DGD found counts only when its pool names the Service as a frontend's."""
    fe = {"name": "ments-db", "type": "frontend"}
    dgds = {
        "pay": beta(fe, name="pay"),
        "pay-ments": beta({"name": "db", "type": "frontend"}, name="pay-ments"),
        "pay-ments-db": beta({"name": "db", "type": "frontend"}, name="pay-ments-db"),
        "web": beta({"name": "ui", "type": "worker"}, name="web"),
    }
    asked: list[str] = []

    def named(name: str) -> dict[str, Any] | None:
        asked.append(name)
        return dgds.get(name)

    assert pools_naming_service("pay-ments-db", named) == ["pay", "pay-ments"]
    assert asked == ["pay", "pay-ments"]
    assert pools_naming_service("web-ui", named) == []  # a worker's Service: no frontend
    assert pools_naming_service("pay-other", named) == []
    assert pools_naming_service("nodash", named) == []
