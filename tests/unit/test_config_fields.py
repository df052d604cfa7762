"""The rules under OperatorConfiguration, one by one: field declarations, value rules and
the exact words of every problem (config_fields.py), rules between fields and file
handling (config.py).

test_config.py drives the whole loader with documents; this file pins what a platform
team reads when a value is refused ("what is wrong; what to change"), the boundaries of
each rule, and the helpers the schema is declared with. Declarations are made inside the
tests (not at import), so each helper is exercised when the test runs.
"""

from __future__ import annotations

import dataclasses
import datetime
import pickle
import re
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamo_pool_operator.config import (
    API_VERSION,
    KIND,
    ConfigurationError,
    FieldError,
    _row,
    _StrictLoader,
    load_configuration,
    parse_configuration,
)
from dynamo_pool_operator.config_fields import (
    FieldSpec,
    boolean,
    choice,
    decode_section,
    describe,
    duration,
    format_duration,
    image_reference,
    integer,
    listen_address,
    namespace_name,
    object_name,
    parse_duration,
    parse_duration_ns,
    positive_duration,
    quote,
    spec_of,
    split_address,
    string,
    suggest,
)

LISTEN_HINT = 'use ":8080", "127.0.0.1:8080", "[::1]:8080" or "0" to disable'
BRACKETS = "an IPv6 host must be written in brackets, e.g. [::1]:8080"
MAX_NS = 2**63 - 1


def field_of(declared: object) -> dataclasses.Field[Any]:
    """The helpers are typed as their value for mypy; at runtime they are dataclass fields."""
    assert isinstance(declared, dataclasses.Field)
    return declared


def section(**fields: object) -> type[Any]:
    """A section class declared now, from helper calls made in the test."""
    return dataclasses.make_dataclass(
        "Section", [(name, Any, f) for name, f in fields.items()], frozen=True
    )


def document(**sections: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, **sections}


def problems(data: object, source: str = "test.yaml") -> list[tuple[str, str]]:
    with pytest.raises(ConfigurationError) as info:
        parse_configuration(data, source)
    return [(e.path, e.message) for e in info.value.errors]


def load_problems(path: Path) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as info:
        load_configuration(path)
    return info.value


# --------------------------------------------------------------------------- declarations
def test_string_declaration_carries_default_doc_choices_rule_and_wording() -> None:
    f = field_of(string("a", "Doc.", choices=("a", "b"), check=namespace_name, allowed="x"))
    assert f.default == "a"
    assert spec_of(f) == FieldSpec("string", "Doc.", ("a", "b"), namespace_name, "x")


def test_string_declaration_without_options_has_no_choices_rule_or_wording() -> None:
    f = field_of(string("", "Doc."))
    assert f.default == ""
    assert spec_of(f) == FieldSpec("string", "Doc.", (), None, "")


@pytest.mark.parametrize("default", [True, False])
def test_boolean_declaration_carries_default_and_doc(default: bool) -> None:
    f = field_of(boolean(default, "Flag doc."))
    assert f.default is default
    assert spec_of(f) == FieldSpec("boolean", "Flag doc.")


def test_integer_declaration_carries_default_doc_and_range_wording() -> None:
    f = field_of(integer(5, "Count doc.", minimum=1, maximum=10))
    spec = spec_of(f)
    assert f.default == 5
    assert (spec.kind, spec.doc, spec.choices, spec.allowed) == (
        "integer",
        "Count doc.",
        (),
        "1..10",
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (1, None),
        (10, None),
        (0, "0 is out of range; use a whole number from 1 to 10"),
        (11, "11 is out of range; use a whole number from 1 to 10"),
    ],
)
def test_integer_range_is_inclusive_at_both_ends(value: int, problem: str | None) -> None:
    check = spec_of(field_of(integer(5, "d", minimum=1, maximum=10))).check
    assert check is not None
    assert check(value) == problem


