"""The operator's configuration file: `OperatorConfiguration` (`--config PATH`).

Why strict: a typo such as `mcsImplemention: mcs` would otherwise be ignored and the
operator would silently run with exports off. Like Kubernetes' strict decoding, every
unknown field, wrong type or bad value is an error naming its path in the file.

Why every error at once: a platform team fixing a ConfigMap should not need one rollout
per typo, so decoding keeps going after a problem and `ConfigurationError` lists them all.

Why `null` means "default": Helm renders an unset value as an empty YAML value (`null`);
treating it as absent keeps `helm template` output valid without `default` pipes.

Each field is declared once below (see `config_fields`): the decoder, the validator,
`to_document` and `configuration_reference()` (docs/configuration.md) all read it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.crd import MAX_REPLICAS
from dynamo_pool_operator.api.dgd import DiscoveryBackend
from dynamo_pool_operator.api.mcs import CONFIRMATION_ALIASES, Confirmation, Implementation
from dynamo_pool_operator.api.podfields import PullPolicy
from dynamo_pool_operator.config_fields import (
    Check,
    ConfigurationError,
    FieldError,
    FieldSpec,
    Pairs,
    boolean,
    camel,
    cert_dir,
    check_unknown,
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
    quote,
    spec_of,
    split_address,
    string,
    string_map,
)

__all__ = [
    "API_VERSION",
    "KIND",
    "ConfigurationError",
    "FieldError",
    "OperatorConfiguration",
    "configuration_reference",
    "load_configuration",
    "parse_configuration",
    "parse_duration",
    "to_document",
]

API_VERSION = "operator.config.dynamo.nvidia.com/v1alpha1"
KIND = "OperatorConfiguration"
JITTER_FACTOR = 1.2  # client-go's leaderelection.JitterFactor
DEFAULT_RELAY_IMAGE = "nvcr.io/nvidia/ai-dynamo/pool-relay:0.1.0"  # placeholder until published


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class LogFormat(StrEnum):
    AUTO = "auto"
    JSON = "json"
    #: `time level logger message key=value`, for people.
    CONSOLE = "console"

    @classmethod
    def _missing_(cls, value: object) -> LogFormat | None:
        return cls.CONSOLE if value in LOG_FORMAT_ALIASES else None


#: Earlier names of a log format, still accepted.
LOG_FORMAT_ALIASES = {"text": LogFormat.CONSOLE}


def _whole_seconds(seconds: float) -> str | None:
    # A Lease stores leaseDurationSeconds as an integer; the elector refuses anything else.
    if seconds >= 1 and seconds == int(seconds):
        return None
    return f'{quote(format_duration(seconds))} is not whole seconds; use e.g. "15s" (at least 1s)'


def _not_negative(example: str, zero_means: str) -> Check:
    """A duration check that allows 0s; its message gives an `example` and says what 0s
    does (`zero_means`)."""

    def check(seconds: float) -> str | None:
        if seconds < 0:
            return (
                f"must not be negative, got {quote(format_duration(seconds))}; "
                f'use e.g. "{example}", or "0s" {zero_means}'
            )
        return None

    return check


def _keys(value: Mapping[str, str], what: str) -> str | None:
    for key in sorted(value):
        problems = names.qualified_name_errors(key)
        if problems:
            return f"key {quote(key)}: {problems[0]}; use a valid {what} key ([prefix/]name)"
    return None


def _exported_annotations(value: Mapping[str, str]) -> str | None:
    return _keys(value, "annotation")


def _exported_labels(value: Mapping[str, str]) -> str | None:
    problem = _keys(value, "label")
    if problem:
        return problem
    for key, label in sorted(value.items()):
        problems = names.label_value_errors(label)
        if problems:
            return f"value of {quote(key)}: {quote(label)} {problems[0]}; use a valid label value"
    return None


@dataclass(frozen=True, slots=True)
class MultiClusterConfig:
    """Which Multi-Cluster Services implementation exported pools are published to."""

    mcs_implementation: Implementation = choice(
        Implementation.NONE,
        "Where pools are exported: empty exports nothing (and withdraws exports this operator "
        "made earlier); `mcs` or `karmada` write ServiceExports for that implementation.",
    )
    confirmation: Confirmation = choice(
        Confirmation.DEFAULT,
        "What the MCS implementation must write on an export before the pool is "
        "`Exported`: `ready` waits for `Ready=True` (Submariner Lighthouse, Cilium write it); "
        "`valid` for `Valid=True` or `Ready=True` (Antrea writes only `Valid`); with either, "
        "an export with nothing written stays `Exported=Unknown`. `none` for those that "
        "write no condition (Karmada, AWS Cloud Map, Clusternet): an export that exists is "
        "`Exported=True ExportExists`. A refusal or conflict written is read at every level. "
        "Empty: `valid` with `mcs`, `none` with `karmada`. `required` is the old name of "
        "`ready`.",
        aliases=tuple(CONFIRMATION_ALIASES),
    )
    unconfirmed_after: float = duration(
        "60s",
        "With confirmation `ready` or `valid`: how long an export on which the MCS "
        "implementation has written no condition (under `ready`: no `Ready`) is waited for "
        "(`Exported=Unknown Pending`) before a Warning says so (`Exported=Unknown "
        "Unconfirmed`; still not exported), and how long a withdrawn export may stay "
        "being deleted before its status line says what holds it (`Withdrawing`). "
        "Lighthouse writes its conditions within seconds. 0s: warn at once.",
        check=_not_negative("60s", "for an implementation that writes no conditions"),
        allowed=">= 0",
    )
    exported_annotations: Pairs = string_map(
        "Annotations written into every ServiceExport the operator owns "
        "(`spec.exportedAnnotations`, mcs-api v0.5.1 and later): the MCS implementation "
        "puts them on the import in the other clusters. Cilium syncs a ClusterIP Service's "
        "EndpointSlices (a frontend's) only with "
        '`service.cilium.io/global-sync-endpoint-slices: "true"`. '
        "Kept right like every field the operator owns; refused at start where the served "
        "ServiceExport CRD has no such field.",
        check=_exported_annotations,
        allowed="keys: annotation keys",
    )
    exported_labels: Pairs = string_map(
        "Labels written into every ServiceExport the operator owns (`spec.exportedLabels`, "
        "mcs-api v0.5.1 and later), for the imports in the other clusters; kept right and "
        "refused at start like `exportedAnnotations`.",
        check=_exported_labels,
        allowed="label keys and values",
    )
    api_discovery_interval: float = duration(
        "30s",
        "How often the served APIs are read again, so that the ServiceExport, About and DGD "
        "APIs (their CRDs) installed, deleted or re-versioned while the operator runs take "
        "effect without a restart: one discovery read, no extra permission.",
    )


@dataclass(frozen=True, slots=True)
class DiscoveryConfig:
    """How the relay finds a pool's workers when its DGD does not say."""

    backend: DiscoveryBackend = choice(
        DiscoveryBackend.KUBERNETES,
        "Discovery backend of DGDs without the `nvidia.com/dynamo-discovery-backend` annotation.",
    )


