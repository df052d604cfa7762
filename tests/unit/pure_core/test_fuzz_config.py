"""Fuzzing the configuration loader (config.py): junk in, `ConfigurationError` out.

`tests/unit/test_config.py` holds the rules as table rows and two small properties
(arbitrary data and config-shaped dicts raise only ConfigurationError). This file adds
what those do not reach:

- the *text* route (`load_configuration`): YAML-ish token soup, mutated valid files,
  YAML tags (including Python object tags), anchors, merge keys, deep nesting, huge
  numbers, non-UTF-8 bytes and JSON files;
- an oracle for "every error at once": from the document alone, the test computes the
  paths that *must* be reported (unknown fields, non-mapping sections, values of the
  wrong YAML type, a wrong header) and the paths that *may* be (those plus values of
  the right type, and the partners of the cross-field rules); the loader's errors must
  lie in between, so every message names a field path that exists (or the document);
- wrong types placed at random known paths of an otherwise valid file are reported at
  exactly those paths, with no follow-on noise;
- generated valid files (every field valid, omitted or null, unicode and huge strings,
  durations spelled many ways) load to the expected values, as a dict, YAML and JSON.

The field table below is written from the reference (docs/configuration.md), not read
from the loader, so the oracle is a second source; a test fails when a field is added
to the loader without being added here.

Budget: each property runs a modest number of examples so the unit tier stays fast;
set DPO_FUZZ_EXAMPLES=N to run N examples per property instead.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import assume, given
from hypothesis import strategies as st

from dynamo_pool_operator.api.crd import MAX_REPLICAS
from dynamo_pool_operator.config import (
    API_VERSION,
    KIND,
    ConfigurationError,
    OperatorConfiguration,
    load_configuration,
    parse_configuration,
    to_document,
)
from tests.unit.fuzzing import budget

# --------------------------------------------------------------------------- the field table
# Path -> YAML type, written from docs/configuration.md (a second source, not the loader).
FIELD_TYPES: dict[str, str] = {
    "multiCluster.mcsImplementation": "string",
    "multiCluster.confirmation": "string",
    "multiCluster.unconfirmedAfter": "duration",
    "multiCluster.exportedAnnotations": "map",
    "multiCluster.exportedLabels": "map",
    "multiCluster.apiDiscoveryInterval": "duration",
    "discovery.backend": "string",
    "namespace.restricted": "string",
    "leaderElection.enabled": "boolean",
    "leaderElection.namespace": "string",
    "leaderElection.name": "string",
    "leaderElection.leaseDuration": "duration",
    "leaderElection.renewDeadline": "duration",
    "leaderElection.retryPeriod": "duration",
    "server.metricsAddress": "string",
    "server.healthProbeAddress": "string",
    "server.metricsSecure": "boolean",
    "server.perRelayMetrics": "boolean",
    "server.metricsCertDir": "string",
    "poolRelay.image": "string",
    "poolRelay.imagePullPolicy": "string",
    "poolRelay.port": "integer",
    "poolRelay.replicas": "integer",
    "poolRelay.headless": "boolean",
    "controller.workers": "integer",
    "controller.backgroundWrites": "integer",
    "controller.fairQueuing": "boolean",
    "controller.changesFirstHold": "duration",
    "controller.cacheSyncTimeout": "duration",
    "clientConnection.qps": "integer",
    "clientConnection.burst": "integer",
    "logging.level": "string",
    "logging.format": "string",
}
SECTIONS: dict[str, set[str]] = {}
for _path in FIELD_TYPES:
    _section, _name = _path.split(".")
    SECTIONS.setdefault(_section, set()).add(_name)
TOP_LEVEL = {"apiVersion", "kind", *SECTIONS}
FIELD_NAMES = sorted({name for names in SECTIONS.values() for name in names})
#: Cross-field rules report at one of these paths although the value there is of the
#: right type and valid on its own (docs/configuration.md, "Rules between fields").
CROSS_RULE_PATHS = {
    "leaderElection.leaseDuration",
    "leaderElection.renewDeadline",
    "leaderElection.namespace",
    "server.healthProbeAddress",
    "server.metricsCertDir",
}
#: What a document-level problem (path "") talks about.
DOCUMENT_WORDS = ("the document", "the file", "syntax")


def test_the_fuzzers_field_table_is_the_loaders() -> None:
    doc = to_document(OperatorConfiguration())
    loader_paths = {
        f"{section}.{name}"
        for section, fields in doc.items()
        if isinstance(fields, dict)
        for name in fields
    }
    assert loader_paths == set(FIELD_TYPES), "a field was added or removed: update FIELD_TYPES"


def right_type(kind: str, value: object) -> bool:
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "map":
        return isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        )
    return isinstance(value, str)  # string and duration


def attr(cfg: OperatorConfiguration, path: str) -> Any:
    obj: Any = cfg
    for part in path.split("."):
        obj = getattr(obj, "".join("_" + c.lower() if c.isupper() else c for c in part))
    return obj


# --------------------------------------------------------------------------- the oracle
def field_name(key: object) -> str:
    """How an error names an unknown field: its text, or `""` for the empty name."""
    return '""' if key == "" else str(key)


def must_and_may(data: object) -> tuple[set[str], set[str]]:
    """The error paths a strict loader must report for `data`, and those it may report."""
    data = {} if data is None else data  # an empty file: an empty document
    if not isinstance(data, Mapping):
        return {""}, {""}
    must: set[str] = set()
    for key, want in (("apiVersion", API_VERSION), ("kind", KIND)):
        if data.get(key) != want:
            must.add(key)
    for key in data:
        if not (isinstance(key, str) and key in TOP_LEVEL):
            must.add(field_name(key))
    may = set(CROSS_RULE_PATHS)
    for section, names in SECTIONS.items():
        raw = data.get(section)
        if raw is None:
            continue
        if not isinstance(raw, Mapping):
            must.add(section)
            continue
        for key in raw:
            if not (isinstance(key, str) and key in names):
                must.add(f"{section}.{field_name(key)}")
        for name in names:
            path, value = f"{section}.{name}", raw.get(name)
            if value is None:
                continue
            if right_type(FIELD_TYPES[path], value):
                may.add(path)  # its value may still be invalid
            else:
                must.add(path)
    return must, must | may


def check_outcome(data: object, outcome: OperatorConfiguration | ConfigurationError) -> None:
    """The loader's result for `data` agrees with the oracle."""
    must, may = must_and_may(data)
    if isinstance(outcome, OperatorConfiguration):
        assert not must, f"accepted although {sorted(must)} are wrong"
        return
    reported = [e.path for e in outcome.errors]
    assert reported, "a ConfigurationError without errors"
    assert must <= set(reported), f"not reported: {sorted(must - set(reported))}"
    assert set(reported) <= may, f"reported at paths the file does not have a problem: {reported}"
    for path in FIELD_TYPES:
        assert reported.count(path) <= 1, f"{path} reported twice: {outcome.errors}"
    text = str(outcome)
    for e in outcome.errors:
        assert e.message, e
        if e.path:
            assert f"  - {e.path}: {e.message}" in text
            if e.path in must and e.path in FIELD_TYPES:  # a wrong type
                assert e.message.startswith("must be "), e
        else:
            assert any(w in e.message for w in DOCUMENT_WORDS), e


