"""Building blocks of the OperatorConfiguration schema: field descriptors and value rules.

Each field is declared once, its metadata (`FieldSpec`) carrying kind, documentation and
rule; the decoder, `to_document` and the generated reference all read it, so the docs
cannot drift from the loader. Durations are Go's (`1m30s`), kept in integer nanoseconds
while parsing as `time.ParseDuration` does, so "1.5s" and "1500ms" are equal.
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Any, Literal, TypeVar

E = TypeVar("E", bound=StrEnum)

Kind = Literal["string", "boolean", "integer", "duration", "map"]
# A rule returns None when the value is fine, else "<what is wrong>; <what to change>".
Check = Callable[[Any], str | None]


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem with one field, addressed by its camelCase path in the file."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """How one leaf field is written in the file, documented and checked."""

    kind: Kind
    doc: str
    choices: tuple[str, ...] = ()
    check: Check | None = None
    allowed: str = ""  # human wording of `check` for the reference table
    #: A choice field's enum: the decoded value is its member, not the bare string.
    enum: type[StrEnum] | None = None


#: Longest string value shown in full in a message.
QUOTE_LIMIT = 80


def quote(value: object) -> str:
    """Values in messages are shown as they are written in YAML/JSON: "mcs", 4, true, null."""
    if isinstance(value, str):
        if len(value) > QUOTE_LIMIT:  # a pasted blob must not flood the error output
            head = json.dumps(value[:QUOTE_LIMIT], ensure_ascii=False)
            return f'{head[:-1]}..." ({len(value)} characters)'
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int) and value.bit_length() > 128:
        return "(a very large number)"  # and str() of a huge int may even raise
    return str(value)


def camel(attr: str) -> str:
    """`mcs_implementation` -> `mcsImplementation`: file names are derived, never typed twice."""
    head, *rest = attr.split("_")
    return head + "".join(part.capitalize() for part in rest)


def spec_of(f: dataclasses.Field[Any]) -> FieldSpec:
    spec = f.metadata.get("spec")
    if not isinstance(spec, FieldSpec):
        raise TypeError(f"configuration field {f.name!r} was declared without a FieldSpec")
    return spec


# --------------------------------------------------------------------------- declarations
# Each helper returns a dataclasses.Field typed as the value, so mypy sees plain attributes.


def string(
    default: str,
    doc: str,
    *,
    choices: tuple[str, ...] = (),
    check: Check | None = None,
    allowed: str = "",
) -> str:
    spec = FieldSpec("string", doc, choices, check, allowed)
    return dataclasses.field(default=default, metadata={"spec": spec})


def choice(default: E, doc: str, *, aliases: tuple[str, ...] = ()) -> E:
    """One of an enum's values in the file, its member in Python; `aliases`: old names
    still accepted."""
    enum = type(default)
    spec = FieldSpec("string", doc, (*(m.value for m in enum), *aliases), enum=enum)
    return dataclasses.field(default=default, metadata={"spec": spec})


#: A map of strings as the configuration holds it: its pairs, sorted (a frozen value).
Pairs = tuple[tuple[str, str], ...]


def string_map(doc: str, *, check: Check | None = None, allowed: str = "") -> Pairs:
    """A map of strings in the file, its pairs sorted in Python (a frozen value); `check`
    sees it as a dict."""
    spec = FieldSpec("map", doc, check=check, allowed=allowed)
    return dataclasses.field(default=(), metadata={"spec": spec})


def boolean(default: bool, doc: str) -> bool:
    return dataclasses.field(default=default, metadata={"spec": FieldSpec("boolean", doc)})


def integer(default: int, doc: str, *, minimum: int, maximum: int) -> int:
    def in_range(value: int) -> str | None:
        if minimum <= value <= maximum:
            return None
        return f"{quote(value)} is out of range; use a whole number from {minimum} to {maximum}"

    spec = FieldSpec("integer", doc, check=in_range, allowed=f"{minimum}..{maximum}")
    return dataclasses.field(default=default, metadata={"spec": spec})


def duration(default: str, doc: str, *, check: Check | None = None, allowed: str = "> 0") -> float:
    """A Go duration in the file, float seconds in Python; must be positive unless `check`."""
    spec = FieldSpec("duration", doc, check=check or positive_duration, allowed=allowed)
    return dataclasses.field(default=parse_duration(default), metadata={"spec": spec})


# --------------------------------------------------------------------------- durations
_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign, as Go accepts
    "\u03bcs": 1_000,  # Greek mu, as Go accepts
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_TERM = re.compile(r"([0-9]*)(?:\.([0-9]*))?([a-z\u00b5\u03bc]+)", re.ASCII)
_MAX_NS = 2**63 - 1  # Go's time.Duration is an int64 of nanoseconds
_MAX_DIGITS = 30  # longer numbers overflow int64 anyway; refuse before int() gets costly


def parse_duration_ns(text: str) -> int:
    """Go's `time.ParseDuration`, returning integer nanoseconds; ValueError when invalid."""
    if not isinstance(text, str):
        raise ValueError(f"duration must be a string, not {type(text).__name__}")
    s = text
    sign = -1 if s[:1] == "-" else 1
    s = s[1:] if s[:1] in "+-" and s else s
    if s == "0":
        return 0
    if not s:
        raise ValueError(f"invalid duration {quote(text)}")
    total, pos = 0, 0
    while pos < len(s):
        m = _TERM.match(s, pos)
        if m is None or (not m.group(1) and not m.group(2)):
            raise ValueError(f"invalid duration {quote(text)}")
        whole, frac, unit = m.group(1).lstrip("0"), m.group(2) or "", m.group(3)
        if unit not in _UNITS_NS:
            raise ValueError(f"unknown unit {quote(unit)} in duration {quote(text)}")
        if len(whole) > _MAX_DIGITS:
            raise ValueError(f"duration {quote(text)} is out of range")
        scale = _UNITS_NS[unit]
        frac = frac[:_MAX_DIGITS]  # digits beyond a nanosecond are truncated anyway
        total += int(whole or "0") * scale + (int(frac or "0") * scale) // 10 ** len(frac)
        if total > _MAX_NS:
            raise ValueError(f"duration {quote(text)} is out of range")
        pos = m.end()
    return sign * total


