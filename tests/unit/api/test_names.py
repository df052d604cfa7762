"""Naming rules (api/names.py): the one place that knows how things are called.

Dynamo names a component's Service `<DGD>-<component>`, lower-cased, `.` -> `-`
(docs/exports.md, 'What is exported'). The relay's Deployment and Service are
`<D>-pool-relay` and must be a DNS-1035 label (docs/crd.md, `InvalidConfiguration`).
With Karmada an exported name may hold at most 55 characters (docs/exports.md,
'Karmada (`karmada`)').
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamo_pool_operator.api import names

#: The DNS-1035 label rule written independently of the code under test.
REFERENCE_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


# --------------------------------------------------------------------------- relay name


@pytest.mark.parametrize(
    ("dgd", "expected"),
    [
        ("qwen", "qwen-pool-relay"),
        ("llama-3-70b", "llama-3-70b-pool-relay"),
        ("a", "a-pool-relay"),
    ],
)
def test_relay_name_is_dgd_name_with_pool_relay_suffix(dgd: str, expected: str) -> None:
    assert names.relay_name(dgd) == expected


def test_relay_name_keeps_the_dgd_name_verbatim_so_bad_names_stay_detectable() -> None:
    # The relay name is not normalized: a dotted or upper-case DGD must fail validation
    # (InvalidConfiguration, docs/crd.md), not be silently renamed.
    assert names.relay_name("Qwen3-0.6B") == "Qwen3-0.6B-pool-relay"
    assert not names.is_valid_service_name(names.relay_name("Qwen3-0.6B"))


def test_relay_suffix_leaves_52_characters_for_the_dgd_name() -> None:
    assert names.DNS1035_MAX - len(names.RELAY_SUFFIX) == 52
    assert names.is_valid_service_name(names.relay_name("a" * 52))
    assert not names.is_valid_service_name(names.relay_name("a" * 53))


# --------------------------------------------------------------------------- component Service


@pytest.mark.parametrize(
    ("dgd", "component", "expected"),
    [
        ("pool", "frontend", "pool-frontend"),
        ("pool", "Frontend", "pool-frontend"),
        ("pool", "Qwen3-0.6B", "pool-qwen3-0-6b"),
        ("qwen3-0.6b", "Frontend", "qwen3-0-6b-frontend"),
        ("Qwen3-0.6B", "Qwen3-0.6B", "qwen3-0-6b-qwen3-0-6b"),
        ("pool", "a.b.c", "pool-a-b-c"),
        ("pool", "GLOBALROUTER", "pool-globalrouter"),
    ],
)
def test_component_service_name_lowercases_and_replaces_dots(
    dgd: str, component: str, expected: str
) -> None:
    assert names.component_service_name(dgd, component) == expected


def test_component_service_name_applies_no_collision_avoidance() -> None:
    # A component called "pool-relay" gets the relay Service's name; the rule is Dynamo's
    # and stays literal, so callers can see (and report) the collision.
    assert names.component_service_name("d", "pool-relay") == names.relay_name("d")


@given(st.text(), st.text())
def test_component_service_name_of_any_input_is_lowercase_without_dots(
    dgd: str, component: str
) -> None:
    out = names.component_service_name(dgd, component)
    assert out == out.lower()
    assert "." not in out


@given(
    st.text(
        alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.", min_size=1
    ),
    st.text(
        alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.", min_size=1
    ),
)
def test_component_service_name_is_idempotent_under_its_own_normalization(
    dgd: str, component: str
) -> None:
    out = names.component_service_name(dgd, component)
    assert out == out.lower().replace(".", "-")
    assert len(out) == len(dgd) + 1 + len(component)


# --------------------------------------------------------------------------- DNS-1035


@pytest.mark.parametrize(
    "name",
    [
        "a",
        "a1",
        "a-b",
        "abc-123-def",
        "a" * 63,
        "z" + "0" * 62,
        "a--b",
    ],
)
def test_dns1035_accepts_valid_labels(name: str) -> None:
    assert names.dns1035_label_errors(name) == []
    assert names.is_valid_service_name(name)


@pytest.mark.parametrize(
    ("name", "phrase"),
    [
        ("a" * 64, "no more than 63 characters (has 64)"),
        ("1abc", "start with an alphabetic character"),
        ("0", "start with an alphabetic character"),
        ("abc-", "end with an alphanumeric character"),
        ("-abc", "start with an alphabetic character"),
        ("Abc", "lower case alphanumeric"),
        ("abC", "lower case alphanumeric"),
        ("a.b", "lower case alphanumeric"),
        ("a_b", "lower case alphanumeric"),
        ("a b", "lower case alphanumeric"),
        ("", "start with an alphabetic character"),
        ("qwen3-0.6b-pool-relay", "lower case alphanumeric"),
    ],
)
def test_dns1035_rejects_invalid_labels_and_says_why(name: str, phrase: str) -> None:
    errors = names.dns1035_label_errors(name)
    assert errors, f"{name!r} must be rejected"
    assert any(phrase in e for e in errors), errors
    assert not names.is_valid_service_name(name)


def test_dns1035_too_long_and_malformed_reports_both_problems() -> None:
    errors = names.dns1035_label_errors("A" * 64)
    assert len(errors) == 2
    assert any("63" in e for e in errors)


def test_dns1035_length_limit_is_63_exactly() -> None:
    assert names.is_valid_service_name("a" * 63)
    assert not names.is_valid_service_name("a" * 64)
    assert names.dns1035_label_errors("a" * 64) == ["must be no more than 63 characters (has 64)"]


@pytest.mark.parametrize("name", ["abc\n", "pool-frontend\n"])
def test_dns1035_rejects_a_trailing_newline(name: str) -> None:
    assert not names.is_valid_service_name(name)


@given(st.text(alphabet="abcxyzAZ019-._ ", max_size=70))
def test_dns1035_validity_matches_the_reference_rule(name: str) -> None:
    expected = bool(REFERENCE_DNS1035.fullmatch(name)) and len(name) <= 63
    assert names.is_valid_service_name(name) is expected
    assert (names.dns1035_label_errors(name) == []) is expected


# --------------------------------------------------------------------------- Karmada


@pytest.mark.parametrize(
    ("length", "fits"),
    [(1, True), (54, True), (55, True), (56, False), (63, False)],
)
def test_fits_karmada_allows_at_most_55_characters(length: int, fits: bool) -> None:
    assert names.fits_karmada("a" * length) is fits


def test_karmada_limit_leaves_room_for_the_derived_prefix_in_a_63_char_label_value() -> None:
    assert names.KARMADA_MAX_SERVICE_NAME == 55
    assert len(names.KARMADA_DERIVED_PREFIX + "a" * 55) == 63


# --------------------------------------------------------------------------- Dynamo namespace


@pytest.mark.parametrize(
    ("namespace", "dgd", "expected"),
    [
        ("team", "pool", "team-pool"),
        ("team", "qwen3-0.6b", "team-qwen3-0-6b"),
        ("team", "a.b.c", "team-a-b-c"),
        ("team.x", "pool", "team.x-pool"),  # only the DGD name's dots become dashes
        ("default", "llama", "default-llama"),
    ],
)
def test_dynamo_namespace_is_namespace_dash_dgd_with_dots_as_dashes(
    namespace: str, dgd: str, expected: str
) -> None:
    assert names.dynamo_namespace(namespace, dgd) == expected


def test_global_dynamo_namespace_is_dynamo() -> None:
    assert names.GLOBAL_DYNAMO_NAMESPACE == "dynamo"


# --------------------------------------------------------------------------- discovery SA


@pytest.mark.parametrize(
    ("dgd", "expected"),
    [("pool", "pool-k8s-service-discovery"), ("qwen3", "qwen3-k8s-service-discovery")],
)
def test_discovery_service_account_is_dgd_dash_k8s_service_discovery(
    dgd: str, expected: str
) -> None:
    assert names.discovery_service_account(dgd) == expected


@pytest.mark.parametrize(
    ("name", "pool"),
    [
        ("llama-pool-relay", "llama"),
        ("a-pool-relay", "a"),
        ("-pool-relay", None),  # no pool has an empty name
        ("llama-frontend", None),
        ("llama-pool-relay-x", None),
        ("", None),
    ],
)
def test_pool_of_is_the_inverse_of_relay_name(name: str, pool: str | None) -> None:
    assert names.pool_of(name) == pool
    if pool is not None:
        assert names.relay_name(pool) == name


# --------------------------------------------------------------------------- what the router reads


def test_frontend_service_name_and_its_inverse() -> None:
    assert names.frontend_service_name("llama") == "llama-frontend"
    assert names.pool_of_frontend("llama-frontend") == "llama"
    assert names.pool_of_frontend("llama-frontend-x") is None
    assert names.pool_of_frontend("-frontend") is None


def test_karmada_derived_service() -> None:
    assert names.karmada_derived_service("derived-llama-pool-relay") == "llama-pool-relay"
    assert names.karmada_derived_service("llama-pool-relay") is None
    assert names.karmada_derived_service("derived-") is None


def test_karmada_member_of_an_execution_space() -> None:
    assert names.karmada_member("karmada-es-member1") == "member1"
    assert names.karmada_member("default") is None
    assert names.karmada_member("karmada-es-") is None
