"""Write the generated documentation from the code it describes.

- docs/configuration.md, whole, from the configuration loader;
- docs/crd.md, the sections between `<!-- BEGIN GENERATED: name -->` and
  `<!-- END GENERATED: name -->`: `conditions`, every reason of each condition `Ready`
  summarizes (`api/conditions.py`); `precedence`, the withdrawal reasons (`Published`) in
  the order of the relay's check chain.
- docs/events.md, the section `events`: every Event reason, from their home
  (`api/event_reasons.py`).

Run: tools/uv run python tools/generate_docs.py
(tests/unit/repository/test_docs_drift.py checks it)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from dynamo_pool_operator.api.conditions import (
    IMPLEMENTATION_REASON_MEANING,
    MEANINGS,
    READY_PARTS,
    ConditionType,
)
from dynamo_pool_operator.api.event_reasons import (
    CONDITION_CHANGED,
    CONDITION_CHANGED_REASON,
    EVENTS,
    NOTED_TRANSITIONS,
    Event,
)
from dynamo_pool_operator.config import configuration_reference
from dynamo_pool_operator.pool.plan import precedence_table

ROOT = Path(__file__).resolve().parents[1]


def conditions_tables() -> str:
    """Every condition `Ready` summarizes but `Published` (whose reasons are the check
    chain's precedence table), each with every reason the code can give."""
    out = []
    for type_ in READY_PARTS:
        if type_ is ConditionType.PUBLISHED:
            continue
        out.append(f"### {type_}\n\n| Reason | Meaning |\n|---|---|\n")
        out += [f"| `{reason}` | {text} |\n" for reason, text in MEANINGS[type_].items()]
        if type_ is ConditionType.EXPORTED:
            out.append(f"| any other | {IMPLEMENTATION_REASON_MEANING} |\n")
        out.append("\n")
    return "".join(out).rstrip("\n") + "\n"


#: docs/crd.md's generated sections, by name.
CRD_SECTIONS: dict[str, Callable[[], str]] = {
    "conditions": conditions_tables,
    "precedence": precedence_table,
}


def _row(reason: str, event: Event) -> str:
    cells = (event.type, reason, event.action, event.related, event.when, event.what_to_do)
    return "| " + " | ".join(cell or "—" for cell in cells) + " |\n"


def events_table() -> str:
    """Every Event the operator records: its own reasons, then a condition's transition
    (whose reason is the condition's) and the transitions with a row of their own."""
    out = [
        "| Type | Reason | Action | Related | When | What to do |\n",
        "|---|---|---|---|---|---|\n",
    ]
    out += [_row(f"`{reason}`", event) for reason, event in EVENTS.items()]
    out.append(_row(CONDITION_CHANGED_REASON, CONDITION_CHANGED))
    out += [_row(f"`{reason}`", event) for reason, event in NOTED_TRANSITIONS.items()]
    return "".join(out)


#: docs/events.md's generated sections, by name.
EVENTS_SECTIONS: dict[str, Callable[[], str]] = {"events": events_table}


def events_doc() -> str:
    return with_sections((ROOT / "docs" / "events.md").read_text(), EVENTS_SECTIONS)


def configuration_doc() -> str:
    return configuration_reference()


def with_sections(text: str, sections: dict[str, Callable[[], str]]) -> str:
    """`text` with each generated section's body replaced by what its function makes."""
    for name, make in sections.items():
        begin, end = f"<!-- BEGIN GENERATED: {name} -->", f"<!-- END GENERATED: {name} -->"
        pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise SystemExit(f"section {name!r} is missing its markers")
        body = f"{begin}\n{make()}{end}"
        text = pattern.sub(lambda _, body=body: body, text)
    return text


def crd_doc() -> str:
    return with_sections((ROOT / "docs" / "crd.md").read_text(), CRD_SECTIONS)


def main() -> None:
    (ROOT / "docs" / "configuration.md").write_text(configuration_doc())
    (ROOT / "docs" / "crd.md").write_text(crd_doc())
    (ROOT / "docs" / "events.md").write_text(events_doc())


if __name__ == "__main__":
    main()
