"""`record` (runtime/objects/record.py): the pure core's value types, frozen where it is
checked (`mypy --strict`), plain slots dataclasses at run time."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import textwrap
from pathlib import Path

from mypy import api as mypy_api

from dynamo_pool_operator.runtime.objects import record


@record
class Point:
    x: int
    y: str = ""
    tags: tuple[str, ...] = dataclasses.field(default=())


def test_equal_records_are_equal_and_hash_alike() -> None:
    """They are shared (module constants, tables of values read alike): as frozen
    dataclasses, equal values are one key."""
    a, b = Point(1, "a", ("t",)), Point(1, "a", ("t",))
    assert a == b
    assert a is not b
    assert hash(a) == hash(b)
    assert {a: 1}[b] == 1
    assert Point(1) != Point(2)
    assert dataclasses.replace(a, x=2) == Point(2, "a", ("t",))
    assert not hasattr(a, "__dict__")  # slots: no map of its own


def test_a_record_copies_and_pickles() -> None:
    p = Point(3, "z", ("q",))
    assert pickle.loads(pickle.dumps(p)) == p
    assert copy.deepcopy(p) == p


def test_the_type_checker_refuses_an_assignment_to_a_field(tmp_path: Path) -> None:
    """The guard a frozen dataclass kept at run time is the type checker's (`make
    lint` runs `mypy --strict` on every module)."""
    source = tmp_path / "assigns.py"
    source.write_text(
        textwrap.dedent(
            """
            from dynamo_pool_operator.runtime.objects import record

            @record
            class P:
                x: int

            p = P(1)
            p.x = 2
            """
        )
    )
    out, _, status = mypy_api.run(
        ["--strict", "--no-incremental", "--follow-imports=silent", str(source)]
    )
    assert status == 1, out
    assert 'Property "x" defined in "P" is read-only' in out