def test_integer_field_is_decoded_and_range_checked_at_its_path() -> None:
    cls = section(count=integer(5, "d", minimum=1, maximum=10))
    errors: list[FieldError] = []
    bad: set[str] = set()
    assert decode_section({"count": 10}, "s", cls, errors, bad) == cls(count=10)
    assert decode_section({"count": 11}, "s", cls, errors, bad) == cls(count=5)
    assert errors == [FieldError("s.count", "11 is out of range; use a whole number from 1 to 10")]
    assert bad == {"s.count"}


class Colour(StrEnum):
    RED = "red"
    GREEN = "green"


def test_choice_declaration_carries_its_enum_default_doc_and_values() -> None:
    f = field_of(choice(Colour.GREEN, "Which one."))
    assert f.default is Colour.GREEN
    assert spec_of(f) == FieldSpec("string", "Which one.", ("red", "green"), enum=Colour)


def test_a_choice_field_decodes_to_the_enum_member_and_refuses_other_values() -> None:
    cls = section(colour=choice(Colour.GREEN, "d"))
    errors: list[FieldError] = []
    bad: set[str] = set()
    got = decode_section({"colour": "red"}, "s", cls, errors, bad)
    assert got == cls(colour=Colour.RED)
    assert got.colour is Colour.RED
    assert decode_section({}, "s", cls, errors, bad).colour is Colour.GREEN
    assert decode_section({"colour": "blue"}, "s", cls, errors, bad) == cls(colour=Colour.GREEN)
    assert errors == [FieldError("s.colour", '"blue" is not supported; use one of "red", "green"')]
    assert bad == {"s.colour"}


def test_duration_declaration_parses_its_default_and_must_be_positive() -> None:
    f = field_of(duration("1.5s", "Wait doc."))
    spec = spec_of(f)
    assert f.default == 1.5
    assert (spec.kind, spec.doc, spec.allowed) == ("duration", "Wait doc.", "> 0")
    assert spec.check is positive_duration


def test_duration_declaration_uses_its_own_rule_and_wording_when_given() -> None:
    def at_most_a_minute(seconds: float) -> str | None:
        return None if seconds <= 60 else "too long; use at most 1m"

    spec = spec_of(field_of(duration("2s", "d", check=at_most_a_minute, allowed="<= 1m")))
    assert spec.check is at_most_a_minute
    assert spec.allowed == "<= 1m"


def test_field_declared_without_a_helper_is_refused_by_name() -> None:
    (f,) = dataclasses.fields(section(plain=dataclasses.field(default=1)))
    with pytest.raises(
        TypeError, match=r"^configuration field 'plain' was declared without a FieldSpec$"
    ):
        spec_of(f)


# --------------------------------------------------------------------------- value rules
NOT_A_NAMESPACE = (
    '"{}" is not a valid namespace name; use at most 63 lower-case letters, '
    "digits or '-', starting and ending with a letter or digit"
)
NOT_AN_OBJECT_NAME = (
    '"{}" is not a valid object name; use at most 253 lower-case letters, digits, '
    "'-' or '.', starting and ending with a letter or digit"
)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("", None),
        ("a" * 63, None),
        ("a" * 64, NOT_A_NAMESPACE.format("a" * 64)),
        ("Team_A", NOT_A_NAMESPACE.format("Team_A")),
    ],
)
def test_namespace_name_rule_and_message(value: str, problem: str | None) -> None:
    assert namespace_name(value) == problem


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("a", None),
        ("a" * 253, None),
        ("my.lease-1", None),
        ("", NOT_AN_OBJECT_NAME.format("")),
        ("Lease", NOT_AN_OBJECT_NAME.format("Lease")),
    ],
)
def test_object_name_rule_and_message(value: str, problem: str | None) -> None:
    assert object_name(value) == problem


def test_object_name_may_not_exceed_253_characters() -> None:
    assert object_name("a" * 254) is not None


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("relay:1", None),
        ("", "must not be empty; set the relay's container image, e.g. registry/repo:tag"),
        ("relay image:1", '"relay image:1" contains whitespace; an image reference has none'),
    ],
)
def test_image_reference_rule_and_message(value: str, problem: str | None) -> None:
    assert image_reference(value) == problem


