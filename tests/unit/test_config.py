"""OperatorConfiguration: defaults, strict decoding, validation that reports every problem.

Each test names the rule it holds the loader to. Cases are data-driven from the file's
own field paths, and `test_every_field_has_an_invalid_case` fails when a field is added
without a test that it rejects bad values.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dynamo_pool_operator.config import (
    API_VERSION,
    KIND,
    ConfigurationError,
    FieldError,
    OperatorConfiguration,
    configuration_reference,
    load_configuration,
    parse_configuration,
    parse_duration,
    to_document,
)
from dynamo_pool_operator.config_fields import format_duration

ALL_PATHS = [
    f"{section}.{name}"
    for section, fields in to_document(OperatorConfiguration()).items()
    if isinstance(fields, dict)
    for name in fields
]


def document(**sections: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, **sections}


def with_field(path: str, value: Any, **more: Any) -> dict[str, Any]:
    """A valid document with `path` (and `more`, as path=value with '.' -> '__') set."""
    data = document()
    for p, v in [(path, value), *((k.replace("__", "."), v) for k, v in more.items())]:
        section, name = p.split(".")
        data.setdefault(section, {})[name] = v
    return data


def rejected(data: object) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as info:
        parse_configuration(data, "test.yaml")
    return info.value


def paths(err: ConfigurationError) -> list[str]:
    return [e.path for e in err.errors]


def attr(cfg: OperatorConfiguration, path: str) -> Any:
    obj: Any = cfg
    for part in path.split("."):
        obj = getattr(obj, re.sub("([A-Z])", r"_\1", part).lower())
    return obj


# --------------------------------------------------------------------------- defaults
def test_no_config_file_means_all_defaults() -> None:
    cfg = load_configuration(None)
    assert cfg == OperatorConfiguration()
    assert cfg.multi_cluster.mcs_implementation == ""
    assert cfg.discovery.backend == "kubernetes"
    assert cfg.namespace.restricted == ""
    le = cfg.leader_election
    assert (le.enabled, le.namespace, le.name) == (True, "", "dynamo-pool-operator-leader")
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (15.0, 10.0, 2.0)
    assert (cfg.server.metrics_address, cfg.server.health_probe_address) == (":8080", ":8081")
    relay = cfg.pool_relay
    assert relay.image == "nvcr.io/nvidia/ai-dynamo/pool-relay:0.1.0"
    assert (relay.image_pull_policy, relay.port, relay.replicas) == ("IfNotPresent", 8090, 2)
    assert (cfg.controller.workers, cfg.controller.cache_sync_timeout) == (4, 120.0)
    assert (cfg.logging.level, cfg.logging.format) == ("info", "auto")


def test_header_only_document_means_all_defaults() -> None:
    assert parse_configuration(document()) == OperatorConfiguration()


def test_null_section_or_field_means_default() -> None:
    data = document(multiCluster=None, leaderElection={"leaseDuration": None})
    assert parse_configuration(data) == OperatorConfiguration()


def test_configuration_is_immutable() -> None:
    cfg = OperatorConfiguration()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.logging.level = "debug"  # type: ignore[misc]


# --------------------------------------------------------------------------- each field
VALID = [
    ("multiCluster.mcsImplementation", "mcs", "mcs"),
    ("multiCluster.mcsImplementation", "karmada", "karmada"),
    ("multiCluster.mcsImplementation", "", ""),
    ("multiCluster.confirmation", "ready", "ready"),
    ("multiCluster.confirmation", "valid", "valid"),
    # The old name of `ready`, still accepted: read as `ready`.
    ("multiCluster.confirmation", "required", "ready"),
    ("multiCluster.confirmation", "none", "none"),
    ("multiCluster.confirmation", "", ""),
    ("multiCluster.unconfirmedAfter", "0s", 0.0),
    ("multiCluster.unconfirmedAfter", "2m", 120.0),
    ("multiCluster.apiDiscoveryInterval", "200ms", 0.2),
    (
        "multiCluster.exportedAnnotations",
        {"service.cilium.io/global-sync-endpoint-slices": "true", "note": "any text: ok"},
        (("note", "any text: ok"), ("service.cilium.io/global-sync-endpoint-slices", "true")),
    ),
    ("multiCluster.exportedLabels", {"team": "inference"}, (("team", "inference"),)),
    ("discovery.backend", "etcd", "etcd"),
    ("discovery.backend", "kubernetes", "kubernetes"),
    ("namespace.restricted", "team-a", "team-a"),
    ("leaderElection.enabled", False, False),
    ("poolRelay.headless", False, False),
    ("leaderElection.namespace", "ops", "ops"),
    ("leaderElection.name", "my.lease-1", "my.lease-1"),
    ("leaderElection.leaseDuration", "1m", 60.0),
    ("leaderElection.renewDeadline", "5s", 5.0),
    ("leaderElection.retryPeriod", "500ms", 0.5),
    ("server.metricsAddress", "0", "0"),
    ("server.metricsAddress", "127.0.0.1:9090", "127.0.0.1:9090"),
    ("server.metricsAddress", "[::1]:9090", "[::1]:9090"),
    ("server.metricsAddress", ":0", ":0"),
    ("server.healthProbeAddress", "localhost:9091", "localhost:9091"),
    ("server.healthProbeAddress", "0", "0"),
    ("server.metricsSecure", True, True),
    ("server.metricsSecure", False, False),
    ("server.perRelayMetrics", False, False),
    ("server.metricsCertDir", "", ""),
    ("poolRelay.image", "registry.example/relay@sha256:ab12", "registry.example/relay@sha256:ab12"),
    ("poolRelay.imagePullPolicy", "Always", "Always"),
    ("poolRelay.imagePullPolicy", "Never", "Never"),
    ("poolRelay.port", 1, 1),
    ("poolRelay.port", 65535, 65535),
    ("poolRelay.replicas", 0, 0),
    ("controller.workers", 1, 1),
    ("controller.workers", 64, 64),
    ("controller.backgroundWrites", 0, 0),
    ("controller.backgroundWrites", 64, 64),
    ("controller.fairQueuing", False, False),
    ("controller.changesFirstHold", "0s", 0.0),
    ("controller.changesFirstHold", "100ms", 0.1),
    ("controller.cacheSyncTimeout", "30s", 30.0),
    ("clientConnection.qps", 0, 0),
    ("clientConnection.qps", 50, 50),
    ("clientConnection.qps", 100_000, 100_000),
    ("clientConnection.burst", 1, 1),
    ("clientConnection.burst", 100_000, 100_000),
    ("logging.level", "debug", "debug"),
    ("logging.level", "warning", "warning"),
    ("logging.level", "error", "error"),
    ("logging.format", "json", "json"),
    ("logging.format", "console", "console"),
    # The old name of `console`, still accepted: read as `console`.
    ("logging.format", "text", "console"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "value", "expected"), VALID)
def test_valid_field_value_is_accepted(path: str, value: Any, expected: Any) -> None:
    assert attr(parse_configuration(with_field(path, value)), path) == expected


INVALID = [
    ("multiCluster.mcsImplementation", "istio", 'use one of "", "mcs", "karmada"'),
    ("multiCluster.mcsImplementation", "MCS", "is not supported"),
    (
        "multiCluster.confirmation",
        "optional",
        'use one of "", "ready", "valid", "none", "required"',
    ),
    ("multiCluster.unconfirmedAfter", "-1s", "must not be negative"),
    ("multiCluster.unconfirmedAfter", "soon", "invalid duration"),
    ("controller.changesFirstHold", "-1ms", "must not be negative"),
    ("controller.changesFirstHold", 1, "duration"),
    ("multiCluster.apiDiscoveryInterval", "0s", "must be greater than 0"),
    ("multiCluster.exportedAnnotations", {"bad key!": "x"}, 'key "bad key!": name part'),
    ("multiCluster.exportedAnnotations", {"a": 1}, "must be a map of strings"),
    ("multiCluster.exportedLabels", {"team": "not a label"}, "use a valid label value"),
    ("multiCluster.exportedLabels", "team=x", "must be a map of strings"),
    ("multiCluster.mcsImplementation", 1, "must be a string, got integer 1"),
    ("discovery.backend", "consul", 'use one of "kubernetes", "etcd"'),
    ("namespace.restricted", "Team_A", "not a valid namespace name"),
    ("namespace.restricted", "a" * 64, "not a valid namespace name"),
    ("leaderElection.enabled", "yes", "must be a boolean"),
    ("leaderElection.enabled", 1, "must be a boolean, got integer 1"),
    ("poolRelay.headless", "false", "must be a boolean"),
    ("leaderElection.namespace", "-ops", "not a valid namespace name"),
    ("leaderElection.name", "", "not a valid object name"),
    ("leaderElection.name", "Lease", "not a valid object name"),
    ("leaderElection.name", "a" * 254, "not a valid object name"),
    ("leaderElection.leaseDuration", "15", "invalid duration"),
    ("leaderElection.leaseDuration", "15.5s", "not whole seconds"),
    ("leaderElection.leaseDuration", 15, 'got integer 15; write a Go duration such as "15s"'),
    ("leaderElection.renewDeadline", "0s", "must be greater than 0"),
    ("leaderElection.renewDeadline", "-1s", "must be greater than 0"),
    ("leaderElection.retryPeriod", "0s", "must be greater than 0"),
    ("leaderElection.retryPeriod", "soon", "invalid duration"),
    ("server.metricsAddress", "8080", "missing ':port'"),
    ("server.metricsAddress", ":65536", "not a number from 0 to 65535"),
    ("server.metricsAddress", "::1:80", "in brackets"),
    ("server.metricsAddress", "", "not a listen address"),
    ("server.metricsAddress", "my host:80", "not a host name or IP address"),
    ("server.healthProbeAddress", ":-1", "not a listen address"),
    ("server.healthProbeAddress", "localhost", "missing ':port'"),
    ("server.healthProbeAddress", 8081, "must be a string"),
    ("server.metricsSecure", "true", "must be a boolean"),
    ("server.perRelayMetrics", "no", "must be a boolean"),
    ("controller.fairQueuing", "off", "must be a boolean"),
    ("server.metricsCertDir", "certs/metrics", "not an absolute path"),
    ("server.metricsCertDir", 1, "must be a string"),
    ("poolRelay.image", "", "must not be empty"),
    ("poolRelay.image", "relay image:1", "contains whitespace"),
    ("poolRelay.imagePullPolicy", "always", '"Always", "IfNotPresent", "Never"'),
    ("poolRelay.port", 0, "from 1 to 65535"),
    ("poolRelay.port", 65536, "from 1 to 65535"),
    ("poolRelay.port", "8090", 'must be an integer, got string "8090"'),
    ("poolRelay.port", 80.5, "must be an integer, got number 80.5"),
    ("poolRelay.replicas", -1, "out of range"),
    ("poolRelay.replicas", 101, "out of range"),  # the CRD's spec.replicas bound
    ("controller.workers", 0, "from 1 to 64"),
    ("controller.workers", 65, "from 1 to 64"),
    ("controller.backgroundWrites", -1, "from 0 to 64"),
    ("controller.backgroundWrites", 65, "from 0 to 64"),
    ("controller.workers", True, "must be an integer, got boolean true"),
    ("controller.cacheSyncTimeout", "0s", "must be greater than 0"),
    ("clientConnection.qps", -1, "from 0 to 100000"),
    ("clientConnection.qps", 100_001, "from 0 to 100000"),
    ("clientConnection.qps", 2.5, "must be an integer, got number 2.5"),
    ("clientConnection.burst", 0, "from 1 to 100000"),
    ("clientConnection.burst", 100_001, "from 1 to 100000"),
    ("clientConnection.burst", "10", 'must be an integer, got string "10"'),
    ("controller.cacheSyncTimeout", "forever", "invalid duration"),
    ("logging.level", "trace", '"debug", "info", "warning", "error"'),
    ("logging.level", "INFO", "is not supported"),
    ("logging.format", "yaml", '"auto", "json", "console", "text"'),
    ("logging.format", ["json"], "must be a string, got a list"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "value", "message"), INVALID)
def test_invalid_field_value_is_reported_at_its_path(path: str, value: Any, message: str) -> None:
    err = rejected(with_field(path, value))
    assert paths(err) == [path], str(err)  # exactly one problem: no follow-on noise
    assert message in err.errors[0].message
    assert f"  - {path}: " in str(err)


def test_every_field_has_valid_and_invalid_cases() -> None:
    assert {p for p, _, _ in INVALID} == set(ALL_PATHS)
    assert {p for p, _, _ in VALID} == set(ALL_PATHS)


def test_each_problem_says_what_is_wrong_and_what_to_change() -> None:
    for path, value, _ in INVALID:
        (error,) = rejected(with_field(path, value)).errors
        assert "; " in error.message, error


# --------------------------------------------------------------------------- strictness
def test_unknown_nested_field_is_an_error_with_a_suggestion() -> None:
    err = rejected(document(multiCluster={"mcsImplemention": "mcs"}))
    message = 'unknown field (did you mean "mcsImplementation"?)'
    assert err.errors == [FieldError("multiCluster.mcsImplemention", message)]


def test_unknown_top_level_field_is_an_error_with_a_suggestion() -> None:
    err = rejected(document(multicluster={"mcsImplementation": "mcs"}))
    assert err.errors == [
        FieldError("multicluster", 'unknown field (did you mean "multiCluster"?)')
    ]


def test_snake_case_field_name_suggests_the_camel_case_name() -> None:
    err = rejected(document(poolRelay={"image_pull_policy": "Always"}))
    assert paths(err) == ["poolRelay.image_pull_policy"]
    assert '"imagePullPolicy"' in str(err)


def test_field_outside_its_section_suggests_the_full_path() -> None:
    err = rejected(document(mcsImplementation="mcs"))
    message = 'unknown field (did you mean "multiCluster.mcsImplementation"?)'
    assert err.errors == [FieldError("mcsImplementation", message)]


def test_unknown_field_without_a_close_match_lists_the_known_fields() -> None:
    err = rejected(document(logging={"colour": True}))
    assert paths(err) == ["logging.colour"]
    assert "the fields here are level, format" in str(err)


def test_non_string_field_name_is_an_error() -> None:
    # YAML reads an unquoted `on:` key as the boolean true.
    err = rejected(yaml.safe_load(f"apiVersion: {API_VERSION}\nkind: {KIND}\nlogging:\n  on: 1\n"))
    assert paths(err) == ["logging.True"]
    assert "field names must be strings, got boolean true" in str(err)


def test_section_that_is_not_a_mapping_is_an_error_naming_the_section() -> None:
    err = rejected(document(server=[":8080"], poolRelay="relay:1"))
    assert paths(err) == ["server", "poolRelay"]
    assert "server: must be a mapping, got a list" in str(err)
    assert 'poolRelay: must be a mapping, got string "relay:1"' in str(err)


def test_document_that_is_not_a_mapping_is_an_error() -> None:
    err = rejected(["apiVersion", API_VERSION])
    assert "the document is a list" in str(err)


def test_unquoted_yaml_boolean_for_a_string_field_asks_to_quote_it() -> None:
    data = yaml.safe_load(
        f"apiVersion: {API_VERSION}\nkind: {KIND}\nmultiCluster:\n  mcsImplementation: no\n"
    )
    err = rejected(data)
    message = "must be a string, got boolean false; quote the value if it is meant as text"
    assert err.errors == [FieldError("multiCluster.mcsImplementation", message)]


@pytest.mark.parametrize("data", [{}, None, {"multiCluster": {}}])
def test_api_version_and_kind_are_required(data: object) -> None:
    err = rejected(data)
    assert paths(err) == ["apiVersion", "kind"]
    assert f"set apiVersion: {API_VERSION}" in str(err)
    assert f"set kind: {KIND}" in str(err)


def test_wrong_api_version_or_kind_is_an_error() -> None:
    err = rejected({"apiVersion": "operator.config.dynamo.nvidia.com/v1", "kind": "Configuration"})
    assert paths(err) == ["apiVersion", "kind"]
    assert 'string "operator.config.dynamo.nvidia.com/v1" is not supported' in str(err)


# --------------------------------------------------------------------------- every error at once
def test_all_problems_are_reported_in_one_error() -> None:
    data = document(
        multiCluster={"mcsImplementation": "istio"},
        poolRelay={"port": 0, "imagePullPolicy": "Sometimes"},
        logging={"levle": "debug"},
    )
    err = rejected(data)
    expected = [
        "multiCluster.mcsImplementation",
        "poolRelay.imagePullPolicy",
        "poolRelay.port",
        "logging.levle",
    ]
    assert sorted(paths(err)) == sorted(expected)
    lines = str(err).splitlines()
    assert lines[0] == "invalid configuration in test.yaml: 4 problems"
    assert len(lines) == 5
    for path in expected:
        assert any(line.startswith(f"  - {path}: ") for line in lines[1:]), path


def test_message_header_is_singular_for_one_problem() -> None:
    err = ConfigurationError([FieldError("a.b", "bad; fix it")], "cfg.yaml")
    assert str(err) == "invalid configuration in cfg.yaml: 1 problem\n  - a.b: bad; fix it"


# --------------------------------------------------------------------------- durations
@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15s", 15.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1h", 3600.0),
        ("1.5h", 5400.0),
        ("2h45m0.5s", 9900.5),
        ("0", 0.0),
        ("100ns", 1e-7),
        ("1us", 1e-6),
        ("1\u00b5s", 1e-6),
        (".5s", 0.5),
        ("-1.5s", -1.5),
        ("+2s", 2.0),
    ],
)
def test_go_duration_parses_to_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds, rel=1e-12)


@pytest.mark.parametrize(
    "text",
    ["", "abc", "15", "s", ".s", "1x", "15S", "1.2.3s", "15 s", " 15s", "1e3s", "-", "1h-5m",
     "99999999999999999999h"],
)  # fmt: skip
def test_garbage_duration_is_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["15s", "1m30s", "500ms", "1h", "1.5s", "1h0.25s", "7us", "3ns"])
def test_formatted_duration_parses_back_to_the_same_value(text: str) -> None:
    seconds = parse_duration(text)
    assert parse_duration(format_duration(seconds)) == seconds


@given(
    st.integers(min_value=-(2**62), max_value=2**62)
)  # float seconds near int64 max round past it
def test_any_duration_round_trips_through_its_text(ns: int) -> None:
    seconds = ns / 1_000_000_000
    assert parse_duration(format_duration(seconds)) == seconds


@given(st.text(max_size=30))
def test_duration_parser_raises_only_value_error(text: str) -> None:
    with contextlib.suppress(ValueError):
        parse_duration(text)


# --------------------------------------------------------------------------- rules between fields
@pytest.mark.parametrize(("lease", "renew"), [("10s", "10s"), ("10s", "12s")])
def test_lease_duration_not_longer_than_renew_deadline_is_rejected(lease: str, renew: str) -> None:
    err = rejected(
        with_field("leaderElection.leaseDuration", lease, leaderElection__renewDeadline=renew)
    )
    assert paths(err) == ["leaderElection.leaseDuration"]
    assert "is not longer than renewDeadline" in str(err)


def test_renew_deadline_must_exceed_jittered_retry_period() -> None:
    # client-go: renewDeadline > JitterFactor (1.2) * retryPeriod; 2.4s is not > 2.4s.
    err = rejected(
        with_field("leaderElection.renewDeadline", "2.4s", leaderElection__retryPeriod="2s")
    )
    assert paths(err) == ["leaderElection.renewDeadline"]
    assert "1.2 x retryPeriod" in str(err)
    ok = parse_configuration(
        with_field("leaderElection.renewDeadline", "2.5s", leaderElection__retryPeriod="2s")
    )
    assert ok.leader_election.renew_deadline == 2.5


def test_invalid_timing_field_does_not_cause_follow_on_errors() -> None:
    err = rejected(
        with_field("leaderElection.renewDeadline", "never", leaderElection__leaseDuration="1s")
    )
    assert paths(err) == ["leaderElection.renewDeadline"]


def test_lease_namespace_must_be_the_restricted_namespace() -> None:
    data = with_field("namespace.restricted", "team-a", leaderElection__namespace="kube-system")
    err = rejected(data)
    assert paths(err) == ["leaderElection.namespace"]
    assert 'outside the restricted namespace "team-a"' in str(err)
    same = with_field("namespace.restricted", "team-a", leaderElection__namespace="team-a")
    assert parse_configuration(same).leader_election.namespace == "team-a"


@pytest.mark.parametrize(("secure", "refused"), [(True, False), (False, True)])
def test_a_metrics_certificate_needs_secure_metrics(secure: bool, refused: bool) -> None:
    """A mounted certificate with plain-HTTP metrics is a mistake worth stopping for: the
    operator would serve metrics to anyone while its user believes them protected."""
    data = with_field("server.metricsCertDir", "/tls", server__metricsSecure=secure)
    if refused:
        (error,) = rejected(data).errors
        assert error.path == "server.metricsCertDir"
        assert "set server.metricsSecure: true" in error.message
    else:
        assert parse_configuration(data).server.metrics_cert_dir == "/tls"


def test_a_wrong_metrics_secure_type_is_one_problem_not_two() -> None:
    data = with_field("server.metricsCertDir", "/tls", server__metricsSecure="yes")
    assert paths(rejected(data)) == ["server.metricsSecure"]


# --------------------------------------------------------------------------- files
def test_yaml_file_is_loaded(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"apiVersion: {API_VERSION}\nkind: {KIND}\nmultiCluster:\n  mcsImplementation: karmada\n"
        "leaderElection:\n  leaseDuration: 1m30s\n"
    )
    cfg = load_configuration(path)
    assert cfg.multi_cluster.mcs_implementation == "karmada"
    assert cfg.leader_election.lease_duration == 90.0


def test_json_file_is_loaded(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document(poolRelay={"replicas": 3}, logging={"format": "json"})))
    cfg = load_configuration(str(path))
    assert (cfg.pool_relay.replicas, cfg.logging.format) == (3, "json")


def test_yaml_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"apiVersion: {API_VERSION}\nkind: {KIND}\nserver:\n  metricsAddress: [\n")
    with pytest.raises(ConfigurationError) as info:
        load_configuration(path)
    message = str(info.value)
    assert message.startswith(f"invalid configuration in {path}: 1 problem")
    assert re.search(r"line \d+, column \d+: .+; fix the YAML syntax", message), message


def test_json_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{\n  "apiVersion": "x",\n  "kind": \n}\n')
    with pytest.raises(ConfigurationError, match=r"line 4, column 1: .*fix the JSON syntax"):
        load_configuration(path)


@pytest.mark.parametrize(
    ("name", "text"),
    [("c.yaml", f"apiVersion: {API_VERSION}\nkind: {KIND}\nkind: {KIND}\n"),
     ("c.json", f'{{"apiVersion": "{API_VERSION}", "kind": "{KIND}", "kind": "{KIND}"}}')],
)  # fmt: skip
def test_duplicate_key_is_an_error(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigurationError, match='duplicate key "kind"'):
        load_configuration(path)


def test_empty_file_needs_api_version_and_kind(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    with pytest.raises(ConfigurationError) as info:
        load_configuration(path)
    assert paths(info.value) == ["apiVersion", "kind"]


def test_missing_file_is_a_configuration_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigurationError, match="cannot read the file") as info:
        load_configuration(path)
    assert str(path) in str(info.value)


# --------------------------------------------------------------------------- outputs
def test_reference_documents_every_field_with_its_default() -> None:
    reference = configuration_reference()
    defaults = to_document(OperatorConfiguration())
    for path in ALL_PATHS:
        section, name = path.split(".")
        row = next(
            (line for line in reference.splitlines() if line.startswith(f"| `{path}` |")), None
        )
        assert row is not None, path
        assert f"`{json.dumps(defaults[section][name])}`" in row, row
    assert API_VERSION in reference
    assert KIND in reference


def test_reference_example_is_a_valid_configuration() -> None:
    example = configuration_reference().split("```yaml\n", 1)[1].split("```", 1)[0]
    assert parse_configuration(yaml.safe_load(example)) == OperatorConfiguration()


def test_document_round_trips_for_defaults_and_every_valid_value() -> None:
    assert parse_configuration(to_document(OperatorConfiguration())) == OperatorConfiguration()
    for path, value, _ in VALID:
        cfg = parse_configuration(with_field(path, value))
        assert parse_configuration(to_document(cfg)) == cfg, path


def test_document_round_trips_through_a_yaml_file(tmp_path: Path) -> None:
    cfg = parse_configuration(
        with_field("leaderElection.leaseDuration", "1m", leaderElection__retryPeriod="1.5s",
                   multiCluster__mcsImplementation="mcs", namespace__restricted="team-a")
    )  # fmt: skip
    path = tmp_path / "out.yaml"
    path.write_text(yaml.safe_dump(to_document(cfg)))
    assert load_configuration(path) == cfg


# --------------------------------------------------------------------------- properties
_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
_keys = st.text(max_size=12) | st.integers() | st.booleans() | st.none()
_anything = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=25,
)
_likely = st.sampled_from(
    ["", "0", "mcs", "15s", "1m30s", "0s", ":8080", "[::1]:1", "team-a", "Always", "debug", "x"]
)
_leaf = _scalars | _likely | _anything
_sections = {
    section: st.fixed_dictionaries(
        {}, optional=dict.fromkeys(to_document(OperatorConfiguration())[section], _leaf)
    )
    | _anything
    for section in to_document(OperatorConfiguration())
    if section not in ("apiVersion", "kind")
}
_shaped = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": st.just(API_VERSION) | _scalars,
        "kind": st.just(KIND) | _scalars,
        **_sections,
    },
)


def _parse_or_error(data: object) -> None:
    error: ConfigurationError | None = None
    try:
        cfg = parse_configuration(data)
    except ConfigurationError as exc:
        error = exc
    if error is not None:
        assert error.errors
        assert str(error).startswith("invalid configuration in <config>: ")
    else:
        assert isinstance(cfg, OperatorConfiguration)
        assert parse_configuration(to_document(cfg)) == cfg


@settings(max_examples=300)
@given(_anything)
def test_arbitrary_data_raises_only_configuration_error(data: object) -> None:
    _parse_or_error(data)


@settings(max_examples=500)
@given(_shaped)
def test_arbitrary_config_shaped_documents_raise_only_configuration_error(
    data: dict[str, Any],
) -> None:
    _parse_or_error(data)


def test_a_huge_value_is_shortened_in_its_error_but_its_length_is_said() -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_configuration(
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "multiCluster": {"mcsImplementation": "m" * 100_000},
            }
        )
    text = str(info.value)
    assert len(text) < 500
    assert "multiCluster.mcsImplementation" in text
    assert "(100000 characters)" in text