@dataclass(frozen=True, slots=True)
class NamespaceConfig:
    """Namespace restriction: watch and write in one namespace only."""

    restricted: str = string(
        "",
        "Empty: the operator works cluster-wide. Otherwise the one namespace it watches and "
        "writes in (its RBAC is then a Role there).",
        check=namespace_name,
        allowed="empty or a DNS-1123 label",
    )


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """A coordination.k8s.io Lease, so only one replica writes at a time."""

    enabled: bool = boolean(True, "Elect a leader; disable only when running one replica.")
    namespace: str = string(
        "",
        "Namespace of the Lease. Empty: the restricted namespace if set, else the pod's own.",
        check=namespace_name,
        allowed="empty or a DNS-1123 label",
    )
    name: str = string(
        "dynamo-pool-operator-leader",
        "Name of the Lease.",
        check=object_name,
        allowed="a DNS-1123 subdomain",
    )
    lease_duration: float = duration(
        "15s",
        "How long followers wait after the last renewal before taking over.",
        check=_whole_seconds,
        allowed="whole seconds >= 1s; > renewDeadline",
    )
    renew_deadline: float = duration(
        "10s",
        "How long the leader keeps trying to renew before it stops writing.",
        allowed=f"> {JITTER_FACTOR} x retryPeriod; < leaseDuration",
    )
    retry_period: float = duration("2s", "Interval between acquire and renew attempts.")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """The operator's HTTP listeners."""

    metrics_address: str = string(
        ":8080",
        "Bind address of Prometheus `/metrics`; `0` disables it. Without `metricsSecure`, "
        "an address with no host (`:8080`) listens on 127.0.0.1 only, since plain "
        "`/metrics` names every tenant's relays to whoever reaches it: name the host "
        "(`0.0.0.0:8080`) to serve it on every interface anyway.",
        check=listen_address,
        allowed="`[host]:port` (port 0-65535) or `0`",
    )
    health_probe_address: str = string(
        ":8081",
        "Bind address of `/healthz` and `/readyz`; `0` disables it.",
        check=listen_address,
        allowed="`[host]:port` (port 0-65535) or `0`",
    )
    metrics_secure: bool = boolean(
        False,
        "Serve `/metrics` over HTTPS, only to callers the API server authenticates "
        "(TokenReview of their bearer token) and authorizes for `get` on the non-resource "
        "URL `/metrics` (SubjectAccessReview), as kubebuilder's secure metrics do. Needs the "
        "metrics-auth ClusterRole (tokenreviews and subjectaccessreviews `create`).",
    )
    per_relay_metrics: bool = boolean(
        True,
        "Export `dynamo_pool_operator_relay_ready{relay_namespace, relay}`, one series per "
        "relay (what the DynamoPoolRelayNotReady alert reads). false: no series names a "
        "relay; the counts by condition and reason remain.",
    )
    metrics_cert_dir: str = string(
        "",
        "With `metricsSecure`: a directory holding `tls.crt` and `tls.key` (a mounted "
        "certificate Secret), re-read when they change. Empty: a self-signed certificate "
        "made at start.",
        check=cert_dir,
        allowed="empty or an absolute path",
    )