def parse_duration(text: str) -> float:
    """Parse a Go duration ("15s", "1m30s", "500ms", "1h") to float seconds."""
    return parse_duration_ns(text) / 1_000_000_000


def format_duration(seconds: float) -> str:
    """The shortest Go duration string that parses back to exactly `seconds`."""
    ns = round(Fraction(seconds) * 1_000_000_000)
    if ns == 0:
        return "0s"
    sign, ns = ("-" if ns < 0 else ""), abs(ns)
    hours, rest = divmod(ns, _UNITS_NS["h"])
    minutes, rest = divmod(rest, _UNITS_NS["m"])
    out = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    if rest:
        # Under a second (and nothing larger), the largest unit it reaches, as Go's
        # Duration.String: 1.5ms, not 1500us.
        unit = "s"
        if not out and rest < _UNITS_NS["s"]:
            unit = "ms" if rest >= _UNITS_NS["ms"] else "us" if rest >= _UNITS_NS["us"] else "ns"
        whole, frac = divmod(rest, _UNITS_NS[unit])
        places = len(str(_UNITS_NS[unit])) - 1  # ns: frac is 0, written "0" and stripped
        out += f"{whole}.{frac:0{places}d}".rstrip("0").rstrip(".") + unit
    return sign + out


def positive_duration(seconds: float) -> str | None:
    if seconds > 0:
        return None
    return f'must be greater than 0, got {quote(format_duration(seconds))}; use e.g. "10s"'


# --------------------------------------------------------------------------- names
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(rf"^{_LABEL}$")
_DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")