@pytest.mark.parametrize(
    ("seconds", "problem"),
    [
        (1e-9, None),
        (0.0, 'must be greater than 0, got "0s"; use e.g. "10s"'),
        (-1.0, 'must be greater than 0, got "-1s"; use e.g. "10s"'),
    ],
)
def test_positive_duration_rule_and_message(seconds: float, problem: str | None) -> None:
    assert positive_duration(seconds) == problem


# --------------------------------------------------------------------------- addresses
@pytest.mark.parametrize(
    ("value", "parts"),
    [
        (":8080", ("", 8080)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("localhost:65535", ("localhost", 65535)),
        ("[::1]:8080", ("::1", 8080)),
        ("[::]:80", ("::", 80)),
        ("[1::]:80", ("1::", 80)),
        ("[2001:db8::1]:9090", ("2001:db8::1", 9090)),
    ],
)
def test_address_splits_into_host_without_brackets_and_port(
    value: str, parts: tuple[str, int]
) -> None:
    assert split_address(value) == parts


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("8080", "missing ':port'"),
        (":65536", 'port "65536" is not a number from 0 to 65535'),
        (":http", 'port "http" is not a number from 0 to 65535'),
        ("::1:80", BRACKETS),
        ("[::1:80", BRACKETS),
        ("[127.0.0.1:80", BRACKETS),
        ("localhost]:80", BRACKETS),
        ("my host:80", '"my host" is not a host name or IP address'),
    ],
)
def test_address_problem_names_what_is_wrong(value: str, problem: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(problem)}$"):
        split_address(value)


@pytest.mark.parametrize("value", ["[::1x]:80", "[127.0.0.1]:80", "[]:80"])
def test_bracketed_host_must_be_an_ipv6_address(value: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the message is ipaddress's
        split_address(value)


def test_listen_address_message_quotes_the_value_and_shows_examples() -> None:
    assert listen_address("0") is None
    assert listen_address("[::1]:8080") is None
    assert listen_address("8080") == (
        f"\"8080\" is not a listen address (missing ':port'); {LISTEN_HINT}"
    )
    assert listen_address("[127.0.0.1:80") == (
        f'"[127.0.0.1:80" is not a listen address ({BRACKETS}); {LISTEN_HINT}'
    )


# --------------------------------------------------------------------------- durations
@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("1.0000000019s", 1_000_000_001),  # digits beyond a nanosecond are dropped
        ("0.1ns", 0),
        ("0" * 40 + "1s", 1_000_000_000),  # leading zeros do not count as digits
        ("9223372036854775807ns", MAX_NS),
        ("2562047h47m16.854775807s", MAX_NS),  # Go's largest duration
        ("-9223372036854775807ns", -MAX_NS),
        ("1h1m1s1ms1us1ns", 3_661_001_001_001),
    ],
)
def test_duration_is_integer_nanoseconds_like_go(text: str, ns: int) -> None:
    value = parse_duration_ns(text)
    assert value == ns
    assert type(value) is int


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", 'invalid duration ""'),
        ("-", 'invalid duration "-"'),
        ("abc", 'invalid duration "abc"'),
        ("X5s", 'invalid duration "X5s"'),
        ("*5s", 'invalid duration "*5s"'),
        ("1x", 'unknown unit "x" in duration "1x"'),
        ("1" * 31 + "s", f'duration "{"1" * 31}s" is out of range'),
        ("9223372036854775808ns", 'duration "9223372036854775808ns" is out of range'),
        ("2562047h47m16.854775808s", 'duration "2562047h47m16.854775808s" is out of range'),
    ],
)
def test_invalid_duration_message_quotes_the_text(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match="duration") as info:
        parse_duration_ns(text)
    assert str(info.value) == problem


