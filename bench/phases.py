"""Where a fresh decision's CPU goes, phase by phase (in process, no writes).

For each relay the phases of one pass are run by hand, each timed on its own with
`time.process_time()`: the decode of the relay and its DGD, the rest of the snapshot
(the caches' reads, the exports' inputs), the quiet-pass key, the render of the
bodies (relay Deployment and Service, one ServiceExport per wanted name), the rest of
the plan (the decision, the ladder and the drift rule of every owned object, the
exports plan), the executor on the plan (no write: a settled fleet plans none) and
the report. The render is timed apart and also runs inside the plan, so "plan
without render" is the plan's time minus the render's. The sum is compared with the
measured fresh pass: the difference is the reconciler's own bookkeeping and the
timer's cost.
"""

from __future__ import annotations

import time
from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.dgd import pool_from_object
from dynamo_pool_operator.api.relay import relay_from_object
from dynamo_pool_operator.pool.exports.plan import export_body
from dynamo_pool_operator.pool.plan import make_plan
from dynamo_pool_operator.pool.relay.objects import desired_objects
from dynamo_pool_operator.pool.report import report

PHASES = (
    "decode",
    "snapshot_without_decode",
    "quiet_key",
    "render",
    "plan_without_render",
    "execute",
    "report",
)


async def phase_split(
    reconciler: Any, keys: list[tuple[str, str]], rounds: int = 3
) -> dict[str, float]:
    """Microseconds of CPU per pass in each phase, averaged over `rounds` x `keys`."""
    r = reconciler
    total = dict.fromkeys(
        ("decode", "gather", "quiet_key", "render", "plan", "execute", "report"), 0.0
    )
    clock = time.process_time

    rules = r._export_rules()
    resource = rules.resource if rules is not None else None
    passes = 0
    for _ in range(rounds):
        for key in keys:
            relay_obj = r.caches.relays.store.get(*key)
            dgd_obj = r.caches.dgds.store.get(*key)
            if relay_obj is None or dgd_obj is None:
                continue
            t = clock()
            relay_from_object(relay_obj, r.defaults)
            pool_from_object(dgd_obj)
            total["decode"] += clock() - t

            t = clock()
            snapshot = r.gather(key)
            total["gather"] += clock() - t

            t = clock()
            snapshot.quiet_key()
            total["quiet_key"] += clock() - t

            t = clock()
            desired_objects(snapshot)
            if resource is not None and snapshot.pool is not None:
                relay = snapshot.relay
                for name in (*snapshot.pool.frontend_services, names.relay_name(relay.name)):
                    export_body(resource, relay, name)
            total["render"] += clock() - t

            t = clock()
            plan = make_plan(snapshot, rules, default_discovery_backend=r.backend)
            total["plan"] += clock() - t

            t = clock()
            outcome = await r.executor.run(snapshot.relay, plan.actions)
            total["execute"] += clock() - t

            t = clock()
            report(snapshot, plan, outcome, rules, now=r.clock.now())
            total["report"] += clock() - t
            passes += 1
    n = max(passes, 1)
    us = {k: v / n * 1e6 for k, v in total.items()}
    return {
        "decode": us["decode"],
        "snapshot_without_decode": us["gather"] - us["decode"],
        "quiet_key": us["quiet_key"],
        "render": us["render"],
        "plan_without_render": us["plan"] - us["render"],
        "execute": us["execute"],
        "report": us["report"],
    }