def document_problem(outcome: OperatorConfiguration | ConfigurationError) -> bool:
    """True when the file could not be read as a document at all (then that is the only
    problem reported, and it names the document rather than a field)."""
    if isinstance(outcome, OperatorConfiguration):
        return False
    whole = [
        e for e in outcome.errors if not e.path and any(w in e.message for w in DOCUMENT_WORDS)
    ]
    if whole:
        assert outcome.errors == whole, outcome.errors
        assert len(whole) == 1, whole
    return bool(whole)


def outcome_of(
    call: Callable[[], OperatorConfiguration],
) -> OperatorConfiguration | ConfigurationError:
    """Run the loader; any exception but ConfigurationError fails the test by propagating."""
    try:
        return call()
    except ConfigurationError as exc:
        return exc


# --------------------------------------------------------------------------- junk strategies
def huge_text(min_size: int = 1_000, max_size: int = 100_000) -> st.SearchStrategy[str]:
    """Long strings, cheaply: a short unicode piece repeated."""
    piece = st.text(st.characters(codec="utf-8"), min_size=1, max_size=4)
    return st.builds(lambda p, n: (p * n)[:n], piece, st.integers(min_size, max_size))


UNICODE = st.text(st.characters(codec="utf-8"), max_size=40)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**64, max_value=10**400)
    | st.floats()
    | UNICODE
    | huge_text()
    | st.dates()
    | st.datetimes()
    | st.binary(max_size=8)
)
KEYS = UNICODE | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False) | st.dates()
JUNK = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=20,
)