@dataclass(frozen=True, slots=True)
class PoolRelayConfig:
    """Defaults for the relay Deployment and Service rendered for each DynamoPoolRelay."""

    image: str = string(
        DEFAULT_RELAY_IMAGE,
        "Container image of the relay.",
        check=image_reference,
        allowed="non-empty, no whitespace",
    )
    image_pull_policy: PullPolicy = choice(
        PullPolicy.IF_NOT_PRESENT, "Pull policy of the relay container."
    )
    port: int = integer(8090, "Port the relay serves on.", minimum=1, maximum=65535)
    replicas: int = integer(
        2, "Relay replicas per pool (at most the CRD's bound).", minimum=0, maximum=MAX_REPLICAS
    )
    headless: bool = boolean(
        True,
        "Whether the relay Service is headless (`clusterIP: None`): an MCS implementation "
        "then imports the relay pods' IPs, which is how the Global Router recognises each "
        "relay. false: a ClusterIP Service, imported as its one ClusterIP.",
    )


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """Reconciler tuning."""

    workers: int = integer(
        4,
        "Relays reconciled concurrently (MaxConcurrentReconciles). Of two or more, one "
        "takes only real changes, never the backlog of a start or a mass requeue, and "
        "(with fairQueuing) none of a namespace that has relays being reconciled already, "
        "so a user's change is taken at once during a mass requeue or another "
        "namespace's mass change.",
        minimum=1,
        maximum=64,
    )
    background_writes: int = integer(
        0,
        "Writes in flight at most for the backlog of a start, a relist or a mass requeue, "
        "and for Events (they wait for a slot; a user's change's writes do not), to leave "
        "a shared API server room for other clients. 0: no cap (the default: a cap makes "
        "the backlog's passes hold their keys longer, and a change to one of them waits; "
        "docs/performance.md).",
        minimum=0,
        maximum=64,
    )
    fair_queuing: bool = boolean(
        True,
        "Whether the relays waiting at one priority are served in turn by namespace (one "
        "relay of each namespace with relays waiting, then the next of each), so that one "
        "namespace's mass change does not hold up another namespace's single change. "
        "false: first come, first served within a priority (the order before fair "
        "queuing, kept to compare the two: bench/tenants.py).",
    )
    changes_first_hold: float = duration(
        "250ms",
        "With fairQueuing: while the worker kept for changes reconciles a relay of a "
        "namespace with no other relay being reconciled (a change made alone, beside a "
        "backlog or another namespace's mass change), the other reconciles' writes and "
        "Events wait for it to end, each at most this long, so the API server meets the "
        "change's writes with little else in hand (decision 0015). 0s: writes go in the "
        "order they come.",
        check=_not_negative("250ms", "to send writes in the order they come"),
        allowed=">= 0",
    )
    cache_sync_timeout: float = duration(
        "2m", "How long to wait for the watch caches to fill at startup before giving up."
    )