def test_non_string_duration_names_its_type() -> None:
    with pytest.raises(ValueError, match=r"^duration must be a string, not int$"):
        parse_duration_ns(15)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (1, "1s"),
        (59, "59s"),
        (0.5, "500ms"),
        (0.999, "999ms"),
        (1e-6, "1us"),
        (3e-9, "3ns"),
        (0.001, "1ms"),
        (0.0015, "1.5ms"),
        (0.000999999, "999.999us"),
        (0.0002505, "250.5us"),
        (1.5e-6, "1.5us"),
        (0.100000001, "100.000001ms"),
        (1.5, "1.5s"),
        (90, "1m30s"),
        (3600, "1h"),
        (3600.25, "1h0.25s"),
        (-1.5, "-1.5s"),
        (-0.5, "-500ms"),
    ],
)
def test_duration_is_written_in_its_shortest_unit(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


# --------------------------------------------------------------------------- values in messages
@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("mcs", '"mcs"'),
        ("café", '"café"'),  # as written, not \u-escaped
        (None, "null"),
        (True, "true"),
        (4, "4"),
        (80.5, "80.5"),
        (2**128 - 1, str(2**128 - 1)),
        (2**128, "(a very large number)"),
        ("a" * 80, f'"{"a" * 80}"'),  # up to 80 characters: shown whole
        ("a" * 81, f'"{"a" * 80}..." (81 characters)'),  # longer: cut, and the length said
        ("é" * 100, f'"{"é" * 80}..." (100 characters)'),
        (-(2**128), "(a very large number)"),
    ],
)
def test_values_are_quoted_as_yaml_writes_them(value: object, shown: str) -> None:
    assert quote(value) == shown


@pytest.mark.parametrize(
    ("value", "described"),
    [
        ("a" * 38, f'string "{"a" * 38}"'),  # 40 characters quoted: shown whole
        ("a" * 39, f'string "{"a" * 36}...'),  # longer: cut to 37 characters and "..."
        (True, "boolean true"),
        (7, "integer 7"),
        (0.5, "number 0.5"),
        (None, "null"),
        ({"a": 1}, "a mapping"),
        ([1], "a list"),
        (datetime.date(2024, 1, 1), "date"),
    ],
)
def test_values_are_described_by_yaml_type_and_short_value(value: object, described: str) -> None:
    assert describe(value) == described


# --------------------------------------------------------------------------- unknown fields
@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("LEVEL", "level"),
        ("L_E_V_E_L", "level"),  # separators are ignored, not just tolerated by the fuzzy match
        ("L-E-V-E-L", "level"),
        ("formatt", "format"),
        ("fmt", None),  # too far from any name to guess
        ("colour", None),
    ],
)
def test_suggestion_ignores_case_and_separators_and_does_not_guess_wildly(
    key: str, meant: str | None
) -> None:
    assert suggest(key, ["level", "format"]) == meant


def test_far_fetched_field_name_gets_the_list_of_fields() -> None:
    assert problems(document(logging={"fmt": "json"})) == [
        ("logging.fmt", "unknown field; the fields here are level, format")
    ]


# --------------------------------------------------------------------------- problems as text
def test_problem_without_a_path_is_shown_without_a_prefix() -> None:
    assert str(FieldError("", "cannot read")) == "cannot read"
    assert str(FieldError("a.b", "bad")) == "a.b: bad"


def test_configuration_error_source_defaults_to_config() -> None:
    err = ConfigurationError([FieldError("", "m; fix it")])
    assert err.source == "<config>"
    assert str(err) == "invalid configuration in <config>: 1 problem\n  - m; fix it"


def test_configuration_error_carries_its_problems_and_source_as_args() -> None:
    # What repr() shows and what pickling rebuilds the exception from.
    found = [FieldError("a.b", "bad; fix it")]
    err = ConfigurationError(found, "cfg.yaml")
    assert err.args == (found, "cfg.yaml")
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.errors, copy.source, str(copy)) == (found, "cfg.yaml", str(err))


def test_document_that_is_not_a_mapping_is_one_problem_without_a_path() -> None:
    assert problems(["x"]) == [
        (
            "",
            f"the document is a list; write a mapping with apiVersion: {API_VERSION} and "
            f"kind: {KIND}",
        )
    ]
    with pytest.raises(ConfigurationError) as info:
        parse_configuration("text", "mine.yaml")
    assert info.value.source == "mine.yaml"


