"""Plots of bench/results/*.json, to look at, not to commit: a plot goes stale with the
code (docs/performance.md). matplotlib is not a project dependency; run it in a
throwaway environment:

    uv run --with matplotlib python -m bench.plot [RESULT.json] [--docs docs]

Writes docs/perf-convergence.png (objects converged over time, from RESULT, the
newest non-quick result by default), docs/perf-rss.png (operator RSS vs N) and
docs/perf-convergence-vs-n.png (cold-start seconds vs N, with the floor of the same
writes where that run measured it): one point per N, the newest run of each N that
is not a --fairness run (its user changes are extra work during the cold start).
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
    """Every result file, oldest run first."""
    loaded = [(p, json.loads(p.read_text())) for p in RESULTS.glob("*.json")]
    return sorted(loaded, key=lambda pr: str(pr[1].get("started", "")))


def newest_per_n(results: list[tuple[Path, dict[str, Any]]]) -> dict[int, dict[str, Any]]:
    by_n: dict[int, dict[str, Any]] = {}
    for _, r in results:
        if "rss_after_convergence" in r and not r.get("fairness"):
            by_n[r["pools"]] = r
    return by_n


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
    runs = newest_per_n(results)
    ns = sorted(runs)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(
        ns,
        [runs[n]["rss_after_convergence"]["VmRSS"] / 1e6 for n in ns],
        "o-",
        label="operator VmRSS after convergence",
    )
    restarted = [n for n in ns if "restart" in runs[n]]
    if restarted:
        ax.plot(
            restarted,
            [runs[n]["restart"]["VmHWM"] / 1e6 for n in restarted],
            "s",
            color="purple",
            label="peak (VmHWM) of a restart on the converged fleet",
        )
    for n in ns:
        ax.annotate(
            runs[n]["started"][:10],
            (n, runs[n]["rss_after_convergence"]["VmRSS"] / 1e6),
            textcoords="offset points",
            xytext=(4, -12),
            fontsize=7,
        )
    ax.plot([10000], [300], "v", color="red", markersize=9, label="target at N=10000: <= 300 MB")
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


def convergence_vs_n(results: list[tuple[Path, dict[str, Any]]], out: Path) -> None:
    runs = newest_per_n(results)
    ns = sorted(runs)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(ns, [runs[n]["cold_start"]["seconds"] for n in ns], "o-", label="operator cold start")
    floored = [n for n in ns if (runs[n].get("floor") or {}).get("with_events_at_best")]
    ax.plot(
        floored,
        [runs[n]["floor"]["with_events_at_best"]["seconds"] for n in floored],
        "s--",
        color="purple",
        label="floor incl. Events (9N), same run",
    )
    for n in ns:
        ax.annotate(
            runs[n]["started"][:10],
            (n, runs[n]["cold_start"]["seconds"]),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=7,
        )
    ax.set_xlabel("pools (N)")
    ax.set_ylabel("seconds")
    ax.set_ylim(bottom=0)
    ax.set_title("Cold-start convergence vs N (each point: its own run and load)")
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
            (r for _, r in results if "floor" in r and not r.get("fairness")),
            key=lambda r: (not r["quick"], r["started"]),
        )
    )
    convergence(chosen, a.docs / "perf-convergence.png")
    rss(results, a.docs / "perf-rss.png")
    convergence_vs_n(results, a.docs / "perf-convergence-vs-n.png")
    print(f"wrote perf-convergence.png, perf-rss.png and perf-convergence-vs-n.png in {a.docs}")


if __name__ == "__main__":
    main()