@dataclass(frozen=True, slots=True)
class ClientConnectionConfig:
    """How fast the operator's client may send requests to the API server."""

    qps: int = integer(
        0,
        "Client-side limit on requests per second, as client-go's QPS (watches are not "
        "counted). 0: no client-side limit; the API server's Priority and Fairness queues "
        "the operator's requests instead.",
        minimum=0,
        maximum=100_000,
    )
    burst: int = integer(
        100,
        "Requests that may go at once before `qps` paces them; unused while `qps` is 0.",
        minimum=1,
        maximum=100_000,
    )


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    """Log verbosity and encoding."""

    level: LogLevel = choice(LogLevel.INFO, "Lowest level written.")
    format: LogFormat = choice(
        LogFormat.AUTO,
        "`auto`: JSON when stderr is not a terminal (in a pod), `console` in a terminal: "
        "`time level logger message key=value` lines for people. `text` is the old name of "
        "`console`.",
        aliases=tuple(LOG_FORMAT_ALIASES),
    )


@dataclass(frozen=True, slots=True)
class OperatorConfiguration:
    """The whole file; every section may be omitted and then takes its defaults."""

    multi_cluster: MultiClusterConfig = field(default_factory=MultiClusterConfig)
    discovery: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    namespace: NamespaceConfig = field(default_factory=NamespaceConfig)
    leader_election: LeaderElectionConfig = field(default_factory=LeaderElectionConfig)
    server: ServerConfig = field(default_factory=ServerConfig)
    pool_relay: PoolRelayConfig = field(default_factory=PoolRelayConfig)
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    client_connection: ClientConnectionConfig = field(default_factory=ClientConnectionConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)


# --------------------------------------------------------------------------- decoding
def _sections() -> list[tuple[str, dataclasses.Field[Any], type[Any]]]:
    """(file name, field, section class) of each section, in declaration order."""
    out: list[tuple[str, dataclasses.Field[Any], type[Any]]] = []
    for f in dataclasses.fields(OperatorConfiguration):
        assert isinstance(f.default_factory, type)
        out.append((camel(f.name), f, f.default_factory))
    return out


def _check_header(data: Mapping[Any, Any], errors: list[FieldError]) -> None:
    for key, want in (("apiVersion", API_VERSION), ("kind", KIND)):
        got = data.get(key)
        if got is None:
            errors.append(FieldError(key, f"required; set {key}: {want}"))
        elif got != want:
            errors.append(FieldError(key, f"{describe(got)} is not supported; use {want}"))


