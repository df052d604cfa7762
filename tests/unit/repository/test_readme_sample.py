"""The README's `kubectl get dynamopoolrelays -A` sample is what kubectl prints for our CRD.

kubectl shows the printer columns of priority 0 (the others only with `-o wide`), names
upper-cased, after NAMESPACE and NAME with `-A`, each column starting where its header
does. The row is `make dev`'s pool once it is Ready: its namespace, name and cluster ID,
Ready's reason when every part is True, and all of the default relay replicas available.
"""

from __future__ import annotations

import re
from pathlib import Path

from dynamo_pool_operator import dev
from dynamo_pool_operator.api import crd
from dynamo_pool_operator.api.status import ReadyReason
from dynamo_pool_operator.config import OperatorConfiguration

README = Path(__file__).resolve().parents[3] / "README.md"
COMMAND = "$ kubectl get dynamopoolrelays -A"


def sample() -> tuple[str, str]:
    """The header and row lines printed under the command in the README."""
    lines = README.read_text().splitlines()
    at = lines.index(COMMAND)
    header, row, end = lines[at + 1 : at + 4]
    assert end == "```", f"the sample has one row: {end!r}"
    return header, row


def cells(line: str) -> list[tuple[int, str]]:
    """(offset, text) of each column of a kubectl table line."""
    return [(m.start(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", line)]


def test_the_readme_sample_has_the_crds_columns() -> None:
    header, _ = sample()
    shown = [c["name"].upper() for c in crd.printer_columns() if not c.get("priority")]
    assert [text for _, text in cells(header)] == ["NAMESPACE", "NAME", *shown]


def test_the_readme_sample_row_is_the_dev_pool_ready_and_aligned() -> None:
    header, row = sample()
    heads, values = cells(header), cells(row)
    assert [at for at, _ in values] == [at for at, _ in heads], "columns do not line up"
    got = {name: value for (_, name), (_, value) in zip(heads, values, strict=True)}
    replicas = OperatorConfiguration().pool_relay.replicas
    age = got.pop("AGE")
    assert re.fullmatch(r"\d+[smhd]", age), age
    assert got == {
        "NAMESPACE": dev.NAMESPACE,
        "NAME": dev.POOL,
        "READY": "True",
        "REASON": ReadyReason.READY,
        "AVAILABLE": f"{replicas}/{replicas}",
        "EXPORTED": "True",
        "CLUSTER": dev.CLUSTER_ID,
    }