QUOTE_IT = "quote the value if it is meant as text"


@pytest.mark.parametrize(
    ("value", "got"),
    [({"a": 1}, "a mapping"), (datetime.date(2024, 1, 1), "date")],
)
def test_wrong_yaml_type_is_named(value: object, got: str) -> None:
    assert problems(document(logging={"level": value})) == [
        ("logging.level", f"must be a string, got {got}; {QUOTE_IT}")
    ]


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (document(logging={"": 1}), 'logging.""'),
        ({**document(), "": 1}, '""'),
    ],
)
def test_empty_field_name_is_named_as_an_empty_string(data: dict[str, Any], path: str) -> None:
    ((where, message),) = problems(data)
    assert where == path
    assert message.startswith("unknown field; the fields here are ")


def test_null_field_name_is_named_null() -> None:
    assert problems(document(logging={None: 1})) == [
        ("logging.None", "field names must be strings, got null; quote the name")
    ]


def test_wrong_choice_lists_the_allowed_values() -> None:
    assert problems(document(multiCluster={"mcsImplementation": "istio"})) == [
        (
            "multiCluster.mcsImplementation",
            '"istio" is not supported; use one of "", "mcs", "karmada"',
        )
    ]


# --------------------------------------------------------------------------- rules between fields
def test_lease_duration_must_be_whole_seconds() -> None:
    message = '"15.5s" is not whole seconds; use e.g. "15s" (at least 1s)'
    assert problems(document(leaderElection={"leaseDuration": "15.5s"})) == [
        ("leaderElection.leaseDuration", message)
    ]


def test_invalid_retry_period_does_not_cause_a_follow_on_renew_deadline_error() -> None:
    # The invalid retryPeriod is left at its 2s default, which a 2s renewDeadline would fail.
    data = document(leaderElection={"renewDeadline": "2s", "retryPeriod": "soon"})
    assert [path for path, _ in problems(data)] == ["leaderElection.retryPeriod"]


@pytest.mark.parametrize(
    ("sections", "path", "message"),
    [
        pytest.param(
            {"leaderElection": {"leaseDuration": "10s", "renewDeadline": "12s"}},
            "leaderElection.leaseDuration",
            '"10s" is not longer than renewDeadline ("12s"); lengthen it or shorten '
            "renewDeadline, so a leader stops writing before another replica may take over",
            id="lease-not-longer-than-renew-deadline",
        ),
        pytest.param(
            {"leaderElection": {"renewDeadline": "3s", "retryPeriod": "2.5s"}},
            "leaderElection.renewDeadline",
            '"3s" is not longer than 1.2 x retryPeriod ("3s"); lengthen it or shorten '
            "retryPeriod, so a failed renewal can be retried before the deadline",
            id="renew-deadline-not-longer-than-jittered-retry-period",
        ),
        pytest.param(
            {"namespace": {"restricted": "team-a"}, "leaderElection": {"namespace": "ops"}},
            "leaderElection.namespace",
            '"ops" is outside the restricted namespace "team-a"; leave it empty or set '
            '"team-a", the only namespace the operator may write in',
            id="lease-namespace-outside-the-restricted-namespace",
        ),
        pytest.param(
            {"server": {"metricsAddress": "127.0.0.1:9000", "healthProbeAddress": ":9000"}},
            "server.healthProbeAddress",
            '":9000" uses the same port as metricsAddress ("127.0.0.1:9000"); choose another port',
            id="shared-port-names-both-addresses",
        ),
    ],
)
def test_a_rule_between_fields_names_the_field_and_both_values(
    sections: dict[str, Any], path: str, message: str
) -> None:
    assert problems(document(**sections)) == [(path, message)]


