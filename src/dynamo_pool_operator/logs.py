"""Structured logs: JSON in a pod, readable text in a terminal (and always for `dev`).

Every log line about an object names it: call sites pass `extra={"namespace":
..., "object": ...}` and both formats print those fields. (Not "name": that is a
reserved LogRecord attribute, and logging refuses to overwrite it.)

Fields of a context (`context(cluster="east")`) are on every line logged in it, by any
task it starts: `dev --clusters 2` runs an operator per cluster in one process, and
their lines interleave.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

#: Attributes every LogRecord has; anything else came in through `extra=`.
_STANDARD = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}

#: The fields of the current context's lines (`context`).
_FIELDS: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "log_fields", default=None
)
#: Where a record keeps the names of its context's fields, which print first.
_CONTEXT_KEYS = "_context_keys"


def context(**fields: str) -> contextvars.Context:
    """A copy of the current context whose lines carry `fields` too: run a task in it
    (`asyncio.create_task(coro, context=logs.context(cluster="east"))`) and every line of
    that task and of the tasks and threads it starts carries them."""
    ctx = contextvars.copy_context()
    ctx.run(_FIELDS.set, {**(_FIELDS.get() or {}), **fields})
    return ctx


class ContextFields(logging.Filter):
    """Puts the context's fields on each record (a call site's own `extra=` wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = _FIELDS.get()
        if fields:
            for k, v in fields.items():
                if not hasattr(record, k):
                    setattr(record, k, v)
            setattr(record, _CONTEXT_KEYS, tuple(fields))
        return True


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    first = getattr(record, _CONTEXT_KEYS, ())
    extras = {k: getattr(record, k) for k in first}
    extras.update(
        (k, v) for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")
    )
    return extras


class JSONFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, the extras, and the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **_extras(record),
        }
        if record.exc_info:
            doc["error"] = self.formatException(record.exc_info)
        try:
            return orjson.dumps(doc, default=str).decode()
        except TypeError:  # a lone surrogate (no UTF-8 for it): escaped, not lost
            return json.dumps(doc, default=str)


def _utf8(text: str) -> str:
    """`text` with what UTF-8 cannot hold (a lone surrogate) escaped: the stream writes
    UTF-8, and a line it cannot encode is lost."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _value(value: object) -> str:
    """A field's value as one word: quoted (JSON) when it has a space, quote or `=`."""
    text = _utf8(str(value))
    if not text or any(c in text for c in ' "=\t\n'):
        return orjson.dumps(text).decode()
    return text


class ConsoleFormatter(logging.Formatter):
    """`time level logger message key=value ...`, for people at a terminal: the time of
    day to the millisecond, the level padded so messages line up, the extras as
    `key=value` words."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created).strftime("%H:%M:%S.%f")[:-3]
        words = [when, f"{record.levelname:<7}", record.name, _utf8(record.getMessage())]
        words += [f"{k}={_value(v)}" for k, v in _extras(record).items()]
        line = " ".join(words)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


#: `logging.format` values.
AUTO, JSON, CONSOLE = "auto", "json", "console"
#: Earlier names of a format, still accepted.
FORMAT_ALIASES = {"text": CONSOLE}


def resolve(fmt: str, *, terminal: bool) -> str:
    """The format in effect: `auto` is console when stderr is a terminal (a person runs
    it), JSON otherwise (a pod, a pipe)."""
    fmt = FORMAT_ALIASES.get(fmt, fmt)
    if fmt == AUTO:
        return CONSOLE if terminal else JSON
    return fmt


def for_people(fmt: str) -> str:
    """The format of a command a person runs (`dev`): `auto` is console lines whether
    stderr is a terminal or a pipe (`make dev | tee dev.log`); a format named is kept."""
    fmt = FORMAT_ALIASES.get(fmt, fmt)
    return CONSOLE if fmt == AUTO else fmt


def setup(level: str = "info", fmt: str = AUTO) -> None:
    """Configure the root logger once, for the whole process."""
    fmt = resolve(fmt, terminal=sys.stderr.isatty())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if fmt == JSON else ConsoleFormatter())
    handler.addFilter(ContextFields())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiohttp's access log and asyncio's debug chatter are not ours to print.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
