"""The operator's memory sizing is one formula, in every place a user reads it, and it
covers what the committed benchmark runs measured.

values.yaml, the chart's README and docs/operations.md give the request and the limit
as `64Mi + <k>Ki x N` relays; each committed run's memory (held after a restart on the
converged fleet, and the high-water of a cold start) must fit under them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MI, KI = 2**20, 2**10
#: Committed runs: (file, relays, held bytes path, high-water bytes path).
RUNS = (
    ("20261202T0626Z-n1000.json", ("restart", "VmRSS"), ("cold_start", "peak_rss_bytes")),
    ("20261202T0630Z-fair-n5000.json", ("restart", "VmRSS"), ("rss_after", "VmHWM")),
    ("20261202T0622Z-held-n10000.json", ("restart", "VmRSS"), ("cold_start", "peak_rss_bytes")),
    ("20261202T1046Z-held-n10000.json", ("restart", "VmRSS"), ("cold_start", "peak_rss_bytes")),
    (
        "20261204T1257Z-decide-fast-shown-status-n1000.json",
        ("restart", "VmRSS"),
        ("cold_start", "peak_rss_bytes"),
    ),
    (
        "20261204T1249Z-decide-fast-rss-shown-status-n10000.json",
        ("restart", "VmRSS"),
        ("cold_start", "peak_rss_bytes"),
    ),
    (
        "20261204T1611Z-decide-fast-rss-quiet-hash-n10000.json",
        ("restart", "VmRSS"),
        ("cold_start", "peak_rss_bytes"),
    ),
    (
        "20261204T1650Z-decide-fast-records-n1000.json",
        ("restart", "VmRSS"),
        ("cold_start", "peak_rss_bytes"),
    ),
    (
        "20261204T1641Z-decide-fast-rss-alike-conditions-n10000.json",
        ("restart", "VmRSS"),
        ("cold_start", "peak_rss_bytes"),
    ),
    (
        "20261204T2003Z-decide-fast-fair-caches-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
    (
        "20261204T2013Z-decide-fast-fair-caches-again-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
    (
        "20261204T2055Z-decide-fast-fair-caches-third-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
    (
        "20261204T2103Z-decide-fast-fair-caches-fourth-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
    (
        "20261204T1958Z-decide-fast-caches-n1000.json",
        ("restart", "VmRSS"),
        ("cold_start", "peak_rss_bytes"),
    ),
    (
        "20261204T1937Z-decide-fast-rss-index-objects-n10000.json",
        ("restart", "VmRSS"),
        ("cold_start", "peak_rss_bytes"),
    ),
    (
        "20261204T1947Z-decide-fast-rss-view-record-n10000.json",
        ("restart", "VmRSS"),
        ("cold_start", "peak_rss_bytes"),
    ),
    (
        "20261204T2348Z-decide-fast-fair-young-gen-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
    (
        "20261204T2307Z-decide-fast-rss-meta-reads-n10000.json",
        ("restart", "VmRSS"),
        ("cold_start", "peak_rss_bytes"),
    ),
    (
        "20261205T0152Z-decide-fast-rss-young-gen-n10000.json",
        ("restart", "VmRSS"),
        ("cold_start", "peak_rss_bytes"),
    ),
    (
        "20261205T0232Z-decide-fast-rss-compiled-n10000.json",
        ("restart", "VmRSS"),
        ("cold_start", "peak_rss_bytes"),
    ),
    (
        "20261205T0225Z-decide-fast-fair-compiled-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
    (
        "20261205T0253Z-decide-fast-fair-compiled-again-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
    (
        "20261205T0359Z-decide-fast-fair-compiled-third-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
    (
        "20261205T0523Z-decide-fast-fair-separate-cores-profiled-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
    (
        "20261205T0536Z-decide-fast-fair-separate-cores-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
    (
        "20261205T0549Z-decide-fast-fair-separate-cores-again-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
    (
        "20261205T0602Z-decide-fast-fair-shared-cores-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
    (
        "20261204T2222Z-decide-fast-meta-reads-n1000.json",
        ("restart", "VmRSS"),
        ("cold_start", "peak_rss_bytes"),
    ),
    (
        "20261204T2228Z-decide-fast-fair-meta-reads-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
    (
        "20261204T2234Z-decide-fast-fair-meta-reads-again-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
    (
        "20261204T2239Z-decide-fast-fair-meta-reads-third-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
    (
        "20261204T2245Z-decide-fast-fair-meta-reads-fourth-n5000.json",
        ("restart", "VmRSS"),
        ("rss_after", "VmHWM"),
    ),
)


def _formulas(text: str) -> list[tuple[int, int]]:
    """Every `64Mi + 32Ki x N` (or with MiB, KiB and a multiplication sign) in `text`,
    as (base, per relay)."""
    found = re.findall(r"(\d+) ?Mi(?:B)? \+ (\d+) ?Ki(?:B)? [x\u00d7] N", text)
    return [(int(base), int(per)) for base, per in found]


def _sizing() -> dict[str, list[tuple[int, int]]]:
    files = {
        "values.yaml": ROOT / "deploy/helm/dynamo-pool-operator/values.yaml",
        "chart README": ROOT / "deploy/helm/dynamo-pool-operator/README.md",
        "docs/operations.md": ROOT / "docs/operations.md",
    }
    return {name: _formulas(path.read_text()) for name, path in files.items()}


def test_every_place_gives_the_same_request_and_limit() -> None:
    sizing = _sizing()
    assert all(len(f) == 2 for f in sizing.values()), sizing
    assert len({tuple(f) for f in sizing.values()}) == 1, sizing


def test_the_formula_covers_every_committed_measurement() -> None:
    (request_base, request_per), (limit_base, limit_per) = _sizing()["values.yaml"]
    for name, held_at, peak_at in RUNS:
        run = json.loads((ROOT / "bench/results" / name).read_text())
        n = run["pools"]
        held = run[held_at[0]][held_at[1]]
        peak = run[peak_at[0]][peak_at[1]]
        request = request_base * MI + request_per * KI * n
        limit = limit_base * MI + limit_per * KI * n
        assert held <= request, f"{name}: held {held / MI:.0f} MiB > request {request / MI:.0f}"
        assert peak <= limit, f"{name}: high-water {peak / MI:.0f} MiB > limit {limit / MI:.0f}"
