"""The README's samples are what is printed: `kubectl get dynamopoolrelays -A` for our
CRD, and the end of `make dev CLUSTERS=2`.

`kubectl get dynamopoolrelays -A`: the README's sample is what kubectl prints for our CRD.

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
from dynamo_pool_operator.api.conditions import ReadyReason
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.discover.find import Discovered, Endpoint, Imported, Pool

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


#: Every sample of `kubectl get` on relays in the user docs, outside the README's.
DOCS = Path(__file__).resolve().parents[3] / "docs"
TABLE_COMMAND = re.compile(r"^\$ kubectl get (?:dpr|dynamopoolrelays)\b(?P<args>.*)$")


def doc_samples() -> list[tuple[str, str, list[str]]]:
    """(where, command, the table's lines) of each relay table a doc prints."""
    out = []
    for path in sorted(DOCS.glob("*.md")):
        lines = path.read_text().splitlines()
        for at, line in enumerate(lines):
            if TABLE_COMMAND.match(line):
                table = []
                for following in lines[at + 1 :]:
                    if following.startswith(("$", "```")):
                        break
                    table.append(following)
                out.append((f"{path.name}:{at + 1}", line, table))
    return out


def test_every_relay_table_in_the_docs_has_the_crds_columns_and_a_ready_row() -> None:
    """A table the docs show is what kubectl prints today: the CRD's columns, lined up,
    and a Ready row says Ready's own reason."""
    samples = doc_samples()
    assert samples, "the quickstart shows the relay table"
    shown = [c["name"].upper() for c in crd.printer_columns() if not c.get("priority")]
    for where, command, (header, *rows) in samples:
        every = " -A" in command or "--all-namespaces" in command
        expected = ["NAMESPACE", "NAME", *shown] if every else ["NAME", *shown]
        assert [text for _, text in cells(header)] == expected, where
        for row in rows:
            heads, values = cells(header), cells(row)
            assert [at for at, _ in values] == [at for at, _ in heads], f"{where}: not aligned"
            got = {name: value for (_, name), (_, value) in zip(heads, values, strict=True)}
            if got["READY"] == "True":
                assert got["REASON"] == ReadyReason.READY, where


def _west_sample() -> list[str]:
    """The lines of the README's `make dev CLUSTERS=2` sample, from "As west sees it" to
    the end of its block."""
    lines = README.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("As west sees it"))
    return lines[at : lines.index("```", at)]


def test_the_readme_two_cluster_sample_is_what_dev_prints() -> None:
    """dev's closing table for the pool of the sample's addresses (east's two relay pods,
    its frontend's ClusterIP), line for line."""
    relay = Imported(
        "llama-pool-relay", (Endpoint("10.244.0.4", True), Endpoint("10.244.0.5", True))
    )
    frontend = Imported("llama-frontend", (Endpoint("10.96.234.89", True),))
    east, west = dev.TWO_CLUSTERS
    found = Discovered((Pool(east, dev.NAMESPACE, dev.POOL, relay, (frontend,)),))
    assert _west_sample() == dev.as_seen_from(found, west)
