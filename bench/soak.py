"""The soak (`bench/run --soak`): N relays, M rounds of status churn, and the operator's
held RSS after each round.

Each round applies, to every relay's status, K conditions of the bench's own field
manager, each with a message and a lastTransitionTime new to the round: the values a
fleet's statuses change all the time. The operator's relay cache takes every one of
them (a status-only change wakes no reconcile, so the operator writes nothing). What
the process keeps of an old round's strings shows as held RSS that grows with the
rounds: an informer that interned every short value did that on CPython 3.12.0 to
3.12.4, where interned strings are immortal. The churned strings' own size is the
yardstick: the held RSS is flat if its trend over the rounds after the warm-up grew by
less than a quarter of what those rounds wrote.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client.rest import Client
from tests.harness import OPERATOR_AGENT

from . import objects, procs

#: The field manager of the churn: the bench's own conditions, beside the operator's.
CHURN_MANAGER = "dpo-bench-churn"
#: Rounds whose growth is not counted: the first adds the churn's conditions to every
#: cached relay (the caches grow once), the second settles the allocator.
WARMUP_ROUNDS = 2
#: Flat: the held RSS trend grew by less than this share of the bytes of the strings the
#: measured rounds wrote (keeping them all would grow it by at least their size).
FLAT_SHARE = 0.25


def churn_status(ns: str, name: str, round_: int, conditions: int, now: str) -> dict[str, Any]:
    """What round `round_` applies to relay `ns/name`'s status: `conditions` conditions
    of the bench's own types, each message unique to (round, relay, condition) and
    short enough (<= 64 characters) that an informer interning short values took it."""
    return {
        "apiVersion": objects.RELAYS.api_version,
        "kind": objects.RELAYS.kind,
        "metadata": {"name": name, "namespace": ns},
        "status": {
            "conditions": [
                {
                    "type": f"BenchChurn{i}",
                    "status": "True",
                    "reason": "Churn",
                    "message": f"round {round_:04d}: relay {ns}/{name}, condition {i:02d}",
                    "lastTransitionTime": now,
                }
                for i in range(conditions)
            ]
        },
    }


def churned_bytes(bodies: list[dict[str, Any]]) -> int:
    """The size of the distinct strings a round's bodies carry that change every round
    (messages, times): at least what keeping them all would cost."""
    values = {
        value
        for body in bodies
        for c in body["status"]["conditions"]
        for value in (c["message"], c["lastTransitionTime"])
    }
    return sum(sys.getsizeof(v) for v in values)


def slope(ys: list[int]) -> float:
    """Least-squares slope of `ys` over their index (0.0 for fewer than two)."""
    n = len(ys)
    if n < 2:
        return 0.0
    mx, my = (n - 1) / 2, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in range(n))
    return sum((x - mx) * (y - my) for x, y in enumerate(ys)) / sxx


def held_trend(
    rss: list[int], written: list[int], *, warmup: int = WARMUP_ROUNDS
) -> dict[str, Any]:
    """The verdict on the held RSS after each round (`rss[i]` after round i + 1), with
    `written[i]` the churned strings' bytes of round i + 1. Measured from the end of the
    warm-up: the trend's growth over the measured rounds against what they wrote."""
    if len(rss) != len(written) or len(rss) < warmup + 2:
        raise ValueError(f"need {warmup + 2} rounds or more, one size each")
    measured = rss[warmup - 1 :] if warmup else rss
    per_round = slope(measured)
    rounds = len(measured) - 1
    grew = per_round * rounds
    wrote = sum(written[len(written) - rounds :])
    return {
        "warmup_rounds": warmup,
        "measured_rounds": rounds,
        "held_rss_at_warmup_end": measured[0],
        "held_rss_at_end": measured[-1],
        "held_rss_growth_bytes": measured[-1] - measured[0],
        "trend_bytes_per_round": round(per_round),
        "trend_growth_bytes": round(grew),
        "churned_string_bytes": wrote,
        "trend_growth_share_of_churned": round(grew / wrote, 3) if wrote else None,
        "flat": grew < FLAT_SHARE * wrote,
    }


async def churn(
    client: Client,
    cp: ControlPlane,
    op: procs.OperatorProcess,
    pools: list[tuple[str, str]],
    *,
    rounds: int,
    conditions: int,
    settle: float,
    log: Callable[[str], None],
    concurrency: int = 32,
) -> dict[str, Any]:
    """The rounds, on a converged fleet: apply every relay's churn, wait `settle`
    seconds (the operator's watch takes the round), sample the operator's memory."""
    audit0 = await asyncio.to_thread(cp.audit.sync)
    ticks = os.sysconf("SC_CLK_TCK")
    samples: list[dict[str, Any]] = []
    written: list[int] = []
    for r in range(1, rounds + 1):
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        bodies = [churn_status(ns, name, r, conditions, now) for ns, name in pools]
        t = time.perf_counter()
        await objects.bounded(
            [
                functools.partial(
                    client.apply,
                    objects.RELAYS,
                    body,
                    field_manager=CHURN_MANAGER,
                    force=True,
                    subresource="status",
                )
                for body in bodies
            ],
            concurrency,
        )
        seconds = time.perf_counter() - t
        await asyncio.sleep(settle)
        if not op.alive():
            raise RuntimeError(f"the operator exited during round {r}")
        status = op.status()
        written.append(churned_bytes(bodies))
        samples.append(
            {
                "round": r,
                "write_seconds": round(seconds, 2),
                "VmRSS": status["VmRSS"],
                "VmHWM": status["VmHWM"],
                "cpu_seconds": round(status["cpu_ticks"] / ticks, 2),
            }
        )
        log(f"soak round {r}/{rounds}: {seconds:.1f}s, held RSS {status['VmRSS'] / 2**20:.1f} MiB")
    writes = await asyncio.to_thread(cp.audit.writes, audit0, user_agent_prefix=OPERATOR_AGENT)
    return {
        "relays": len(pools),
        "rounds": rounds,
        "conditions_per_relay": conditions,
        "settle_seconds": settle,
        "churn_writes": rounds * len(pools),
        "operator_writes_during_churn": len(writes),
        "samples": samples,
        **held_trend([s["VmRSS"] for s in samples], written),
    }
