"""The DynamoPoolRelay read-model (api/relay.py): defaults applied, problems collected.

docs/crd.md, 'spec': replicas, image and port default from the operator configuration
(`poolRelay`; replicas 2). An invalid spec withdraws with `InvalidConfiguration`, so every
problem names the field (`spec.<field>`) and reading a relay never raises.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dynamo_pool_operator.api import crd, names
from dynamo_pool_operator.api.relay import Relay, RelayDefaults, relay_from_object

DEFAULTS = RelayDefaults(image="registry.example/relay:1.0", port=7000)
CUSTOM_DEFAULTS = RelayDefaults(
    image="other/relay:2", port=9999, replicas=5, image_pull_policy="Always"
)


def relay_obj(spec: Any = None, **metadata: Any) -> dict[str, Any]:
    meta = {
        "name": "pool",
        "namespace": "team",
        "uid": "r-uid",
        "generation": 3,
        "resourceVersion": "42",
        **metadata,
    }
    obj: dict[str, Any] = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoPoolRelay",
        "metadata": meta,
    }
    if spec is not None:
        obj["spec"] = spec
    return obj


def read(spec: Any = None, defaults: RelayDefaults = DEFAULTS, **metadata: Any) -> Relay:
    return relay_from_object(relay_obj(spec, **metadata), defaults)


# --------------------------------------------------------------------------- defaults


@pytest.mark.parametrize("spec", [None, {}], ids=["no-spec", "empty-spec"])
def test_defaults_apply_when_spec_leaves_fields_out(spec: Any) -> None:
    r = read(spec)
    assert r.problems == ()
    assert r.image == DEFAULTS.image
    assert r.port == DEFAULTS.port
    assert r.replicas == 2
    assert r.image_pull_policy == "IfNotPresent"
    assert r.cluster_id == ""
    assert r.service_account_name is None
    assert dict(r.resources) == {}
    assert dict(r.pod_labels) == {}
    assert dict(r.pod_annotations) == {}
    assert dict(r.node_selector) == {}
    assert r.tolerations == ()


def test_defaults_come_from_relay_defaults_not_constants() -> None:
    r = read({}, defaults=CUSTOM_DEFAULTS)
    assert (r.image, r.port, r.replicas, r.image_pull_policy) == (
        "other/relay:2",
        9999,
        5,
        "Always",
    )


def test_metadata_is_read() -> None:
    r = read({})
    assert (r.namespace, r.name, r.uid, r.generation, r.resource_version) == (
        "team",
        "pool",
        "r-uid",
        3,
        "42",
    )
    assert not r.terminating
    assert read({}, deletionTimestamp="2024-01-01T00:00:00Z").terminating


def test_explicit_values_are_kept() -> None:
    spec = {
        "clusterId": "east-1",
        "replicas": 3,
        "image": "mine/relay:9",
        "port": 8443,
        "serviceAccountName": "relay-sa",
        "resources": {"limits": {"cpu": "1"}},
        "podLabels": {"team": "ml"},
        "podAnnotations": {"a/b": "c"},
        "nodeSelector": {"pool": "cpu"},
        "tolerations": [{"key": "k", "operator": "Exists"}],
    }
    r = read(spec, defaults=CUSTOM_DEFAULTS)
    assert r.problems == ()
    assert r.cluster_id == "east-1"
    assert r.replicas == 3
    assert r.image == "mine/relay:9"
    assert r.port == 8443
    assert r.service_account_name == "relay-sa"
    assert dict(r.resources) == {"limits": {"cpu": "1"}}
    assert dict(r.pod_labels) == {"team": "ml"}
    assert dict(r.pod_annotations) == {"a/b": "c"}
    assert dict(r.node_selector) == {"pool": "cpu"}
    assert r.tolerations == ({"key": "k", "operator": "Exists"},)


@pytest.mark.parametrize(
    ("field", "value"),
    [("replicas", 0), ("replicas", crd.MAX_REPLICAS), ("port", 1), ("port", 65535)],
)
def test_integer_bounds_are_inclusive(field: str, value: int) -> None:
    r = read({field: value})
    assert r.problems == ()
    assert getattr(r, field) == value


def test_empty_service_account_name_means_the_default() -> None:
    assert read({"serviceAccountName": ""}).service_account_name is None


def test_non_map_tolerations_entries_are_refused_by_index() -> None:
    r = read({"tolerations": [{"key": "k"}, "x", 5, None]})
    assert [p.split(":")[0] for p in r.problems] == [
        "spec.tolerations[1]",
        "spec.tolerations[2]",
        "spec.tolerations[3]",
    ]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"image": " "}, "spec.image"),
        ({"image": "relay :1"}, "spec.image"),
        ({"resources": {"limits": {"cpu": "lots"}}}, "spec.resources.limits[cpu]"),
        ({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}, "spec.resources"),
        ({"tolerations": [{"key": "k", "operator": "Gt"}]}, "spec.tolerations[0].operator"),
    ],
)
def test_pod_field_problems_reach_the_relay(spec: dict[str, Any], field: str) -> None:
    """What the CRD schema refuses is checked again: a relay stored before the schema
    said so must withdraw with the field named, not fail every write."""
    problems = read(spec).problems
    assert problems
    assert all(p.startswith(field) for p in problems), problems


# --------------------------------------------------------------------------- problems


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"replicas": True}, "spec.replicas", id="replicas-bool-is-not-int"),
        pytest.param({"replicas": False}, "spec.replicas", id="replicas-false-is-not-int"),
        pytest.param({"replicas": -1}, "spec.replicas", id="replicas-negative"),
        pytest.param({"replicas": 2**31}, "spec.replicas", id="replicas-over-int32"),
        pytest.param(
            {"replicas": crd.MAX_REPLICAS + 1}, "spec.replicas", id="replicas-over-the-maximum"
        ),
        pytest.param({"replicas": "2"}, "spec.replicas", id="replicas-string"),
        pytest.param({"replicas": 1.5}, "spec.replicas", id="replicas-float"),
        pytest.param({"port": 0}, "spec.port", id="port-zero"),
        pytest.param({"port": 65536}, "spec.port", id="port-too-large"),
        pytest.param({"port": -80}, "spec.port", id="port-negative"),
        pytest.param({"port": True}, "spec.port", id="port-bool-is-not-int"),
        pytest.param({"port": "8080"}, "spec.port", id="port-string"),
        pytest.param({"image": 5}, "spec.image", id="image-int"),
        pytest.param({"image": ["a"]}, "spec.image", id="image-list"),
        pytest.param({"clusterId": 7}, "spec.clusterId", id="cluster-id-int"),
        pytest.param({"clusterId": {"a": 1}}, "spec.clusterId", id="cluster-id-map"),
        pytest.param({"serviceAccountName": 1}, "spec.serviceAccountName", id="sa-int"),
        pytest.param({"podLabels": "a=b"}, "spec.podLabels", id="pod-labels-string"),
        pytest.param({"podLabels": {"a": 1}}, "spec.podLabels", id="pod-labels-int-value"),
        pytest.param({"podLabels": {"a": None}}, "spec.podLabels", id="pod-labels-null-value"),
        pytest.param({"podLabels": ["a"]}, "spec.podLabels", id="pod-labels-list"),
        pytest.param({"podAnnotations": {"a": True}}, "spec.podAnnotations", id="pod-ann-bool"),
        pytest.param({"podAnnotations": 3}, "spec.podAnnotations", id="pod-ann-int"),
        pytest.param({"nodeSelector": {"a": 1.0}}, "spec.nodeSelector", id="node-sel-float"),
        pytest.param({"nodeSelector": "x"}, "spec.nodeSelector", id="node-sel-string"),
    ],
)
def test_invalid_values_are_collected_as_problems_naming_the_field(
    spec: dict[str, Any], field: str
) -> None:
    r = read(spec)
    assert len(r.problems) == 1, r.problems
    assert r.problems[0].startswith(f"{field}:"), r.problems


@pytest.mark.parametrize(
    ("spec", "attr", "fallback"),
    [
        ({"replicas": "3"}, "replicas", 2),
        ({"port": 0}, "port", DEFAULTS.port),
        ({"image": 5}, "image", DEFAULTS.image),
        ({"clusterId": 7}, "cluster_id", ""),
        ({"serviceAccountName": 1}, "service_account_name", None),
    ],
)
def test_invalid_value_falls_back_to_the_default(
    spec: dict[str, Any], attr: str, fallback: Any
) -> None:
    assert getattr(read(spec), attr) == fallback


@pytest.mark.parametrize(
    ("field", "value", "phrase"),
    [
        ("replicas", -1, "from 0 to 100, got -1"),
        ("port", 70000, "from 1 to 65535, got 70000"),
        ("port", True, "got True"),
    ],
)
def test_integer_problems_state_the_allowed_range_and_the_value(
    field: str, value: Any, phrase: str
) -> None:
    (problem,) = read({field: value}).problems
    assert phrase in problem


@pytest.mark.parametrize("key", sorted(names.RESERVED_POD_LABELS))
def test_reserved_pod_label_is_a_problem_and_is_not_passed_on(key: str) -> None:
    r = read({"podLabels": {key: "mine", "team": "ml"}})
    (problem,) = r.problems
    assert problem.startswith(f"spec.podLabels[{key}]:")
    assert "remove it from podLabels" in problem
    assert dict(r.pod_labels) == {"team": "ml"}


def test_reserved_pod_labels_are_the_selector_and_dgd_labels() -> None:
    assert {
        "app.kubernetes.io/name",
        "app.kubernetes.io/instance",
        "nvidia.com/dynamo-graph-deployment-name",
    } == names.RESERVED_POD_LABELS


@pytest.mark.parametrize(
    "key",
    [
        "nvidia.com/dynamo-component-type",
        "nvidia.com/dynamo-namespace",
        "nvidia.com/anything",
        "operator.nvidia.com/role",
        "kubernetes.io/hostname",
        "node-role.kubernetes.io/control-plane",
        "statefulset.kubernetes.io/pod-name",
        "k8s.io/anything",
        "x.k8s.io/anything",
    ],
)
def test_pod_labels_under_a_reserved_prefix_are_problems_and_are_not_passed_on(key: str) -> None:
    """docs/crd.md, "Who may set what": a relay pod carries no label in our own domain
    (`nvidia.com`, where Dynamo's Services select their pods) nor in Kubernetes' own
    (`kubernetes.io`, `k8s.io`), whoever wrote the relay."""
    r = read({"podLabels": {key: "mine", "team": "ml"}})
    (problem,) = r.problems
    assert problem.startswith(f"spec.podLabels[{key}]: ")
    assert "reserved" in problem
    assert dict(r.pod_labels) == {"team": "ml"}


@pytest.mark.parametrize(
    "key",
    [
        "team",
        "app",
        "app.kubernetes.io/part-of",
        "app.kubernetes.io/version",
        "example.com/nvidia.com",
        "notnvidia.com/x",
        "nvidia.community/x",
    ],
)
def test_pod_labels_outside_the_reserved_prefixes_pass(key: str) -> None:
    r = read({"podLabels": {key: "v"}})
    assert r.problems == ()
    assert dict(r.pod_labels) == {key: "v"}


def test_every_problem_is_reported_at_once() -> None:
    r = read(
        {
            "replicas": -1,
            "port": 0,
            "image": 1,
            "clusterId": 2,
            "serviceAccountName": 3,
            "podLabels": {names.APP_NAME: "x"},
            "podAnnotations": {"a": 1},
            "nodeSelector": {"b": 2},
        }
    )
    fields = {p.split(":")[0].split("[")[0] for p in r.problems}
    assert fields == {
        "spec.replicas",
        "spec.port",
        "spec.image",
        "spec.clusterId",
        "spec.serviceAccountName",
        "spec.podLabels",
        "spec.podAnnotations",
        "spec.nodeSelector",
    }


@pytest.mark.parametrize(
    ("spec", "field"),
    [({"image": 0}, "spec.image"), ({"clusterId": False}, "spec.clusterId")],
)
def test_falsy_non_string_values_are_problems_too(spec: dict[str, Any], field: str) -> None:
    assert any(p.startswith(field) for p in read(spec).problems)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"podLabels": {"team": "not valid!"}}, "spec.podLabels", id="label-value"),
        pytest.param({"podLabels": {"team": "x" * 64}}, "spec.podLabels", id="label-too-long"),
        pytest.param({"podLabels": {"bad key!": "v"}}, "spec.podLabels", id="label-key"),
        pytest.param({"serviceAccountName": "Not_A_Name"}, "spec.serviceAccountName", id="sa-name"),
    ],
)
def test_values_the_api_server_rejects_are_problems(spec: dict[str, Any], field: str) -> None:
    assert any(p.startswith(field) for p in read(spec).problems)


# --------------------------------------------------------------------------- garbage


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param({}, id="empty"),
        pytest.param({"metadata": None, "spec": None}, id="nulls"),
        pytest.param({"metadata": "x", "spec": "y"}, id="strings"),
        pytest.param({"metadata": [], "spec": []}, id="lists"),
        pytest.param({"spec": {"resources": "big", "tolerations": "all"}}, id="wrong-shapes"),
    ],
)
def test_garbage_relay_objects_never_raise(obj: dict[str, Any]) -> None:
    r = relay_from_object(obj, DEFAULTS)
    assert isinstance(r.problems, tuple)
    assert r.image == DEFAULTS.image
    assert r.port == DEFAULTS.port


@pytest.mark.parametrize("generation", ["abc", {"g": 1}, [1]])
def test_garbage_generation_never_raises(generation: Any) -> None:
    relay_from_object(relay_obj({}, generation=generation), DEFAULTS)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=15,
)
SPEC_KEYS = [
    "clusterId",
    "replicas",
    "image",
    "port",
    "serviceAccountName",
    "resources",
    "podLabels",
    "podAnnotations",
    "nodeSelector",
    "tolerations",
]


@settings(max_examples=300)
@given(JSON | st.fixed_dictionaries({}, optional=dict.fromkeys(SPEC_KEYS, JSON)))
def test_arbitrary_spec_never_raises_and_yields_usable_values(spec: Any) -> None:
    r = relay_from_object(relay_obj(None) | {"spec": spec}, DEFAULTS)
    assert isinstance(r.image, str)
    assert isinstance(r.cluster_id, str)
    assert type(r.port) is int
    assert 1 <= r.port <= 65535
    assert type(r.replicas) is int
    assert r.replicas >= 0
    assert r.service_account_name is None or isinstance(r.service_account_name, str)
    for m in (r.pod_labels, r.pod_annotations, r.node_selector):
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in m.items())
    assert not set(r.pod_labels) & names.RESERVED_POD_LABELS
    assert not [k for k in r.pod_labels if names.reserved_domain(k)]
    assert all(p.startswith("spec.") for p in r.problems)


# --------------------------------------------------------------------------- references


#: What both references say of the relay read by `read`.
THE_RELAY = {
    "apiVersion": "nvidia.com/v1alpha1",
    "kind": "DynamoPoolRelay",
    "name": "pool",
    "uid": "r-uid",
}


def test_owner_reference_is_a_blocking_controller_reference() -> None:
    assert read({}).owner_reference() == {
        **THE_RELAY,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_reference_names_the_relay_at_the_version_read_and_its_generation() -> None:
    assert read({}).reference == {
        **THE_RELAY,
        "namespace": "team",
        "resourceVersion": "42",
        "generation": 3,
    }


# --------------------------------------------------------------------------- exact problems

NAME_PART = (
    "name part must be 1-63 characters of alphanumerics, '-', '_' or '.', starting and "
    "ending with an alphanumeric character"
)
LABEL_VALUE = (
    "must be empty or consist of alphanumerics, '-', '_' or '.', starting and ending with "
    "an alphanumeric character"
)


def _bad_key(field: str, id: str) -> Any:
    """A map field with a key that is no label key, and the problem named for it."""
    return pytest.param(
        {field: {"bad key!": "v"}}, f"spec.{field}[bad key!]: invalid key: {NAME_PART}", id=id
    )


def _bad_value(field: str, key: str, id: str) -> Any:
    """A map field with a value that is no label value, and the problem named for it."""
    return pytest.param(
        {field: {key: "not valid!"}},
        f"spec.{field}[{key}]: invalid value 'not valid!': {LABEL_VALUE}",
        id=id,
    )


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        _bad_key("podLabels", "pod-label-key"),
        _bad_value("podLabels", "team", "pod-label-value"),
        _bad_key("podAnnotations", "pod-annotation-key"),
        _bad_key("nodeSelector", "node-selector-key"),
        _bad_value("nodeSelector", "pool", "node-selector-value"),
        pytest.param(
            {"podLabels": {names.APP_NAME: "x"}},
            f"spec.podLabels[{names.APP_NAME}]: is set by the operator to select the relay "
            "pods; remove it from podLabels",
            id="reserved-pod-label",
        ),
        pytest.param(
            {"podLabels": "team=ml"}, "spec.podLabels: must be a map of strings", id="not-a-map"
        ),
        pytest.param({"image": 5}, "spec.image: must be a string, got int", id="image-type"),
        pytest.param(
            {"clusterId": [1]}, "spec.clusterId: must be a string, got list", id="cluster-id-type"
        ),
        pytest.param(
            {"serviceAccountName": "Not_A_Name"},
            "spec.serviceAccountName: 'Not_A_Name' must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character",
            id="service-account-name",
        ),
    ],
)
def test_problem_names_the_field_the_entry_and_what_to_change(
    spec: dict[str, Any], problem: str
) -> None:
    assert read(spec).problems == (problem,)


@pytest.mark.parametrize(
    "value", ["free text, with spaces!", "x" * 300, "", '{"json": true}'], ids=repr
)
def test_pod_annotation_values_are_free_text(value: str) -> None:
    r = read({"podAnnotations": {"example.com/note": value}})
    assert r.problems == ()
    assert dict(r.pod_annotations) == {"example.com/note": value}


# --------------------------------------------------------------------------- metadata fallbacks


@pytest.mark.parametrize(
    "generation",
    [pytest.param(None, id="missing"), "abc", True, 1.5, [1]],
)
def test_generation_that_is_not_an_integer_reads_as_zero(generation: Any) -> None:
    meta = {"name": "pool"} if generation is None else {"name": "pool", "generation": generation}
    assert relay_from_object({"metadata": meta}, DEFAULTS).generation == 0


def test_missing_metadata_reads_as_empty_strings() -> None:
    r = relay_from_object({"spec": {}}, DEFAULTS)
    assert (r.namespace, r.name, r.uid, r.resource_version) == ("", "", "", "")
    assert not r.terminating


def test_relay_shares_no_nested_state_with_the_object_it_was_read_from() -> None:
    # The object is the informer's cached copy; the relay must stay what was read.
    spec: dict[str, Any] = {
        "resources": {"limits": {"cpu": "1"}},
        "tolerations": [{"key": "k", "extra": {"nested": "a"}}],
    }
    r = read(spec)
    spec["resources"]["limits"]["cpu"] = "99"
    spec["tolerations"][0]["extra"]["nested"] = "changed"
    assert dict(r.resources) == {"limits": {"cpu": "1"}}
    assert r.tolerations == ({"key": "k", "extra": {"nested": "a"}},)
