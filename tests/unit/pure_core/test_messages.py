"""The exact words users read: Ready messages, export warnings, skipped-export reasons
and validation errors. They are part of the interface ("every error says what to
change"), so a change to any of them must be deliberate and shows up here."""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.dgd import pool_from_object
from dynamo_pool_operator.api.mcs import ClusterID, Implementation, serviceexports
from dynamo_pool_operator.api.relay import RelayDefaults, relay_from_object
from dynamo_pool_operator.pool.exports.feature import relevant_exports
from dynamo_pool_operator.pool.exports.plan import Warn, plan
from dynamo_pool_operator.pool.plan import Reason, decide

DEFAULTS = RelayDefaults(image="relay:1", port=8090)


def relay(name: str = "llama", **spec: Any) -> Any:
    meta = {"name": name, "namespace": "ns", "uid": "relay-uid", "generation": 1}
    return relay_from_object({"metadata": meta, "spec": spec}, DEFAULTS)


def pool(name: str = "llama", components: list[dict[str, Any]] | None = None) -> Any:
    comps = (
        components
        if components is not None
        else [{"name": "Frontend", "type": "frontend"}, {"name": "w", "type": "worker"}]
    )
    return pool_from_object(
        {
            "apiVersion": "nvidia.com/v1beta1",
            "metadata": {"name": name, "namespace": "ns", "uid": "dgd-uid", "resourceVersion": "7"},
            "spec": {"components": comps},
        }
    )


def owned(kind: str, ref: dict[str, Any] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "llama-pool-relay", "namespace": "ns"}
    if ref is not None:
        meta["ownerReferences"] = [ref]
    return {"kind": kind, "metadata": meta}


# ------------------------------------------------------------------ validation helpers
def test_subdomain_length_boundary_is_253() -> None:
    assert names.dns1123_subdomain_errors("a" * 253) == []
    assert names.dns1123_subdomain_errors("a" * 254) == [
        "must be no more than 253 characters (has 254)"
    ]


def test_subdomain_pattern_message() -> None:
    assert names.dns1123_subdomain_errors("Bad_Name") == [
        "must consist of lower case alphanumeric characters, '-' or '.', and must start "
        "and end with an alphanumeric character"
    ]
    assert names.dns1123_subdomain_errors("a.b-c") == []


@pytest.mark.parametrize("key", ["team", "example.com/team", "a" * 63, "a.b_c-d"])
def test_valid_label_keys(key: str) -> None:
    assert names.qualified_name_errors(key) == []


NAME_PART = (
    "name part must be 1-63 characters of alphanumerics, '-', '_' or '.', starting "
    "and ending with an alphanumeric character"
)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("Bad_Prefix/team", ["prefix 'Bad_Prefix' must be a DNS subdomain (e.g. example.com)"]),
        ("/team", ["prefix '' must be a DNS subdomain (e.g. example.com)"]),
        ("example.com/", [NAME_PART]),
        ("a" * 64, [NAME_PART]),
        ("", [NAME_PART]),
        ("-team", [NAME_PART]),
    ],
)
def test_invalid_label_keys_name_the_part_to_change(key: str, expected: list[str]) -> None:
    assert names.qualified_name_errors(key) == expected


def test_label_value_boundary_and_message() -> None:
    assert names.label_value_errors("") == []
    assert names.label_value_errors("a" * 63) == []
    assert names.label_value_errors("a" * 64) == ["must be no more than 63 characters (has 64)"]
    assert names.label_value_errors("not valid!") == [
        "must be empty or consist of alphanumerics, '-', '_' or '.', starting and "
        "ending with an alphanumeric character"
    ]


# ------------------------------------------------------------------ Ready messages
def _decide(r: Any, p: Any, objects: dict[str, Any] | None = None) -> Any:
    return decide(r, p, objects or {}, default_discovery_backend="kubernetes")


def test_invalid_relay_name_message_joins_every_problem() -> None:
    d = _decide(relay("Llama." + "x" * 60), pool())
    assert d.reason is Reason.INVALID_CONFIGURATION
    assert "must be no more than 63 characters (has 77); must consist of lower case" in d.message
    assert d.message.endswith(
        "Name the DynamoPoolRelay (and its DGD) with at most 52 lower-case letters, digits or '-'"
    )


def test_invalid_spec_message_joins_every_field_problem() -> None:
    d = _decide(relay(port=0, replicas=-1), pool())
    assert d.message == (
        "spec.replicas: must be an integer from 0 to 100, got -1; "
        "spec.port: must be an integer from 1 to 65535, got 0; the relay's objects and "
        "exports are kept as they run until the spec is fixed (nothing is withdrawn)"
    )