LIKELY_STRINGS = st.sampled_from(
    ["", "0", "mcs", "karmada", "etcd", "kubernetes", "15s", "1m30s", "0s", "-1s", "1.5s",
     ":8080", ":8081", "[::1]:1", "team-a", "Always", "debug", "json", "x", "relay:1"]
)  # fmt: skip


def typo(name: str) -> st.SearchStrategy[str]:
    """A misspelling of `name` a person might make."""
    snake = "".join("_" + c.lower() if c.isupper() else c for c in name)
    return st.sampled_from([name.lower(), name.upper(), snake, name[:-1], name + "s", f" {name}"])


def section_junk(section: str) -> st.SearchStrategy[Any]:
    names = sorted(SECTIONS[section])
    fields = st.fixed_dictionaries(
        {}, optional=dict.fromkeys(names, SCALARS | LIKELY_STRINGS | JUNK)
    )
    extra = st.dictionaries(st.sampled_from(names).flatmap(typo) | UNICODE, JUNK, max_size=2)
    return st.builds(lambda f, e: {**e, **f}, fields, extra) | JUNK


SHAPED = st.builds(
    lambda known, extra: {**extra, **known},
    st.fixed_dictionaries(
        {},
        optional={
            "apiVersion": st.just(API_VERSION) | SCALARS,
            "kind": st.just(KIND) | SCALARS,
            **{section: section_junk(section) for section in SECTIONS},
        },
    ),
    st.dictionaries(
        st.sampled_from(sorted(TOP_LEVEL | set(FIELD_NAMES))).flatmap(
            lambda n: st.just(n) | typo(n)
        )
        | KEYS,
        JUNK,
        max_size=3,
    ),
)


@budget(60)
@given(JUNK | SHAPED)
def test_any_document_is_accepted_or_refused_with_every_problem_at_its_path(data: object) -> None:
    check_outcome(data, outcome_of(lambda: parse_configuration(data, "fuzz.yaml")))


# --------------------------------------------------------------------------- valid documents
# A DNS-1123 label (what namespace names are): 1-63 of [a-z0-9-], alphanumeric at both ends.
DNS_LABEL = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=63).map(
    lambda s: s.strip("-") or "a"
)
SUBDOMAIN = (
    st.lists(DNS_LABEL, min_size=1, max_size=4).map(".".join).filter(lambda s: len(s) <= 253)
)
IMAGE = (
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=60)
    | huge_text(1_000, 5_000)
    | st.sampled_from(["registry.example/relay:1", "relay@sha256:" + "a" * 64])
).filter(lambda s: not any(c.isspace() for c in s))

