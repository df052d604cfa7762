"""`Alike`: the bounded tables that make equal values one object."""

from __future__ import annotations

from dynamo_pool_operator.runtime.cache.sharing import Alike


def _fresh(value: str) -> str:
    """An equal string that is no other string object."""
    return "".join(list(value))


def test_an_equal_value_is_handed_the_first_one() -> None:
    alike: Alike[str] = Alike(4)
    first = _fresh("team-a")
    assert alike(first) is first
    assert alike(_fresh("team-a")) is first


def test_a_settling_table_keeps_what_it_holds_past_its_limit() -> None:
    """Keys and namespace names: a process that sees new ones for months holds at
    most `limit`, the first ones."""
    alike: Alike[str] = Alike(2)
    first, second, third = _fresh("team-a"), _fresh("team-b"), _fresh("team-c")
    alike(first)
    alike(second)
    assert alike(third) is third
    assert alike(_fresh("team-c")) is not third  # past the limit: not held
    assert alike(_fresh("team-a")) is first
    assert len(alike) == 2


def test_a_renewing_table_starts_over_at_its_limit() -> None:
    """Timestamps move on: once full, the table holds the newest, not the first."""
    alike: Alike[str] = Alike(2, renew=True)
    first, second, third = _fresh("10:00:00"), _fresh("10:00:01"), _fresh("10:00:02")
    alike(first)
    alike(second)
    assert alike(third) is third
    assert alike(_fresh("10:00:02")) is third
    assert alike(_fresh("10:00:00")) is not first  # forgotten when it started over
    assert len(alike) <= 2


def test_a_value_that_cannot_be_hashed_is_handed_back_as_it_is() -> None:
    alike: Alike[object] = Alike(2)
    value = ["not", "hashable"]
    assert alike(value) is value
    assert len(alike) == 0
