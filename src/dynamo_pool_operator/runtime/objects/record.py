"""`record`: the value types of the pure core, frozen where it is checked.

A pass builds some fifty small values (its snapshot's parts, the plan's actions, the
ladder's steps, the report's lines). As `@dataclass(frozen=True, slots=True)` each
field of each was set through `object.__setattr__`: about 40 µs of a 240 µs fresh
decision at 1,000 pools. A `record` is the same dataclass with its fields assigned
plainly: `mypy --strict` (`make lint`) treats it as frozen, so no code of the project
may assign to a field, and at run time nothing pays for the guard. Equal records hash
alike, as frozen ones do (they are shared: module constants, tables of values read
alike), and pickle alike (decision 0009).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, TypeVar, dataclass_transform

_T = TypeVar("_T")


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in fields(self)]


def _setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(fields(self), state, strict=True):
        object.__setattr__(self, f.name, value)


@dataclass_transform(frozen_default=True)
def record(cls: type[_T]) -> type[_T]:
    """A value type: `@dataclass(frozen=True, slots=True)` to the type checker, a slots
    dataclass with `__eq__` and `__hash__` over its fields at run time."""
    made: type[_T] = dataclass(slots=True, unsafe_hash=True)(cls)
    # A slots dataclass pickles its fields as a frozen one does (a list of values).
    setattr(made, "__getstate__", _getstate)  # noqa: B010 - a class attribute
    setattr(made, "__setstate__", _setstate)  # noqa: B010
    return made
