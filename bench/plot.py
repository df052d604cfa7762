"""Plots for docs/performance.md from bench/results/*.json (matplotlib is not a
project dependency; run it in a throwaway environment):

    uv run --with matplotlib python -m bench.plot [RESULT.json] [--docs docs]

Writes docs/perf-convergence.png (objects converged over time, from RESULT, the
newest non-quick result by default) and docs/perf-rss.png (operator RSS vs N, one
point per result file, newest per N).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib  # type: ignore[import-not-found, unused-ignore]

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]

RESULTS = Path(__file__).resolve().parent / "results"


def load_all() -> list[tuple[Path, dict[str, Any]]]:
    return [(p, json.loads(p.read_text())) for p in sorted(RESULTS.glob("*.json"))]


def convergence(result: dict[str, Any], out: Path) -> None:
    cold = result["cold_start"]
    t = [x[0] for x in cold["timeline"]]
    objs = [x[2] for x in cold["timeline"]]
    n = result["pools"]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(t, objs, label="objects converged (exports, Deployments, Services, Ready)")
    ax.axhline(6 * n, color="grey", linestyle=":", label=f"target: 6 x {n}")
    floor = result.get("floor", {})
    if floor:
        if floor.get("best_seconds"):  # None with --floor-events-only
            ax.axvline(floor["best_seconds"], color="green", linestyle="--", label="write floor")
            ax.axvline(
                1.5 * floor["best_seconds"], color="orange", linestyle="--", label="1.5x floor"
            )
        ev = floor.get("with_events_at_best")
        if ev:
            ax.axvline(
                ev["seconds"], color="purple", linestyle="-.", label="write floor incl. Events"
            )
    first = cold.get("first_write_after_start_seconds")
    if first:
        ax.axvline(first, color="red", linestyle=":", label="operator's first write")
    ax.set_xlabel("seconds since operator start")
    ax.set_ylabel("objects converged")
    when = result["started"][:16].replace("T", " ")
    ax.set_title(f"Cold-start convergence, N = {n} pools (run of {when} UTC)")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def rss(results: list[tuple[Path, dict[str, Any]]], out: Path) -> None:
    by_n: dict[int, float] = {}
    for _, r in results:
        if "rss_after_convergence" in r:
            by_n[r["pools"]] = r["rss_after_convergence"]["VmRSS"] / 1e6
    ns = sorted(by_n)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(ns, [by_n[n] for n in ns], "o-", label="operator VmRSS after convergence")
    # The target is a bound at N = 1,000 only: a marker there, not a line across.
    ax.plot([1000], [150], "v", color="orange", markersize=9, label="target at N=1000: <= 150 MB")
    ax.set_xlabel("pools (N)")
    ax.set_ylabel("MB (10^6 bytes)")
    ax.set_ylim(bottom=0)
    ax.set_title("Operator RSS vs N")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("result", nargs="?", type=Path)
    p.add_argument("--docs", type=Path, default=RESULTS.parent.parent / "docs")
    a = p.parse_args()
    results = load_all()
    chosen = (
        json.loads(a.result.read_text())
        if a.result
        else max(
            (r for _, r in results if "floor" in r),
            key=lambda r: (not r["quick"], r["started"]),
        )
    )
    convergence(chosen, a.docs / "perf-convergence.png")
    rss(results, a.docs / "perf-rss.png")
    print(f"wrote {a.docs / 'perf-convergence.png'} and {a.docs / 'perf-rss.png'}")


if __name__ == "__main__":
    main()