def namespace_name(value: str) -> str | None:
    """Empty or a DNS-1123 label, as a Kubernetes namespace name must be."""
    if value == "" or (len(value) <= 63 and _DNS1123_LABEL.match(value)):
        return None
    return (
        f"{quote(value)} is not a valid namespace name; use at most 63 lower-case letters, digits "
        "or '-', starting and ending with a letter or digit"
    )


def object_name(value: str) -> str | None:
    """A DNS-1123 subdomain, as the name of a Lease must be."""
    if 0 < len(value) <= 253 and _DNS1123_SUBDOMAIN.match(value):
        return None
    return (
        f"{quote(value)} is not a valid object name; use at most 253 lower-case letters, digits, "
        "'-' or '.', starting and ending with a letter or digit"
    )


def cert_dir(value: str) -> str | None:
    """Empty, or an absolute directory path (the pod's working directory is not ours)."""
    if value == "" or value.startswith("/"):
        return None
    return (
        f'{quote(value)} is not an absolute path; use e.g. "/etc/dynamo-pool-operator/metrics-tls"'
    )


def image_reference(value: str) -> str | None:
    if not value:
        return "must not be empty; set the relay's container image, e.g. registry/repo:tag"
    if any(ch.isspace() for ch in value):
        return f"{quote(value)} contains whitespace; an image reference has none"
    return None


# --------------------------------------------------------------------------- addresses
_PORT = re.compile(r"^[0-9]{1,5}$", re.ASCII)
_HOST = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$", re.ASCII)


def split_address(value: str) -> tuple[str, int]:
    """Split "host:port" like Go's net.SplitHostPort (IPv6 in brackets); ValueError if not."""
    host, colon, port = value.rpartition(":")
    if not colon:
        raise ValueError("missing ':port'")
    if host.startswith("[") and host.endswith("]"):
        ipaddress.IPv6Address(host[1:-1])  # raises ValueError when not an IPv6 address
        host = host[1:-1]
    elif ":" in host or "[" in host or "]" in host:
        raise ValueError("an IPv6 host must be written in brackets, e.g. [::1]:8080")
    elif host and not _HOST.match(host):
        raise ValueError(f"{quote(host)} is not a host name or IP address")
    if not _PORT.match(port) or int(port) > 65535:
        raise ValueError(f"port {quote(port)} is not a number from 0 to 65535")
    return host, int(port)


def listen_address(value: str) -> str | None:
    """A bind address "[host]:port" (empty host = all interfaces), or "0" to disable."""
    if value == "0":
        return None
    try:
        split_address(value)
    except ValueError as exc:
        return (
            f'{quote(value)} is not a listen address ({exc}); use ":8080", '
            '"127.0.0.1:8080", "[::1]:8080" or "0" to disable'
        )
    return None


# --------------------------------------------------------------------------- decoding
class ConfigurationError(Exception):
    """Everything wrong with one configuration, as one message (the CLI exits 2 on it)."""

    def __init__(self, errors: Sequence[FieldError], source: str = "<config>") -> None:
        self.errors = list(errors)
        self.source = source
        super().__init__(self.errors, source)

    def __str__(self) -> str:
        n = len(self.errors)
        head = f"invalid configuration in {self.source}: {n} problem{'' if n == 1 else 's'}"
        return "\n".join([head, *(f"  - {e}" for e in self.errors)])


def describe(value: object) -> str:
    """A value's YAML type and (short) value, for "must be X, got Y" messages."""
    for typ, name in ((bool, "boolean"), (str, "string"), (int, "integer"), (float, "number")):
        if isinstance(value, typ):
            text = quote(value)
            return f"{name} {text if len(text) <= 40 else text[:37] + '...'}"
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "a mapping"
    return "a list" if isinstance(value, list | tuple) else type(value).__name__


