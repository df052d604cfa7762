"""Whether a render is covered by a `Shape`: the view decides drift exactly only for a
body whose fields are all closed or open, and whose closed fields are the sample's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dynamo_pool_operator.runtime.objects.diff import Node, Shape, _Keyed, _tag, key_of, omitted


def uncovered(shape: Shape, body: Any) -> list[str]:
    """Fields of `body` that are neither closed nor open, and closed fields of the
    sample that `body` lacks (empty: the view decides `drifted` for `body` exactly)."""
    out: list[str] = []
    _check(body, shape.closed, "", "", shape, out)
    return out


def _exempt(shape: Shape, path: str) -> bool:
    """`path` is open, or lies under one that is."""
    return any(path == q or path.startswith(q + ".") for q in shape.open_paths)


def _check(value: Any, node: Node, path: str, at: str, shape: Shape, out: list[str]) -> None:
    """`out` += the fields of `value` outside the shape (and not open), and
    the shape's closed fields `value` lacks. `path` is dotted without list elements (as
    open paths are), `at` names list elements too (for the message)."""
    if node is None:
        # An empty string (or null) is compared as `contains` does: it matches a missing
        # field and no other value. An empty list or map would match any live one.
        if isinstance(value, list | dict) and not value:
            out.append(f"{at} (closed, empty)")
        return
    if isinstance(node, _Keyed):
        items = value if isinstance(value, list) else []
        tags = [_tag(k) for k in map(key_of, items) if k is not None]
        if len(tags) != len(items):
            out.append(f"{at} (an element without a key)")
        for tag, item in zip(tags, items, strict=False):
            if tag in node:
                _check(item, node[tag], path, f"{at}[{tag}]", shape, out)
            else:
                out.append(f"{at}[{tag}] (not in the shape)")
        out.extend(f"{at}[{tag}] (closed, missing)" for tag in node if tag not in tags)
        return
    if not isinstance(value, Mapping):
        out.append(f"{at} (closed, missing)")
        return
    for k, v in value.items():
        child, child_at = (f"{path}.{k}" if path else k), (f"{at}.{k}" if at else k)
        if k in node:
            _check(v, node[k], child, child_at, shape, out)
        elif not omitted(v) and not _exempt(shape, child):
            out.append(f"{child_at} (not in the shape)")
    out.extend(
        f"{at}.{k} (closed, missing)" if at else f"{k} (closed, missing)"
        for k in node
        if k not in value
    )