def _cross_checks(cfg: OperatorConfiguration, bad: set[str]) -> list[FieldError]:
    """Rules between fields, checked only when those fields are valid on their own (one
    left at its default by its own error would mislead)."""
    out: list[FieldError] = []
    le, fmt = cfg.leader_election, format_duration
    p = "leaderElection."
    lease, renew, retry = p + "leaseDuration", p + "renewDeadline", p + "retryPeriod"
    if not bad & {lease, renew} and le.lease_duration <= le.renew_deadline:
        msg = (
            f"{quote(fmt(le.lease_duration))} is not longer than renewDeadline "
            f"({quote(fmt(le.renew_deadline))}); lengthen it or shorten renewDeadline, so a leader "
            "stops writing before another replica may take over"
        )
        out.append(FieldError(lease, msg))
    if not bad & {renew, retry} and le.renew_deadline <= JITTER_FACTOR * le.retry_period:
        msg = (
            f"{quote(fmt(le.renew_deadline))} is not longer than {JITTER_FACTOR} x retryPeriod "
            f"({quote(fmt(JITTER_FACTOR * le.retry_period))}); lengthen it or shorten retryPeriod, "
            "so a failed renewal can be retried before the deadline"
        )
        out.append(FieldError(renew, msg))
    ns = cfg.namespace.restricted
    if ns and le.namespace not in ("", ns):
        msg = (
            f"{quote(le.namespace)} is outside the restricted namespace {quote(ns)}; leave it "
            f"empty or set {quote(ns)}, the only namespace the operator may write in"
        )
        out.append(FieldError("leaderElection.namespace", msg))
    secure_ok = "server.metricsSecure" not in bad
    if secure_ok and cfg.server.metrics_cert_dir and not cfg.server.metrics_secure:
        msg = (
            "is set but metricsSecure is false, so no certificate is served; set "
            "server.metricsSecure: true or remove server.metricsCertDir"
        )
        out.append(FieldError("server.metricsCertDir", msg))
    metrics, probes = cfg.server.metrics_address, cfg.server.health_probe_address
    checked = not bad & {"server.metricsAddress", "server.healthProbeAddress"}
    if checked and "0" not in (metrics, probes):
        (h1, p1), (h2, p2) = split_address(metrics), split_address(probes)
        any_host = ("", "0.0.0.0", "::")
        if p1 == p2 != 0 and (h1 == h2 or h1 in any_host or h2 in any_host):
            msg = f"{quote(probes)} uses the same port as metricsAddress ({quote(metrics)})"
            out.append(FieldError("server.healthProbeAddress", f"{msg}; choose another port"))
    return out


def parse_configuration(data: object, source: str = "<config>") -> OperatorConfiguration:
    """Decode and validate an already-parsed document; raises ConfigurationError listing
    every problem. `None` (an empty file) is an empty document: apiVersion/kind missing."""
    errors: list[FieldError] = []
    data = {} if data is None else data
    if not isinstance(data, Mapping):
        fix = f"write a mapping with apiVersion: {API_VERSION} and kind: {KIND}"
        raise ConfigurationError(
            [FieldError("", f"the document is {describe(data)}; {fix}")], source
        )
    sections = _sections()
    elsewhere = {
        camel(g.name): f"{name}.{camel(g.name)}"
        for name, _, cls in sections
        for g in dataclasses.fields(cls)
    }
    known = ["apiVersion", "kind", *(name for name, _, _ in sections)]
    _check_header(data, errors)
    check_unknown(data, known, "", errors, elsewhere)
    bad: set[str] = set()
    values = {f.name: decode_section(data.get(n), n, cls, errors, bad) for n, f, cls in sections}
    cfg = OperatorConfiguration(**values)
    errors.extend(_cross_checks(cfg, bad))
    if errors:
        raise ConfigurationError(errors, source)
    return cfg


