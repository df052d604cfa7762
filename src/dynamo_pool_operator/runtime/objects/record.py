"""`record`: the value types of the pure core, frozen where it is checked.

A frozen slots dataclass sets each field through `object.__setattr__`: ~40 µs of a
240 µs decision at 1,000 pools. A `record` assigns plainly, and `mypy --strict` treats
it as frozen, so no code may assign to a field (decision 0009). Equal records hash alike.
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
