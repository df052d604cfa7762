"""`record`: the value types of the pure core, frozen where it is checked.

A pass builds some fifty small values (its snapshot's parts, the plan's actions, the
ladder's steps, the report's lines). As `@dataclass(frozen=True, slots=True)` each
field of each was set through `object.__setattr__`: about 40 µs of a 240 µs fresh
decision at 1,000 pools. A `record` is the same dataclass with its fields assigned
plainly: `mypy --strict` (`make lint`) treats it as frozen, so no code of the project
may assign to a field, and at run time nothing pays for the guard. Equal records hash
alike, as frozen ones do (they are shared: module constants, tables of values read
alike), and copy and pickle as any slots dataclass (decision 0009).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, dataclass_transform

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True)
def record(cls: type[_T]) -> type[_T]:
    """A value type: `@dataclass(frozen=True, slots=True)` to the type checker, a slots
    dataclass with `__eq__` and `__hash__` over its fields at run time."""
    return dataclass(slots=True, unsafe_hash=True)(cls)
