"""An instant-query evaluator for the part of PromQL that gauge alerts use.

No Prometheus runs here, yet an alert's expression must be judged on what the
operator's replicas really expose, not only parsed. This evaluates an expression
parsed by promql-parser over one scrape of every target: vector selectors (every
matcher), `sum`/`max`/`min`/`count` (with `by`/`without`), comparisons with a number
(filtering, or with `bool`), `or`, parentheses and `vector(n)`, with PromQL's
semantics. Anything else (a range vector: `rate`, `histogram_quantile`) raises
`Unsupported`, so a rule this cannot judge fails the test instead of passing it.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import promql_parser as pp

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Sample:
    labels: Labels  # sorted, `__name__` included while the sample still has one
    value: float

    def label(self, name: str) -> str:
        return dict(self.labels).get(name, "")


class Unsupported(Exception):
    """The expression uses PromQL this evaluator does not implement."""


def sample(name: str, labels: Mapping[str, str], value: float) -> Sample:
    return Sample(tuple(sorted({**labels, "__name__": name}.items())), value)


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
    ">=": operator.ge,
    "<=": operator.le,
}
_AGGREGATE: dict[str, Callable[[list[float]], float]] = {
    "sum": sum,
    "max": max,
    "min": min,
    "count": len,
}


def evaluate(expr: str, samples: Iterable[Sample]) -> list[Sample] | float:
    """The value of `expr` at the instant of `samples`: an instant vector or a scalar."""
    return _eval(pp.parse(expr), list(samples))


def _drop_name(labels: Labels) -> Labels:
    return tuple(kv for kv in labels if kv[0] != "__name__")


def _matches(m: Any, value: str) -> bool:
    op = str(m.op)
    if op == "MatchOp.Equal":
        return bool(value == m.value)
    if op == "MatchOp.NotEqual":
        return bool(value != m.value)
    full = re.fullmatch(m.value, value) is not None  # PromQL regexes are anchored
    if op == "MatchOp.Re":
        return full
    if op == "MatchOp.NotRe":
        return not full
    raise Unsupported(f"matcher {op}")


def _eval(node: Any, samples: list[Sample]) -> list[Sample] | float:
    if isinstance(node, pp.NumberLiteral):
        return float(node.val)
    if isinstance(node, pp.ParenExpr):
        return _eval(node.expr, samples)
    if isinstance(node, pp.VectorSelector):
        if node.offset is not None or node.at is not None or node.matchers.or_matchers:
            raise Unsupported(f"selector modifiers in {node}")
        matchers = list(node.matchers.matchers)
        return [
            s
            for s in samples
            if (not node.name or s.label("__name__") == node.name)
            and all(_matches(m, s.label(m.name)) for m in matchers)
        ]
    if isinstance(node, pp.Call):
        if node.func.name == "vector" and len(node.args) == 1:
            value = _eval(node.args[0], samples)
            if isinstance(value, float):
                return [Sample((), value)]
        raise Unsupported(f"function {node.func.name}")
    if isinstance(node, pp.AggregateExpr):
        return _aggregate(node, samples)
    if isinstance(node, pp.BinaryExpr):
        return _binary(node, samples)
    raise Unsupported(type(node).__name__)


def _aggregate(node: Any, samples: list[Sample]) -> list[Sample]:
    fold = _AGGREGATE.get(str(node.op))
    if fold is None or node.param is not None:
        raise Unsupported(f"aggregation {node.op}")
    vector = _eval(node.expr, samples)
    if isinstance(vector, float):
        raise Unsupported("aggregation of a scalar")
    groups: dict[Labels, list[float]] = {}
    for s in vector:
        labels = _drop_name(s.labels)
        if node.modifier is not None:
            names = set(node.modifier.labels)
            keep = str(node.modifier.type) == "AggModifierType.By"
            labels = tuple(kv for kv in labels if (kv[0] in names) == keep)
        elif labels:
            labels = ()
        groups.setdefault(labels, []).append(s.value)
    return [Sample(labels, float(fold(values))) for labels, values in groups.items()]


def _binary(node: Any, samples: list[Sample]) -> list[Sample] | float:
    op = str(node.op)
    lhs, rhs = _eval(node.lhs, samples), _eval(node.rhs, samples)
    modifier = node.modifier
    if op == "or":
        if isinstance(lhs, float) or isinstance(rhs, float):
            raise Unsupported("`or` with a scalar")
        if modifier is not None and modifier.matching is not None:
            raise Unsupported("`or` with on/ignoring")
        seen = {_drop_name(s.labels) for s in lhs}
        return lhs + [s for s in rhs if _drop_name(s.labels) not in seen]
    compare = _COMPARE.get(op)
    if compare is None:
        raise Unsupported(f"operator {op}")
    as_bool = modifier is not None and modifier.return_bool
    if isinstance(lhs, float) and isinstance(rhs, float):
        if not as_bool:
            raise Unsupported("comparison of two scalars needs bool")
        return float(compare(lhs, rhs))
    if not isinstance(lhs, float) and not isinstance(rhs, float):
        raise Unsupported("vector-to-vector comparison")
    vector, number, flip = (lhs, rhs, False) if isinstance(rhs, float) else (rhs, lhs, True)
    assert isinstance(vector, list)
    assert isinstance(number, float)
    out = []
    for s in vector:
        holds = compare(number, s.value) if flip else compare(s.value, number)
        if as_bool:
            out.append(Sample(_drop_name(s.labels), float(holds)))
        elif holds:
            out.append(s)
    return out