@pytest.mark.parametrize(
    ("metrics", "probes", "clash"),
    [
        (":8080", ":8080", True),
        ("127.0.0.1:9000", "127.0.0.1:9000", True),
        ("127.0.0.1:9000", ":9000", True),
        ("0.0.0.0:9000", "127.0.0.1:9000", True),
        ("127.0.0.1:9000", "0.0.0.0:9000", True),
        ("[::]:9000", "127.0.0.1:9000", True),
        ("127.0.0.1:9000", "[::]:9000", True),
        (":8080", ":8081", False),
        ("127.0.0.1:9000", "127.0.0.2:9000", False),
        ("localhost:9000", "127.0.0.1:9000", False),
        ("0.0.0.0:0", "0.0.0.0:0", False),  # port 0: each listener gets its own free port
        (":0", ":0", False),
        ("0", ":8080", False),  # metrics off
    ],
)
def test_addresses_clash_on_the_same_port_of_the_same_or_any_interface(
    metrics: str, probes: str, clash: bool
) -> None:
    data = document(server={"metricsAddress": metrics, "healthProbeAddress": probes})
    if clash:
        assert [path for path, _ in problems(data)] == ["server.healthProbeAddress"]
    else:
        assert parse_configuration(data).server.health_probe_address == probes


@pytest.mark.parametrize(
    ("server", "path"),
    [
        ({"metricsAddress": "8080", "healthProbeAddress": ":8080"}, "server.metricsAddress"),
        ({"metricsAddress": ":8081", "healthProbeAddress": "8081"}, "server.healthProbeAddress"),
    ],
)
def test_invalid_address_does_not_cause_a_follow_on_port_clash(
    server: dict[str, str], path: str
) -> None:
    # The invalid address is left at its default, which the other address would clash with.
    assert [p for p, _ in problems(document(server=server))] == [path]


# --------------------------------------------------------------------------- files
def test_problems_in_a_file_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "operator.yaml"
    path.write_text(f"apiVersion: {API_VERSION}\nkind: {KIND}\npoolRelay:\n  port: 0\n")
    err = load_problems(path)
    assert err.source == str(path)
    assert str(err).startswith(f"invalid configuration in {path}: 1 problem\n")


def test_unreadable_file_is_one_problem_without_a_path_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.yaml"
    err = load_problems(path)
    assert err.source == str(path)
    (problem,) = err.errors
    assert problem.path == ""
    assert problem.message.startswith("cannot read the file (")
    assert problem.message.endswith("); check the --config path")


def test_file_is_read_as_utf8(tmp_path: Path) -> None:
    path = tmp_path / "operator.yaml"
    path.write_bytes(
        f"apiVersion: {API_VERSION}\nkind: {KIND}\npoolRelay:\n  image: relay:é\n".encode()
    )
    assert load_configuration(path).pool_relay.image == "relay:é"