class _StrictLoader(yaml.SafeLoader):
    """`yaml.safe_load`'s loader, but a key given twice is an error, as Kubernetes' strict
    decoding has it."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        if not isinstance(node, yaml.MappingNode):  # `!!set [a]`, `!!map [a]`
            raise yaml.constructor.ConstructorError(
                None, None, f"expected a mapping, but found a {node.id}", node.start_mark
            )
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=False)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # unhashable: the base class reports it
                continue
            if duplicate:  # said at the second key (the problem mark is what is shown)
                raise yaml.constructor.ConstructorError(
                    None, None, f"found duplicate key {quote(key)}", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"found duplicate key {quote(key)}")
        out[key] = value
    return out


def _parse_text(text: str, source: str) -> object:
    """YAML (or JSON, for *.json) text to Python data; syntax errors keep line and column."""
    problem: str
    try:
        if source.lower().endswith(".json"):
            return json.loads(text, object_pairs_hook=_no_duplicates)
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: safe
    except json.JSONDecodeError as exc:
        problem = f"line {exc.lineno}, column {exc.colno}: {exc.msg}; fix the JSON syntax"
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = f"{where}{exc.problem or exc.context}; fix the YAML syntax"
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        problem = f"cannot parse the file ({exc or type(exc).__name__}); fix its syntax"
    except (KeyError, AttributeError, IndexError, TypeError) as exc:
        # PyYAML raises these for an explicit tag it cannot build (`!!bool maybe`).
        problem = (
            f"cannot parse the file: a value with an explicit YAML tag (like !!bool or !!int) "
            f"is not of that type ({type(exc).__name__}: {exc}); remove the tag or fix the value"
        )
    raise ConfigurationError([FieldError("", problem)], source)


def load_configuration(path: str | os.PathLike[str] | None) -> OperatorConfiguration:
    """Read `--config PATH`; no path means all defaults. Raises ConfigurationError."""
    if path is None:
        return OperatorConfiguration()
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problem = f"cannot read the file ({exc}); check the --config path"
        raise ConfigurationError([FieldError("", problem)], source) from exc
    return parse_configuration(_parse_text(text, source), source)


# --------------------------------------------------------------------------- output
def _encode(value: Any, spec: FieldSpec) -> Any:
    if spec.kind == "duration":
        return format_duration(value)
    if spec.kind == "map":
        return dict(value)
    return str(value) if spec.enum is not None else value  # the file holds the plain value


def to_document(cfg: OperatorConfiguration) -> dict[str, Any]:
    """The complete file form of `cfg`, every field set: what the chart's ConfigMap and
    `manifests` write."""
    doc: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND}
    for name, f, cls in _sections():
        part = getattr(cfg, f.name)
        doc[name] = {
            camel(g.name): _encode(getattr(part, g.name), spec_of(g))
            for g in dataclasses.fields(cls)
        }
    return doc


def _row(*cells: str) -> str:
    return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def configuration_reference() -> str:
    """Markdown reference of every field (docs/configuration.md), from the declarations the
    decoder uses."""
    lines = [
        "# Operator configuration",
        "",
        "<!-- Generated by dynamo_pool_operator.config.configuration_reference(); do not edit. -->",
        "",
        f"Pass a YAML or JSON file with `--config PATH`. `apiVersion: {API_VERSION}` and "
        f"`kind: {KIND}` are required; every section and field may be omitted (or `null`) "
        "and then takes its default. Unknown fields, duplicate keys, wrong types and invalid "
        "values are errors; all of them are reported at once and the operator does not start "
        "(exit code 2). Durations are Go duration strings: `500ms`, `15s`, `1m30s`, `1h`.",
        "",
        _row("Field", "Type", "Default", "Allowed values", "Description"),
        _row("---", "---", "---", "---", "---"),
        _row("`apiVersion`", "string", "(required)", f"`{API_VERSION}`", "Schema version."),
        _row("`kind`", "string", "(required)", f"`{KIND}`", "Document kind."),
    ]
    for name, _, cls in _sections():
        lines.append(_row(f"`{name}`", "section", "", "", " ".join((cls.__doc__ or "").split())))
        for g in dataclasses.fields(cls):
            spec = spec_of(g)
            default = f"`{json.dumps(_encode(g.default, spec))}`"
            allowed = ", ".join(f"`{json.dumps(c)}`" for c in spec.choices) or spec.allowed
            lines.append(_row(f"`{name}.{camel(g.name)}`", spec.kind, default, allowed, spec.doc))
    example = yaml.safe_dump(to_document(OperatorConfiguration()), sort_keys=False)
    lines += [
        "",
        "Rules between fields: `leaderElection.leaseDuration` > `leaderElection.renewDeadline` "
        f"> {JITTER_FACTOR} x `leaderElection.retryPeriod` (client-go's rule); with "
        "`namespace.restricted` set, `leaderElection.namespace` is empty or that namespace; "
        "`server.metricsAddress` and `server.healthProbeAddress` use different ports; "
        "`server.metricsCertDir` needs `server.metricsSecure`.",
        "",
        "## Complete example (all defaults)",
        "",
        "```yaml",
        example.rstrip(),
        "```",
        "",
    ]
    return "\n".join(lines)
