"""`Alike`: one object for each distinct value of many equal ones, in a bounded table.

Cached objects hold many values equal across objects that the decoder hands out as
separate objects: keys, namespace names, the second a cold start stamped on every
object it created. Holding the table's one object instead saves the copies. Not
`sys.intern`: on some CPython builds an interned string is immortal, and a table that
is bounded never holds more than its limit, however many values a long-lived process
sees.
"""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Alike(Generic[T]):
    """Hands out one object for each distinct value, for up to `limit` values.

    At the limit, a table for values that settle (keys, namespace names: `renew`
    False) keeps what it holds and hands a new value back as it is; a table for values
    that move on with time (timestamps: `renew` True) starts over, so today's values
    are held, not those of the first `limit` seen."""

    __slots__ = ("limit", "renew", "table")

    def __init__(self, limit: int, *, renew: bool = False) -> None:
        self.limit = limit
        self.renew = renew
        self.table: dict[T, T] = {}

    def __call__(self, value: T) -> T:
        table = self.table
        try:
            held = table.get(value)
        except TypeError:  # not hashable: nothing to share it with
            return value
        if held is not None:
            return held
        if len(table) >= self.limit:
            if not self.renew:
                return value
            table.clear()
        table[value] = value
        return value

    def __len__(self) -> int:
        return len(self.table)

    def clear(self) -> None:
        self.table.clear()