def test_no_workers_message() -> None:
    d = _decide(relay(), pool(components=[{"name": "Frontend", "type": "frontend"}]))
    assert d.message == "the DGD has no worker component (type worker, prefill or decode)"


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        (
            {"Service": owned("Service", None)},
            "Service 'llama-pool-relay' has no controller",
        ),
        (
            {
                "Deployment": owned(
                    "Deployment",
                    {"kind": "ReplicaSet", "name": "rs", "uid": "x", "controller": True},
                )
            },
            "Deployment 'llama-pool-relay' has controller ReplicaSet/rs",
        ),
        (
            {"Deployment": owned("Deployment", {"uid": "x", "controller": True})},
            "Deployment 'llama-pool-relay' has controller ?/?",
        ),
        (
            {"Deployment": owned("Deployment", None), "Service": owned("Service", None)},
            "Deployment 'llama-pool-relay' has no controller; "
            "Service 'llama-pool-relay' has no controller",
        ),
    ],
)
def test_ownership_conflict_message_names_each_object_and_what_to_do(
    objects: dict[str, Any], expected: str
) -> None:
    d = _decide(relay(), pool(), objects)
    assert d.reason is Reason.OWNERSHIP_CONFLICT
    assert d.message == (
        expected + ": the operator never adopts objects; delete the other object, or use "
        "another name for the DynamoPoolRelay and its DGD"
    )


# ------------------------------------------------------------------ export warnings
def _plan(r: Any, p: Any, implementation: str = "mcs", **kw: Any) -> Any:
    published = _decide(r, p)
    return plan(
        r,
        published,
        p,
        {},
        implementation=Implementation(implementation),
        resource=serviceexports("v1alpha1"),
        cluster_id=kw.get("cluster_id", ClusterID()),
    )


def test_invalid_service_name_warning_lists_every_name() -> None:
    comps = [
        {"name": "f" * 60, "type": "frontend"},
        {"name": "g" * 61, "type": "frontend"},
        {"name": "w", "type": "worker"},
    ]
    p = _plan(relay(), pool(components=comps))
    (w,) = [w for w in p.advisories if w.reason is Warn.INVALID_SERVICE_NAME]
    assert w.message == (
        f"not exported, not a valid Service name: llama-{'f' * 60}, llama-{'g' * 61}"
    )
    assert p.lines[0].message == "must be no more than 63 characters (has 66)"


def test_invalid_service_name_status_joins_every_problem() -> None:
    p = _plan(
        relay(),
        pool(components=[{"name": "9" * 60, "type": "frontend"}, {"name": "w", "type": "worker"}]),
    )
    assert p.lines[0].message == "must be no more than 63 characters (has 66)"
    p = _plan(
        relay("llama"),
        pool(
            components=[
                {"name": "F" * 57 + "-", "type": "frontend"},
                {"name": "w", "type": "worker"},
            ]
        ),
    )
    assert p.lines[0].message == (  # two problems, both shown
        "must be no more than 63 characters (has 64); must consist of lower case "
        "alphanumeric characters or '-', start with an alphabetic character, and end "
        "with an alphanumeric character"
    )


def test_too_long_for_karmada_warning_lists_every_name() -> None:
    comps = [
        {"name": "f" * 50, "type": "frontend"},
        {"name": "g" * 51, "type": "frontend"},
        {"name": "w", "type": "worker"},
    ]
    p = _plan(relay(), pool(components=comps), "karmada")
    (w,) = [w for w in p.advisories if w.reason is Warn.SERVICE_NAME_TOO_LONG]
    assert w.message == (
        f"not exported, longer than Karmada's 55 characters: llama-{'f' * 50}, llama-{'g' * 51}"
    )


def test_no_frontend_warning_message() -> None:
    p = _plan(relay(), pool(components=[{"name": "w", "type": "worker"}]))
    (w,) = p.advisories
    assert w.message == (
        "DGD 'llama' has no frontend component; only the relay Service is exported"
    )


def test_cluster_id_mismatch_message_says_what_must_match() -> None:
    prop = {"metadata": {"uid": "p", "resourceVersion": "3"}, "spec": {"value": "west"}}
    p = _plan(
        relay(clusterId="east"), pool(), cluster_id=ClusterID(True, prop, "about.k8s.io/v1beta1")
    )
    (w,) = p.advisories
    assert w.message == (
        "spec.clusterId is 'east' but this cluster's ID (cluster.clusterset.k8s.io) is "
        "'west'; the Global Discovery Service matches a pool to its imports only when "
        "they are equal"
    )


def test_relevant_exports_ignores_exports_of_other_namespaces_even_without_metadata() -> None:
    controlled = [
        {"metadata": {"name": "x", "namespace": "other"}},
        {"metadata": {}},
        {"kind": "X"},
    ]
    assert relevant_exports(relay(), pool(), lambda _: None, controlled) == {}
