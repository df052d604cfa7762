"""Lists and watch events that hold an object nobody can decode.

The API server stores what its schema allows, and a field a CRD preserves may nest
deeper than any decoder follows (orjson stops at 1,024 levels). Decoded whole, one such
object fails the page or the watch line it is in: every list of that kind fails, every
relist meets it again, and the informer never syncs, for every namespace at once.

So a page or an event that does not decode is taken apart without being decoded: a
scan over its bytes (strings skipped whole, brackets counted) finds each list item's
span, and each item is decoded on its own. An item that still fails is *skimmed*:
every container nested deeper than `SKIM_DEPTH` is replaced by `null`, which leaves
its metadata readable, so it can be named in the log, counted, and kept out of the
cache by its key. No object is ever made up from the skimmed copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

#: Nesting kept when skimming an object for its metadata (metadata's own maps are at
#: depth 3 or 4 in a watch event).
SKIM_DEPTH = 8

# A JSON string (escapes included) or one structural character; everything between
# tokens (numbers, literals, whitespace) is skipped by the search.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{},:]', re.DOTALL)
_OPEN = frozenset(b"[{")
_CLOSE = frozenset(b"]}")


@dataclass(frozen=True, slots=True)
class Undecodable:
    """An object the decoder refused, named by what its skimmed copy shows."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    error: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{where or '(unnamed)'} at resourceVersion {self.resource_version or '?'}"


@dataclass(slots=True)
class Page:
    """A list page: its own fields (metadata), the items that decoded, and the others."""

    meta: dict[str, Any]
    items: list[dict[str, Any]]
    undecodable: list[Undecodable] = field(default_factory=list)


def skim(raw: bytes, depth: int = SKIM_DEPTH) -> bytes:
    """`raw` with every container nested deeper than `depth` replaced by `null`."""
    out: list[bytes] = []
    last = 0
    level = 0
    cut = -1
    for m in _TOKEN.finditer(raw):
        c = raw[m.start()]
        if c in _OPEN:
            level += 1
            if level == depth + 1 and cut < 0:
                cut = m.start()
        elif c in _CLOSE:
            if level == depth + 1 and cut >= 0:
                out += (raw[last:cut], b"null")
                last, cut = m.end(), -1
            level -= 1
    out.append(raw[last:])
    return b"".join(out)


def named(raw: bytes, error: Exception, *, wrapped: bool = False) -> Undecodable:
    """Name an undecodable object (`wrapped`: a watch event around it) from its skim."""
    try:
        obj = orjson.loads(skim(raw))
        if wrapped:
            obj = obj.get("object")
        meta = (obj or {}).get("metadata") or {}
    except (orjson.JSONDecodeError, AttributeError):
        meta = {}
    if not isinstance(meta, dict):
        meta = {}
    return Undecodable(
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
        str(meta.get("resourceVersion") or ""),
        str(error),
    )


def _item_spans(raw: bytes) -> tuple[int, int, list[tuple[int, int]]] | None:
    """Where the top-level `items` array opens and closes, and each item's span."""
    level = 0
    key = b""
    opened = -1
    start = -1
    spans: list[tuple[int, int]] = []
    for m in _TOKEN.finditer(raw):
        c = raw[m.start()]
        if c == 0x22:  # a string: at the top level, the last one before `[` is its key
            if level == 1:
                key = m.group()
            continue
        if c in _OPEN:
            level += 1
            if level == 2 and opened < 0 and c == 0x5B and key == b'"items"':
                opened = start = m.end()
        elif c in _CLOSE:
            if level == 2 and opened >= 0 and start >= 0 and c == 0x5D:
                if raw[start : m.start()].strip():
                    spans.append((start, m.start()))
                return opened - 1, m.end(), spans
            level -= 1
        elif c == 0x2C and level == 2 and opened >= 0 and start >= 0:
            spans.append((start, m.start()))
            start = m.end()
    return None


def decode_page(raw: bytes) -> Page:
    """A list page, item by item when the whole does not decode."""
    try:
        page = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        found = _item_spans(raw)
        if found is None:
            raise
        opened, closed, spans = found
        page = orjson.loads(raw[:opened] + b"[]" + raw[closed:])
        result = Page(page.get("metadata") or {}, [])
        for start, end in spans:
            item = raw[start:end]
            try:
                result.items.append(orjson.loads(item))
            except orjson.JSONDecodeError as bad:
                result.undecodable.append(named(item, bad))
        if not result.undecodable:
            raise e  # not an item's fault: the page itself is broken
        return result
    if not isinstance(page, dict):
        raise ValueError(f"a list answered with {type(page).__name__}, not an object")
    items = page.pop("items", None) or []
    return Page(page.get("metadata") or {}, items)