UNIT_NS = {"h": 3600 * 10**9, "m": 60 * 10**9, "s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}


@st.composite
def go_duration(draw: st.DrawFn, ns: int) -> str:
    """`ns` nanoseconds written as one of the many Go duration spellings of it."""
    if ns % 10**6 == 0 and draw(st.booleans()):  # decimal seconds, exact
        whole, frac = divmod(ns, 10**9)
        text = f"{whole}.{frac:09d}".rstrip("0").rstrip(".") + "s"
    else:
        parts, rest = [], ns
        for unit, scale in UNIT_NS.items():
            if rest == 0:
                break
            amount = rest // scale if unit == "ns" else draw(st.integers(0, rest // scale))
            if amount or unit == "ns":
                # Go also reads the micro sign and the Greek mu for microseconds.
                spelled = (
                    draw(st.sampled_from(["us", "\u00b5s", "\u03bcs"])) if unit == "us" else unit
                )
                parts.append(f"{amount}{spelled}")
            rest -= amount * scale
        text = "".join(parts) or "0s"
    return draw(st.sampled_from(["", "+"])) + text


@st.composite
def valid_documents(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A valid file and the value every field must load to. Each field is written (set),
    left out, or null; the last two mean its default."""
    defaults = {path: attr(OperatorConfiguration(), path) for path in FIELD_TYPES}
    how = {path: draw(st.sampled_from(["set", "set", "omitted", "null"])) for path in FIELD_TYPES}
    written: dict[str, Any] = {p: None for p, h in how.items() if h == "null"}
    expected = dict(defaults)

    def put(path: str, text: Any, value: Any = None) -> None:
        """Write `text` at `path` (when it is set) and expect `value` (default: `text`)."""
        if how[path] == "set":
            written[path] = text
            expected[path] = text if value is None else value

    put("multiCluster.mcsImplementation", draw(st.sampled_from(["", "mcs", "karmada"])))
    put("discovery.backend", draw(st.sampled_from(["kubernetes", "etcd"])))
    put("namespace.restricted", draw(st.just("") | DNS_LABEL))
    put("leaderElection.enabled", draw(st.booleans()))
    restricted = expected["namespace.restricted"]
    # With a restricted namespace the Lease is in it (or the namespace is left empty).
    put("leaderElection.namespace", draw(st.sampled_from(["", restricted])) if restricted
        else draw(st.just("") | DNS_LABEL))  # fmt: skip
    put("leaderElection.name", draw(SUBDOMAIN))

    # leaseDuration (whole seconds) > renewDeadline > 1.2 x retryPeriod, chosen top down
    # around the defaults (15s, 10s, 2s) of the fields left out.
    le = "leaderElection."
    lowest_lease = 11 if how[le + "renewDeadline"] != "set" else 3
    lease_s = draw(st.integers(lowest_lease, 3600))
    put(le + "leaseDuration", draw(go_duration(lease_s * 10**9)), float(lease_s))
    lease_ms = round(expected[le + "leaseDuration"] * 1000)
    lowest_renew = 2401 if how[le + "retryPeriod"] != "set" else 3
    renew_ms = draw(st.integers(lowest_renew, lease_ms - 1))
    put(le + "renewDeadline", draw(go_duration(renew_ms * 10**6)), renew_ms / 1000)
    renew_ns = round(expected[le + "renewDeadline"] * 10**9)
    retry_ms = draw(st.integers(1, max(1, (renew_ns * 5 // 6 - 1) // 10**6)))
    put(le + "retryPeriod", draw(go_duration(retry_ms * 10**6)), retry_ms / 1000)
    lease, renew, retry = (
        expected[le + f] for f in ("leaseDuration", "renewDeadline", "retryPeriod")
    )
    assume(lease > renew > 1.2 * retry)  # a safety net; the ranges above make it hold

    # Ports that cannot clash with each other or with the defaults (:8080, :8081).
    hosts = st.sampled_from(["", "127.0.0.1", "[::1]", "localhost", "0.0.0.0", "my-host.example"])
    address = "{}:{}".format
    put(
        "server.metricsAddress",
        draw(st.just("0") | st.builds(address, hosts, st.integers(0, 8079))),
    )
    put("server.healthProbeAddress",
        draw(st.just("0") | st.builds(address, hosts, st.integers(8082, 65535))))  # fmt: skip
    put("server.metricsSecure", draw(st.booleans()))
    put("server.perRelayMetrics", draw(st.booleans()))
    # A certificate directory needs secure metrics (a rule between the two).
    secure = expected["server.metricsSecure"]
    put("server.metricsCertDir", draw(st.sampled_from(["", "/tls"])) if secure else "")

    put("poolRelay.image", draw(IMAGE))
    put("poolRelay.imagePullPolicy", draw(st.sampled_from(["Always", "IfNotPresent", "Never"])))
    put("poolRelay.port", draw(st.integers(1, 65535)))
    put("poolRelay.replicas", draw(st.integers(0, MAX_REPLICAS)))
    put("controller.workers", draw(st.integers(1, 64)))
    put("controller.backgroundWrites", draw(st.integers(0, 64)))
    put("controller.fairQueuing", draw(st.booleans()))
    hold_ns = draw(st.integers(0, 10**10))
    put("controller.changesFirstHold", draw(go_duration(hold_ns)), hold_ns / 10**9)
    sync_ns = draw(st.integers(1, 10**13))
    put("controller.cacheSyncTimeout", draw(go_duration(sync_ns)), sync_ns / 10**9)
    put("clientConnection.qps", draw(st.integers(0, 100_000)))
    put("clientConnection.burst", draw(st.integers(1, 100_000)))
    put("logging.level", draw(st.sampled_from(["debug", "info", "warning", "error"])))
    put("logging.format", draw(st.sampled_from(["auto", "json", "console"])))

    doc: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND}
    for path, value in written.items():
        section, field_name = path.split(".")
        doc.setdefault(section, {})[field_name] = value
    for section in SECTIONS:  # an empty or a null section is also "all defaults"
        if section not in doc and draw(st.booleans()):
            doc[section] = draw(st.sampled_from([None, {}]))
    return doc, expected


def check_values(cfg: OperatorConfiguration, expected: Mapping[str, Any]) -> None:
    for path, value in expected.items():
        assert attr(cfg, path) == value, path


@budget(25)
@given(valid_documents(), st.booleans())
def test_a_valid_file_loads_to_the_values_written_as_dict_yaml_and_json(
    generated: tuple[dict[str, Any], dict[str, Any]], allow_unicode: bool
) -> None:
    doc, expected = generated
    cfg = parse_configuration(doc)
    check_values(cfg, expected)
    with tempfile.TemporaryDirectory(prefix="dpo-fuzz-") as tmp:
        as_yaml = Path(tmp) / "config.yaml"
        as_yaml.write_text(yaml.safe_dump(doc, allow_unicode=allow_unicode), encoding="utf-8")
        assert load_configuration(as_yaml) == cfg
        as_json = Path(tmp) / "config.json"
        as_json.write_text(json.dumps(doc, ensure_ascii=not allow_unicode), encoding="utf-8")
        assert load_configuration(as_json) == cfg
    # What the chart's ConfigMap writes (to_document) loads back to the same values.
    assert parse_configuration(to_document(cfg)) == cfg


WRONG_TYPE: dict[str, st.SearchStrategy[Any]] = {
    "string": st.booleans() | st.integers() | st.floats() | st.lists(UNICODE, max_size=2)
    | st.dictionaries(UNICODE, UNICODE, max_size=2) | st.dates() | st.binary(max_size=4),
    "boolean": UNICODE | st.sampled_from(["true", "false", "yes", "on"]) | st.integers()
    | st.floats() | st.lists(st.booleans(), max_size=2),
    "integer": st.booleans() | st.floats() | UNICODE | st.sampled_from(["8090", "0x1F"])
    | st.lists(st.integers(), max_size=2) | st.dictionaries(UNICODE, st.integers(), max_size=1),
}  # fmt: skip
WRONG_TYPE["duration"] = WRONG_TYPE["string"]
WRONG_TYPE["map"] = (
    st.booleans() | st.integers() | UNICODE | st.lists(UNICODE, max_size=2)
    | st.dictionaries(UNICODE, st.integers() | st.booleans(), min_size=1, max_size=2)
)  # fmt: skip


@budget(30)
@given(valid_documents(), st.data())
def test_wrong_types_at_known_paths_are_reported_there_and_nowhere_else(
    generated: tuple[dict[str, Any], dict[str, Any]], data: st.DataObject
) -> None:
    doc, _ = generated
    paths = data.draw(st.lists(st.sampled_from(sorted(FIELD_TYPES)), min_size=1, unique=True))
    for path in paths:
        section, name = path.split(".")
        if not isinstance(doc.get(section), dict):
            doc[section] = {}
        doc[section][name] = data.draw(WRONG_TYPE[FIELD_TYPES[path]], label=path)
    with pytest.raises(ConfigurationError) as info:
        parse_configuration(doc, "fuzz.yaml")
    assert sorted(e.path for e in info.value.errors) == sorted(paths), str(info.value)
    for e in info.value.errors:
        assert e.message.startswith("must be "), e
        assert "; " in e.message, f"says what is wrong but not what to write: {e}"


@budget(40)
@given(valid_documents(), st.data())
def test_any_string_in_a_string_field_is_kept_or_refused_at_that_field(
    generated: tuple[dict[str, Any], dict[str, Any]], data: st.DataObject
) -> None:
    """Unicode, huge, empty or look-alike strings: the value is accepted as written, or
    refused at its own path (or the path of its cross-field rule), never elsewhere."""
    doc, _ = generated
    path = data.draw(st.sampled_from(sorted(p for p, k in FIELD_TYPES.items() if k == "string")))
    value = data.draw(UNICODE | huge_text() | LIKELY_STRINGS | DNS_LABEL, label="value")
    section, name = path.split(".")
    if not isinstance(doc.get(section), dict):
        doc[section] = {}
    doc[section][name] = value
    outcome = outcome_of(lambda: parse_configuration(doc, "fuzz.yaml"))
    if isinstance(outcome, OperatorConfiguration):
        assert attr(outcome, path) == value
        return
    partners = {
        "namespace.restricted": {"leaderElection.namespace"},
        "server.metricsAddress": {"server.healthProbeAddress"},
    }.get(path, set())
    reported = {e.path for e in outcome.errors}
    assert reported <= {path} | partners, str(outcome)


# --------------------------------------------------------------------------- text files
TOKENS = [
    "apiVersion", "kind", API_VERSION, KIND, *SECTIONS, *FIELD_NAMES,
    ":", ": ", "- ", "\n", "\n  ", "  ", "\t", "[", "]", "{", "}", ",", "&a ", "*a", "*b", "<<: ",
    "<<: *a", "? ", "|", "|-\n", ">", "'", '"', "#", "%YAML 1.1\n", "%TAG ! tag:x,1:\n", "---\n",
    "...\n", "~", "null", "true", "no", "on", "yes", "0x1F", "0o17", "1_000", "1e999", ".inf",
    ".nan", "-.inf", "2001-12-14", "2001-13-45", "2001-12-14t21:59:43.10-05:00", "!!str ",
    "!!int 12", "!!int x", "!!float 1.5", "!!float x", "!!binary ", "!!binary QUJD", "!!omap ",
    "!!pairs ", "!!null x", "!!python/object/apply:os.system ['true']", "!!python/name:os.system",
    "!!bool ", "!!bool maybe", "!!timestamp ", "!!timestamp soon", "!!set ", "!!map ", "!!int",
    "!!int +", "!!float", "!local ", "é", "\u2028", "\x85", "\x00", "\x07", "\ufeff", "💥",
    "9" * 5000, "a" * 3000, "[" * 2000, "{a: " * 500,
]  # fmt: skip


@st.composite
def yaml_text(draw: st.DrawFn) -> str:
    """YAML-ish text: token soup, or a valid file with a few edits."""
    if draw(st.booleans()):
        parts = st.sampled_from(TOKENS) | st.text(max_size=4)
        return "".join(draw(st.lists(parts, max_size=60)))
    doc, _ = draw(valid_documents())
    text = yaml.safe_dump(doc, allow_unicode=draw(st.booleans()))
    for _ in range(draw(st.integers(1, 4))):
        lines = text.splitlines(keepends=True)
        edit = draw(st.sampled_from(["insert", "delete", "duplicate-line", "indent"]))
        at = draw(st.integers(0, len(text)))
        if edit == "insert":
            text = text[:at] + draw(st.sampled_from(TOKENS) | st.text(max_size=3)) + text[at:]
        elif edit == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 8)) :]
        elif lines:  # a key given twice, or a line moved into the section above
            i = draw(st.integers(0, len(lines) - 1))
            if edit == "duplicate-line":
                lines.insert(i, lines[i])
            else:
                lines[i] = "  " + lines[i]
            text = "".join(lines)
    return text


@budget(50)
@given(yaml_text())
def test_any_yaml_text_is_loaded_or_refused_with_problems_at_paths_or_the_document(
    text: str,
) -> None:
    with tempfile.TemporaryDirectory(prefix="dpo-fuzz-") as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text(text, encoding="utf-8")
        outcome = outcome_of(lambda: load_configuration(path))
    if document_problem(outcome):
        assert str(outcome).startswith(f"invalid configuration in {path}: 1 problem")
        return
    # The text parsed: the same oracle as for documents applies to what it holds.
    check_outcome(yaml.safe_load(text), outcome)


@budget(30)
@given(
    st.binary(max_size=200)
    | st.builds(lambda t, b: t.encode() + b, yaml_text(), st.binary(min_size=1, max_size=4)),
    st.sampled_from(["config.yaml", "config.json", "CONFIG.JSON", "config"]),
)
def test_any_bytes_in_any_file_raise_only_configuration_error(data: bytes, name: str) -> None:
    with tempfile.TemporaryDirectory(prefix="dpo-fuzz-") as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        outcome = outcome_of(lambda: load_configuration(path))
    if isinstance(outcome, ConfigurationError):
        assert outcome.errors
        assert all(e.message for e in outcome.errors)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | UNICODE | huge_text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(UNICODE, inner, max_size=4),
    max_leaves=20,
)
JSON_TEXT = st.one_of(
    st.builds(json.dumps, JSON_VALUES | valid_documents().map(lambda generated: generated[0])),
    st.builds(
        lambda d, n: "[" * n + json.dumps(d) + "]" * n,
        st.just({"apiVersion": API_VERSION}),
        st.integers(0, 100_000),
    ),
    st.just('{"apiVersion": 1, "apiVersion": 2}'),
    st.just('{"kind": "' + "9" * 5000 + '", "x": ' + "9" * 5000 + "}"),
    st.text(st.sampled_from('{}[],:"0123456789.-eEtrufalsn \\'), max_size=40),
)


@budget(40)
@given(JSON_TEXT)
def test_any_json_file_raises_only_configuration_error(text: str) -> None:
    with tempfile.TemporaryDirectory(prefix="dpo-fuzz-") as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(text, encoding="utf-8")
        outcome = outcome_of(lambda: load_configuration(path))
    if document_problem(outcome):
        return
    check_outcome(json.loads(text), outcome)


def test_python_object_tags_are_refused_not_executed(tmp_path: Path) -> None:
    """Safe loading: a tag that would run code in an unsafe loader is a syntax error."""
    marker = tmp_path / "ran"
    path = tmp_path / "config.yaml"
    path.write_text(f"!!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(ConfigurationError) as info:
        load_configuration(path)
    assert info.value.errors[0].path == ""
    assert not marker.exists()


# --------------------------------------------------------------------------- found crashes
# Found by the text fuzzer (fixed): an explicit YAML tag on a value PyYAML cannot build
# escaped as a KeyError, AttributeError, IndexError or TypeError, so `run --config`
# exited 1 with a traceback instead of 2 with a message. And a `!!map`/`!!set` tag on a
# sequence reached the duplicate-key check, which assumed a mapping.
@pytest.mark.parametrize(
    "text",
    [
        "leaderElection:\n  enabled: !!bool yes-please\n",
        "logging:\n  level: !!timestamp soon\n",
        "poolRelay:\n  port: !!int\n",
        "poolRelay:\n  port: !!int +\n",
        "controller: !!float\n",
        "server: !!map [':8080']\n",
        "logging: !!set [json]\n",
    ],
    ids=["bool", "timestamp", "int-empty", "int-sign", "float-empty", "map-on-list", "set-on-list"],
)
def test_explicit_yaml_tag_that_cannot_be_constructed_is_a_configuration_error(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"apiVersion: {API_VERSION}\nkind: {KIND}\n{text}")
    with pytest.raises(ConfigurationError) as info:
        load_configuration(path)
    (problem,) = info.value.errors
    assert problem.path == ""
    assert "line " in problem.message or "cannot parse" in problem.message


def test_a_top_level_field_named_empty_is_named_in_its_error() -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_configuration({"apiVersion": API_VERSION, "kind": KIND, "": 1})
    (problem,) = info.value.errors
    assert problem.path != ""
    assert '""' in str(info.value)
