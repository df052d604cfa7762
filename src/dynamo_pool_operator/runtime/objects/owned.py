"""Drift detection from a digest: what a cache keeps of an object we own.

`diff.needs_apply` asks whether every field we render is in the live object with the
same value. Answering that from a whole cached object costs memory: a relay
Deployment decodes to ~13 kB of Python objects, most of it the pod template and the
server's defaults in it, for a question about a few dozen fields. So the cache keeps
a *view* of each owned object instead (`Shape.view`, run by the informer's
transform): a digest of the fields we render, and a few fields verbatim.

A `Shape` is made from a rendered sample. It splits what a render holds into:

- **closed** fields: present, non-empty, in every render, at paths that do not depend
  on the input (keys of maps and of keyed lists: container `relay`, the env names, the
  port name). The view keeps a digest of the live object's values at exactly those
  paths, the server's defaults and other managers' additions left out; the render's
  own digest at the same paths equals it exactly when `contains` finds every closed
  field in the live object;
- **open** fields: paths whose keys vary with the input or that a render may leave
  out (owner references keyed by uid, pod labels and annotations, node selector,
  tolerations, a container's `resources`, a Service's `clusterIP`). The view keeps
  them verbatim (under a keyed list, those of the shape's elements, one entry each:
  `spec.containers[name=relay].resources`) and they are compared with `contains`, as
  before: another manager's key next to ours there (the `restartedAt` of `kubectl
  rollout restart`) is no drift. Quantities among them are compared by value
  (`contains(quantities=...)`): the server keeps their canonical form.

Equal digests mean `contains` holds for the closed fields; the open fields are
checked by `contains` itself, so `Shape.drifted(view, body)` is
`not contains(live, body, quantities=quantities)` for every render whose closed
fields are the sample's (`uncovered` names any that are not; the tests render every
kind of relay against it).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping
from typing import Any

import orjson

from dynamo_pool_operator.runtime.objects.diff import contains, key_of, omitted

#: Where a trimmed cached object keeps its view (not a Kubernetes field name).
VIEW = "owned"
#: A node of the closed shape: a map of keys to nodes, a keyed list (`_Keyed`), or
#: None for a value compared whole (a scalar, a list of scalars).
Node = Any
_ABSENT = object()


class _Keyed(dict[str, Node]):
    """A keyed list's shape: `name=relay` -> the element's shape."""


def _tag(key: tuple[str, Any]) -> str:
    return f"{key[0]}={key[1]}"


def _shape(value: Any, path: str, open_paths: frozenset[str]) -> Node:
    if isinstance(value, Mapping):
        node: dict[str, Node] = {}
        for k, v in value.items():
            child = f"{path}.{k}" if path else k
            if child in open_paths or omitted(v):
                continue
            node[k] = _shape(v, child, open_paths)
        return node
    if isinstance(value, list) and value and all(key_of(v) is not None for v in value):
        keyed = _Keyed()
        for v in value:
            keyed[_tag(key_of(v))] = _shape(v, path, open_paths)  # type: ignore[arg-type]
        return keyed
    if isinstance(value, list) and any(isinstance(v, Mapping) for v in value):
        raise ValueError(
            f"{path}: a list of objects without keys is compared whole; declare it open"
        )
    return None


def _empty(value: Any) -> bool:
    """`diff.omitted`, by exact type first (this runs for every field of every event)."""
    t = type(value)
    if t is str or t is list or t is dict:
        return not value
    return value is None or omitted(value)


def _project(value: Any, node: Node) -> Any:
    """`value` at the shape's paths only, empty values left out (`_ABSENT` if nothing).
    Runs in the informer for every event of a relay object: exact types first."""
    if _empty(value):
        return _ABSENT
    if node is None:
        return value
    if type(node) is _Keyed:
        if type(value) is not list:
            return value  # another type than rendered: kept, so it differs
        items: dict[str, Any] = {}
        for item in value:
            key = key_of(item)
            if key is None:
                continue
            sub = node.get(_tag(key), _ABSENT)
            if sub is _ABSENT:
                continue  # another manager's element (an injected sidecar, say)
            projected = _project(item, sub)
            if projected is not _ABSENT:
                items[_tag(key)] = projected
        return items or _ABSENT
    if type(value) is not dict and not isinstance(value, Mapping):
        return value
    out = {}
    for k, sub in node.items():
        v = value.get(k, _ABSENT)
        if v is _ABSENT:
            continue
        if sub is None:  # a leaf, without the call
            if not _empty(v):
                out[k] = v
            continue
        projected = _project(v, sub)
        if projected is not _ABSENT:
            out[k] = projected
    return out or _ABSENT


def _open(value: Any, parts: tuple[str, ...], node: Node, at: str, out: dict[str, Any]) -> None:
    """`out[at]` = the value at an open path (`parts` of it still to walk) in `value`,
    for each place it is: through maps, and through keyed lists element by element
    (only the elements of the shape, where it has the list), `at` naming them."""
    if not parts:
        out[sys.intern(at)] = value  # one copy per place, not one per cached object
        return
    if type(value) is list:
        for item in value:
            key = key_of(item)
            if key is None:
                continue
            tag = _tag(key)
            if type(node) is _Keyed:
                if tag not in node:
                    continue  # another manager's element (an injected sidecar, say)
                _open(item, parts, node[tag], f"{at}[{tag}]", out)
            else:
                _open(item, parts, None, f"{at}[{tag}]", out)
        return
    if not isinstance(value, Mapping) or parts[0] not in value:
        return
    sub = node.get(parts[0]) if type(node) is dict else None
    _open(value[parts[0]], parts[1:], sub, f"{at}.{parts[0]}" if at else parts[0], out)


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
        elif not omitted(v) and not shape.exempt(child):
            out.append(f"{child_at} (not in the shape)")
    out.extend(
        f"{at}.{k} (closed, missing)" if at else f"{k} (closed, missing)"
        for k in node
        if k not in value
    )


class Shape:
    """The closed and open fields of one kind of rendered object."""

    def __init__(
        self,
        sample: Mapping[str, Any],
        *,
        open_paths: frozenset[str],
        quantities: frozenset[str] = frozenset(),
    ) -> None:
        self.open_paths = open_paths
        self.quantities = quantities
        self.closed: Node = _shape(sample, "", open_paths)
        self._split = {p: tuple(p.split(".")) for p in open_paths}
        # The digest of each rendered body, by its render hash: a body is rendered again
        # on every pass, its digest need not be (~200 bytes an entry, bounded).
        self._bodies: dict[str, str] = {}

    def digest(self, obj: Mapping[str, Any]) -> str:
        projected = _project(obj, self.closed)
        data = orjson.dumps(
            None if projected is _ABSENT else projected, option=orjson.OPT_SORT_KEYS
        )
        return hashlib.blake2b(data, digest_size=8).hexdigest()

    def _open_values(self, obj: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
        """Each open value of `obj` by where it is, with its open path."""
        out: dict[str, tuple[str, Any]] = {}
        for path, parts in self._split.items():
            found: dict[str, Any] = {}
            _open(obj, parts, self.closed, "", found)
            out.update((at, (path, v)) for at, v in found.items())
        return out

    def open_values(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return {at: v for at, (_, v) in self._open_values(obj).items()}

    def view(self, live: Mapping[str, Any]) -> dict[str, Any]:
        """What a cache keeps of a live object for `drifted`."""
        return {"digest": self.digest(live), "open": self.open_values(live)}

    def exempt(self, path: str) -> bool:
        """`path` is open, or lies under one that is."""
        return any(path == q or path.startswith(q + ".") for q in self.open_paths)

    def uncovered(self, body: Mapping[str, Any]) -> list[str]:
        """Fields of `body` that are neither closed nor open, and closed fields of the
        sample that `body` lacks: for either, a digest says nothing (empty: the view
        decides `drifted` for `body` exactly)."""
        out: list[str] = []
        _check(body, self.closed, "", "", self, out)
        return out

    def drifted(
        self, view: Mapping[str, Any], body: Mapping[str, Any], render_hash: str | None
    ) -> bool:
        """`not contains(live, body, quantities=quantities)`, from the live object's view."""
        digest = self._bodies.get(render_hash) if render_hash else None
        if digest is None:
            digest = self.digest(body)
            if render_hash:
                if len(self._bodies) >= 16384:
                    self._bodies.clear()  # bounded: a fleet's worth, then start over
                self._bodies[render_hash] = digest
        if view.get("digest") != digest:
            return True
        live_open = view.get("open") or {}
        for at, (path, value) in self._open_values(body).items():
            if at in live_open:
                if not contains(live_open[at], value, quantities=self.quantities, path=path):
                    return True
            elif not omitted(value):
                return True
        return False