def test_file_that_is_not_utf8_cannot_be_read(tmp_path: Path) -> None:
    path = tmp_path / "operator.yaml"
    path.write_bytes(b"apiVersion: \xff\n")
    assert load_problems(path).errors[0].message.startswith("cannot read the file (")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(
            "a: b\n  c: d\n",
            "line 2, column 4: mapping values are not allowed here; fix the YAML syntax",
            id="problem-mark",
        ),
        pytest.param(
            "a: [1, 2\nb: 3\n",
            "line 2, column 2: expected ',' or ']', but got ':'; fix the YAML syntax",
            id="problem-mark-not-context-mark",
        ),
        pytest.param(
            f"apiVersion: {API_VERSION}\nkind: {KIND}\nkind: {KIND}\n",
            'line 3, column 1: found duplicate key "kind"; fix the YAML syntax',
            id="duplicate-at-the-second-key",
        ),
        pytest.param(
            "a: 1\nlogging:\n  level: debug\n  format: json\n  level: info\n",
            'line 5, column 3: found duplicate key "level"; fix the YAML syntax',
            id="nested-duplicate",
        ),
        pytest.param(
            "x: !!set [a]\n",
            "line 1, column 4: expected a mapping, but found a sequence; fix the YAML syntax",
            id="set-of-a-list",
        ),
        pytest.param(
            "a: 1\nx: !!map [a]\n",
            "line 2, column 4: expected a mapping, but found a sequence; fix the YAML syntax",
            id="map-of-a-list",
        ),
        pytest.param(
            "x: !!bool maybe\n",
            "cannot parse the file: a value with an explicit YAML tag (like !!bool or !!int) "
            "is not of that type (KeyError: 'maybe'); remove the tag or fix the value",
            id="tag-that-cannot-be-built",
        ),
        pytest.param(
            "x: !!int abc\n",
            "cannot parse the file (invalid literal for int() with base 10: 'abc'); fix its syntax",
            id="value-error",
        ),
    ],
)
def test_syntax_problem_is_one_problem_without_a_path_at_its_line_and_column(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "operator.yaml"
    path.write_text(text)
    err = load_problems(path)
    assert err.source == str(path)
    assert err.errors == [FieldError("", problem)]


def test_yaml_merge_key_is_not_a_duplicate_and_later_duplicates_are_found(
    tmp_path: Path,
) -> None:
    path = tmp_path / "operator.yaml"
    head = f"apiVersion: {API_VERSION}\nkind: {KIND}\nlogging: &empty {{}}\n"
    path.write_text(head + "server:\n  <<: *empty\n  metricsAddress: ':9000'\n")
    assert load_configuration(path).server.metrics_address == ":9000"
    path.write_text(
        head + "server:\n  <<: *empty\n  metricsAddress: ':9000'\n  metricsAddress: ':9001'\n"
    )
    message = 'line 7, column 3: found duplicate key "metricsAddress"; fix the YAML syntax'
    assert load_problems(path).errors == [FieldError("", message)]


def test_duplicate_key_is_found_after_a_complex_key(tmp_path: Path) -> None:
    path = tmp_path / "operator.yaml"
    path.write_text("? [a]\n: 1\nb: 1\nb: 2\n")
    (problem,) = load_problems(path).errors
    assert problem.message == 'line 4, column 1: found duplicate key "b"; fix the YAML syntax'


def test_recursive_alias_is_read_like_safe_load_and_its_type_reported(tmp_path: Path) -> None:
    path = tmp_path / "operator.yaml"
    path.write_text(
        f"apiVersion: {API_VERSION}\nkind: {KIND}\nlogging: &l {{level: debug, format: *l}}\n"
    )
    assert load_problems(path).errors == [
        FieldError(
            "logging.format",
            "must be a string, got a mapping; quote the value if it is meant as text",
        )
    ]


def _outcome(text: str, loader: type[yaml.SafeLoader]) -> tuple[str, str]:
    try:
        return "read", repr(yaml.load(text, Loader=loader))  # both are SafeLoaders
    except yaml.YAMLError as exc:
        return "refused", str(exc)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a: &x {b: 1}\nc: {<<: *x, d: 2}\n", id="merge"),
        pytest.param("a: &x {b: 1}\nc: {<<: [*x, {e: 3}], b: 2}\n", id="merge-list-overridden"),
        pytest.param("a: &l [1, *l]\n", id="recursive-value"),
        pytest.param("s: !!set {a, b}\n", id="set"),
        pytest.param("o: !!omap [{a: 1}, {b: 2}]\n", id="ordered-map"),
        pytest.param("1: a\n'1': b\n", id="int-and-string-keys"),
        pytest.param("? [a]\n: 1\n", id="list-key"),
        pytest.param("? &k [a, *k]\n: 1\n", id="recursive-list-key"),
        pytest.param("a: [1\n", id="syntax-error"),
    ],
)
def test_strict_loader_reads_and_refuses_like_safe_load_when_no_key_repeats(text: str) -> None:
    assert _outcome(text, _StrictLoader) == _outcome(text, yaml.SafeLoader)


# --------------------------------------------------------------------------- reference table
def test_reference_table_cell_keeps_a_row_on_one_line() -> None:
    assert _row("a|b", "c\nd", "e") == "| a\\|b | c d | e |"
