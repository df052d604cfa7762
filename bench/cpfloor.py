"""The write floor of a ClusterProperty change: the operator's writes of that mass
event issued by a bare concurrent client, on the same server, in the same run.

`Recorder` notes what the operator wrote while the event ran (the audit log, by verb
and resource) and, at its end, what every relay showed and which Events the operator
created about the property (those of the user changes made meanwhile are counted, not
copied). Relays that keep their `spec.clusterId` (the bench's) keep their Deployment:
the event's per-relay writes are one status apply (`ClusterIDMatched` turns False) and
the Events of that transition.

`measure` runs with the operator stopped, once the property is set back and the fleet
settled: at each concurrency level, for every relay, the status apply of what it showed
at the event's end (its settled status with the event's conditions: same fields, same
size, the operator's field manager) and copies of the operator's Events about the property for
it (timed: the floor); then every relay's settled status applied back (timed and
reported apart), so the operator restarted afterwards finds the fleet as it left it.
Each level also gives one write's round trip under its load: more writes in flight make
the floor faster and every write meanwhile slower, a user's change's among them, so the
floor an operator can reach while it keeps a user's change within its budget is the
fastest level whose p99 fits that budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.mcs import CLUSTERPROPERTY_KIND
from dynamo_pool_operator.localcluster.audit import AuditEvent
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import EVENTS
from tests.harness import OPERATOR_AGENT

from .cpu import CpuMeter, processes
from .floor import _patient
from .latency import percentile
from .objects import RELAYS, bounded

Key = tuple[str, str]
#: What the floor writes, as `tally` names it.
FLOOR_KINDS = frozenset({"patch dynamopoolrelays/status", "create events"})
Job = Callable[[], Awaitable[Any]]
#: A user's change's p99 during a mass event (target 3); it is answered after at least
#: one write of the operator's, so one write's p99 must fit in it.
USER_CHANGE_BUDGET_MS = 100.0

#: Server-set Event fields, left out of the copies (as the operator's creates do).
_SERVER_SET = (
    "metadata",
    "deprecatedFirstTimestamp",
    "deprecatedLastTimestamp",
    "deprecatedCount",
    "deprecatedSource",
)


def tally(writes: list[AuditEvent]) -> dict[str, int]:
    """Writes by verb and resource (and subresource): `patch relays/status` is the status
    apply, `patch deployments` a Deployment apply, `create events` an Event."""
    counts = Counter(
        f"{w.verb} {w.resource}{'/' + w.subresource if w.subresource else ''}" for w in writes
    )
    return dict(sorted(counts.items()))


async def _statuses(client: Client, pools: set[Key]) -> dict[Key, dict[str, Any]]:
    relays = (await client.list(RELAYS)).items
    out = {}
    for r in relays:
        key = (r["metadata"]["namespace"], r["metadata"]["name"])
        if key in pools:
            out[key] = {"uid": r["metadata"]["uid"], "status": r.get("status") or {}}
    return out


def _received(w: AuditEvent) -> str:
    """When the API server received the write (RFC 3339, UTC, microseconds: sortable)."""
    stamp = str(w.raw.get("requestReceivedTimestamp", ""))
    return stamp.replace("Z", "+00:00")


def _answered(w: AuditEvent) -> str:
    """When the API server answered the write (its audit stage's time), as `_received`."""
    stamp = str(w.raw.get("stageTimestamp") or w.raw.get("requestReceivedTimestamp", ""))
    return stamp.replace("Z", "+00:00")


def _seconds(since: str, until: str) -> float:
    return (datetime.fromisoformat(until) - datetime.fromisoformat(since)).total_seconds()


class Recorder:
    """What the operator wrote during the ClusterProperty change, and what it left."""

    def __init__(
        self, cp: ControlPlane, client: Client, pools: list[Key], operator_pid: int | None = None
    ) -> None:
        self.cp = cp
        self.client = client
        self.pools = set(pools)
        #: Each process's CPU seconds from the change to the event's end.
        self.meter = CpuMeter(processes(cp.named_pids, operator_pid))
        self.cpu: dict[str, float] = {}
        #: Seconds from the change to the event's last write answered (the server's
        #: clock), and that moment (Unix time), once `end` read them.
        self.event_seconds: float | None = None
        self.ended_at: float | None = None
        self._since = 0
        self._over = ""
        self.writes: dict[str, int] = {}
        self.at_end: dict[Key, dict[str, Any]] = {}
        self.events: dict[Key, list[dict[str, Any]]] = {}

    async def start(self) -> None:
        """Right before the change: every earlier write is in the log before the mark."""
        self._since = await asyncio.to_thread(self.cp.audit.sync)
        self.meter.start()

    def over(self) -> None:
        """The event's end: writes the API server received later are not counted."""
        self._over = datetime.now(UTC).isoformat(timespec="microseconds")
        self.cpu = self.meter.stop()

    async def end(self) -> dict[str, Any]:
        """After the event's end (untimed): the operator's writes from `start` to `over`,
        by kind; every relay's status and the Events the operator created."""
        logged = await asyncio.to_thread(
            self.cp.audit.writes, self._since, user_agent_prefix=OPERATOR_AGENT
        )
        writes = [w for w in logged if _received(w) <= self._over]
        self.writes = tally(writes)
        # The event's own writes: each relay's first status write after the change (a
        # user change made meanwhile may write it again) and the Events about the
        # property (below). The event lasts from the server's receipt of the change to
        # its answer to the last of them: the server's clock, no probe in between.
        first_status: dict[Key, str] = {}
        for w in writes:
            if w.resource == RELAYS.plural and w.subresource == "status":
                key, at = (w.namespace, w.name), _answered(w)
                if key not in first_status or at < first_status[key]:
                    first_status[key] = at
        answered = {(w.namespace, w.name): _answered(w) for w in writes}
        changed_at = min(
            (
                _received(w)
                for w in await asyncio.to_thread(self.cp.audit.writes, self._since)
                if w.resource == "clusterproperties"
            ),
            default="",
        )
        ends = list(first_status.values())
        created = {
            (w.namespace, w.name) for w in writes if w.resource == "events" and w.verb == "create"
        }
        self.at_end = await _statuses(self.client, self.pools)
        self.events = {}
        reasons: Counter[str] = Counter()
        for e in (await self.client.list(EVENTS)).items:
            meta = e["metadata"]
            key = (meta["namespace"], str((e.get("regarding") or {}).get("name")))
            if (meta["namespace"], meta["name"]) not in created or key not in self.pools:
                continue
            about_property = (e.get("related") or {}).get("kind") == CLUSTERPROPERTY_KIND
            reasons[
                f"{e.get('reason')}{'' if about_property else ' (not about the property)'}"
            ] += 1
            if about_property:  # not those of the user changes made meanwhile
                body = {k: v for k, v in e.items() if k not in _SERVER_SET}
                self.events.setdefault(key, []).append(body)
                ends.append(answered[(meta["namespace"], meta["name"])])
        ended_at = max(ends, default="")
        self.event_seconds = _seconds(changed_at, ended_at) if changed_at and ended_at else None
        self.ended_at = datetime.fromisoformat(ended_at).timestamp() if ended_at else None
        return {
            "event_seconds_at_the_server": self.event_seconds,
            "relays_whose_status_was_written": len(first_status),
            "cpu_seconds": self.cpu,
            "operator_event_creates_by_reason": dict(sorted(reasons.items())),
            "operator_writes": self.writes,
            "operator_writes_total": sum(self.writes.values()),
            "operator_writes_per_relay": round(sum(self.writes.values()) / len(self.pools), 3),
            "operator_writes_after_the_end_while_changes_ran": len(logged) - len(writes),
        }


def _status_apply(client: Client, key: Key, uid: str, status: dict[str, Any]) -> Job:
    body = {
        "apiVersion": RELAYS.api_version,
        "kind": RELAYS.kind,
        "metadata": {"name": key[1], "namespace": key[0], "uid": uid},
        "status": status,
    }
    return functools.partial(
        client.apply,
        RELAYS,
        body,
        field_manager=names.FIELD_MANAGER,
        force=True,
        subresource="status",
    )


def _event_create(client: Client, body: dict[str, Any], ns: str, name: str) -> Job:
    out = copy.deepcopy(body)
    out["metadata"] = {"name": name, "namespace": ns}
    return functools.partial(client.create, EVENTS, out, ns)


async def _timed(jobs: list[Job], concurrency: int) -> tuple[float, int, list[float]]:
    """Seconds for all the jobs, how many were retried, and each one's milliseconds
    (from its slot to the server's answer): what a write made meanwhile waits."""
    retried: list[int] = []
    ms: list[float] = []

    async def one(job: Job) -> None:
        t = time.perf_counter()
        await _patient(job, retried)
        ms.append((time.perf_counter() - t) * 1000)

    t0 = time.perf_counter()
    await bounded([functools.partial(one, j) for j in jobs], concurrency)
    return time.perf_counter() - t0, len(retried), ms


def write_latency(ms: list[float]) -> dict[str, float]:
    """Percentiles of one write's round trip under a level's load. A user's change is
    answered after at least one such write of the operator's (its export create or
    delete), so a level whose p99 is past the change's budget cannot meet it."""
    if not ms:
        return {}
    return {f"p{q}_ms": round(percentile(ms, q), 2) for q in (50, 95, 99)}


def fastest_within_budget(levels: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The fastest level whose write p99 fits a user change's budget. A level with no
    timed write shows no round trip, so it does not count as within budget."""
    fit = [
        x
        for x in levels
        if x["write_round_trip"].get("p99_ms", float("inf")) <= USER_CHANGE_BUDGET_MS
    ]
    return min(fit, key=lambda x: float(x["seconds"])) if fit else None


def parse_levels(spec: str) -> list[tuple[int, bool]]:
    """`--floor-concurrency`: "4,4w,16" is 4 and 16 in flight, and 4 again with the
    relays watched (`w`)."""
    out = []
    for part in spec.split(","):
        part = part.strip()
        watched = part.endswith("w")
        digits = part[:-1] if watched else part
        if not digits.isdigit() or int(digits) < 1:
            raise ValueError(
                f"--floor-concurrency: {part!r}: writes in flight, at least 1 (4, or 4w)"
            )
        c = int(digits)
        out.append((c, watched))
    return out


class _RelayWatch:
    """A watch on every relay, held while a level runs: the API server sends it an event
    for each status write, as it does the operator's watch during the event. Lines are
    counted, not decoded, so the watcher's own cost stays small."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.lines = 0
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        # An empty namespace's list: the current resourceVersion, with no initial events.
        version = (await self.client.list(RELAYS, "default", limit=1)).resource_version
        self._task = asyncio.create_task(self._follow(version))

    async def _follow(self, version: str) -> None:
        async for _ in self.client.watch_lines(
            RELAYS, resource_version=version, allow_bookmarks=False, timeout_seconds=3600
        ):
            self.lines += 1

    async def stop(self) -> int:
        await asyncio.sleep(1.0)  # the level's last events are on their way
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        return self.lines


async def measure(rec: Recorder, levels: list[tuple[int, bool]]) -> dict[str, Any]:
    """The floor at each level (operator stopped, fleet settled); each level leaves
    every relay's status as it found it. A watched level holds a watch on every relay
    while its writes run (`_RelayWatch`), as the operator holds one in the event: the
    server's cost of telling it, which a bare level does not have. The bench's tracker
    watches the relays in every level, as it does in the event."""
    client = rec.client
    settled = await _statuses(client, rec.pools)
    changed = {}
    differing = 0
    for key, now in settled.items():
        end = rec.at_end.get(key, now)["status"]
        status = copy.deepcopy(now["status"])
        status["conditions"] = copy.deepcopy(end.get("conditions") or [])
        differing += status != now["status"]
        changed[key] = status
    out: list[dict[str, Any]] = []
    for level, (c, watched) in enumerate(levels):
        forward: list[Job] = []
        for key, now in sorted(settled.items()):
            forward.append(_status_apply(client, key, now["uid"], changed[key]))
            for i, ev in enumerate(rec.events.get(key, [])):
                name = f"{key[1]}.cpfloor{level}-{c}-{i}"  # unique to the level: they stay
                forward.append(_event_create(client, ev, key[0], name))
        meter = CpuMeter(processes(rec.cp.named_pids))
        watch = _RelayWatch(client) if watched else None
        if watch is not None:
            await watch.start()
        meter.start()
        seconds, retried, ms = await _timed(forward, c)
        cpu = meter.stop()
        watch_events = await watch.stop() if watch is not None else None
        back = [
            _status_apply(client, key, now["uid"], now["status"])
            for key, now in sorted(settled.items())
        ]
        back_seconds, back_retried, _ = await _timed(back, c)
        out.append(
            {
                "concurrency": c,
                "relays_watched": watched,
                **({"watch_events": watch_events} if watched else {}),
                "writes": len(forward),
                "seconds": round(seconds, 3),
                "writes_per_second": round(len(forward) / seconds, 1),
                "cpu_seconds": cpu,
                "write_round_trip": write_latency(ms),
                "retried_after_timeout": retried,
                "set_back_writes": len(back),
                "set_back_seconds": round(back_seconds, 3),
                "set_back_writes_per_second": round(len(back) / back_seconds, 1),
                "set_back_retried_after_timeout": back_retried,
            }
        )
    bare = [x for x in out if not x["relays_watched"]] or out
    best = min(bare, key=lambda x: float(x["seconds"]))
    within = fastest_within_budget(bare)
    watched_levels = [x for x in out if x["relays_watched"]]
    watched_within = fastest_within_budget(watched_levels)
    return {
        "levels": out,
        # The floor the target names: a bare client's writes, no watch of the
        # operator's (the bench's tracker watches, as in the event).
        "best_seconds": best["seconds"],
        "best_concurrency": best["concurrency"],
        # The fastest level at which a write made meanwhile still fits a user change's
        # budget (target 3): the floor an operator that keeps that budget can reach.
        "user_change_budget_ms": USER_CHANGE_BUDGET_MS,
        "best_within_budget_seconds": within["seconds"] if within else None,
        "best_within_budget_concurrency": within["concurrency"] if within else None,
        # The same with the relays watched: what the server spends telling a watcher
        # of each write is in it (any controller watches what it writes).
        "watched_best_within_budget_seconds": watched_within["seconds"] if watched_within else None,
        "watched_best_within_budget_concurrency": (
            watched_within["concurrency"] if watched_within else None
        ),
        "relays": len(settled),
        "relays_whose_status_changes": differing,
        "event_copies_per_level": sum(len(v) for v in rec.events.values()),
        # The operator's writes of kinds the floor does not make (the user changes' export
        # writes; a Deployment apply if the relays took the cluster's ID): said, not hidden.
        "operator_writes_of_other_kinds": {
            k: v for k, v in rec.writes.items() if k not in FLOOR_KINDS
        },
        "what": "per relay: the status apply of its event-end conditions (the operator's "
        "field manager) and copies of the Events the operator created about the property; "
        "then its settled status applied back",
    }