def _norm(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


def suggest(key: str, known: Iterable[str]) -> str | None:
    """The known name `key` was probably meant to be: same letters in another case first,
    else the closest spelling (difflib)."""
    by_norm = {_norm(k): k for k in known}
    if _norm(key) in by_norm:
        return by_norm[_norm(key)]
    close = difflib.get_close_matches(_norm(key), list(by_norm), n=1, cutoff=0.75)
    return by_norm[close[0]] if close else None


def check_unknown(
    raw: Mapping[Any, Any],
    known: Sequence[str],
    prefix: str,
    errors: list[FieldError],
    elsewhere: Mapping[str, str] | None = None,
) -> None:
    """Report every key of `raw` that is not in `known`; `elsewhere` maps names that are
    valid in another place to their full path ("mcsImplementation" at the top level)."""
    for key in raw:
        if isinstance(key, str) and key in known:
            continue
        name = '""' if key == "" else str(key)  # an empty name is still named
        path = f"{prefix}.{name}" if prefix else name
        if not isinstance(key, str):
            msg = f"field names must be strings, got {describe(key)}; quote the name"
        elif hint := suggest(key, known) or (elsewhere or {}).get(
            suggest(key, elsewhere or {}) or ""
        ):
            msg = f'unknown field (did you mean "{hint}"?)'
        else:
            msg = "unknown field; the fields here are " + ", ".join(known)
        errors.append(FieldError(path, msg))


_TYPE_HINTS = {
    "string": ("a string", "quote the value if it is meant as text"),
    "boolean": ("a boolean", "use true or false"),
    "integer": ("an integer", "write a whole number such as {default}"),
    "duration": ("a duration string", 'write a Go duration such as "{default}"'),
    "map": ("a map of strings", 'write keys and values as strings: {{"example.com/key": "value"}}'),
}


def decode_value(raw: object, spec: FieldSpec, default: Any) -> tuple[Any, str | None]:
    """(value, None) or (None, problem) for one leaf value from the file."""
    if spec.kind == "boolean":
        ok = isinstance(raw, bool)
    elif spec.kind == "integer":
        ok = isinstance(raw, int) and not isinstance(raw, bool)
    elif spec.kind == "map":
        ok = isinstance(raw, Mapping) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
        )
    else:
        ok = isinstance(raw, str)
    if not ok:
        what, hint = _TYPE_HINTS[spec.kind]
        shown = format_duration(default) if spec.kind == "duration" else default
        return None, f"must be {what}, got {describe(raw)}; {hint.format(default=shown)}"
    value: Any = raw
    if spec.kind == "duration":
        try:
            value = parse_duration(str(raw))
        except ValueError as exc:
            return None, f'{exc}; use a Go duration such as "15s", "1m30s" or "500ms"'
    if spec.choices and value not in spec.choices:
        return None, f"{quote(value)} is not supported; use one of " + ", ".join(
            quote(c) for c in spec.choices
        )
    problem = spec.check(value) if spec.check else None
    if problem:
        return None, problem
    if spec.kind == "map":
        return tuple(sorted(value.items())), None
    return (spec.enum(value) if spec.enum is not None else value), None


def decode_section(
    raw: object, prefix: str, cls: type[Any], errors: list[FieldError], bad: set[str]
) -> Any:
    """An instance of the section dataclass `cls` from `raw`; problems go to `errors`, the
    paths of fields left at their default by one to `bad`."""
    fields = dataclasses.fields(cls)
    if raw is None:
        return cls()
    if not isinstance(raw, Mapping):
        errors.append(FieldError(prefix, f"must be a mapping, got {describe(raw)}"))
        bad.update(f"{prefix}.{camel(f.name)}" for f in fields)
        return cls()
    check_unknown(raw, [camel(f.name) for f in fields], prefix, errors)
    values: dict[str, Any] = {}
    for f in fields:
        path, raw_value = f"{prefix}.{camel(f.name)}", raw.get(camel(f.name))
        if raw_value is None:  # absent or null: the default
            continue
        value, problem = decode_value(raw_value, spec_of(f), f.default)
        if problem:
            errors.append(FieldError(path, problem))
            bad.add(path)
        else:
            values[f.name] = value
    return cls(**values)
