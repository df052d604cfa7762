"""Adversarial interleavings: a "user" races the running operator.

What it proves and how to run it longer: docs/testing.md, 'Adversarial interleavings'.

Hypothesis draws a sequence of user steps (create, edit, take over, release and
delete ServiceExports; rename/remove frontends; delete and re-create the DGD and
the relay; flip the discovery annotation; set/delete the ClusterProperty) that
run against the real API server while the operator (mcs) reconciles, with short
random pauses so its work interleaves with the user's.

Invariants:
1. after every step and at quiescence, from an independent watch on the
   namespace's ServiceExports: every change the test did not make happened to an
   export whose previous state was controlled by a relay the test created, and
   every export not controlled by a relay disappeared only when the user deleted
   it; at the end, from the audit log: every successful DELETE/PATCH/UPDATE of a
   ServiceExport by the operator's user agent is matched by such a change.
2. at quiescence, a fresh `plan` (decide + plan on the objects read from the API
   server) has nothing left to do (only NONE/FOREIGN), i.e. the exports the relay
   controls are exactly the wanted ones not held by someone else.

`DPO_INTERLEAVING_EXAMPLES` raises the number of examples (CI default 3).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from dynamo_pool_operator.api import crd, names
from dynamo_pool_operator.api.dgd import DISCOVERY_BACKEND_ANNOTATION, pool_from_object
from dynamo_pool_operator.api.mcs import ClusterID, Implementation
from dynamo_pool_operator.api.relay import RelayDefaults, relay_from_object
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.pool.exports.feature import relevant_exports
from dynamo_pool_operator.pool.exports.plan import plan
from dynamo_pool_operator.pool.model import Verb
from dynamo_pool_operator.pool.plan import decide
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.meta import controller_of
from dynamo_pool_operator.runtime.objects.resources import CONFIGMAPS, DEPLOYMENTS, SERVICES
from tests.harness import OPERATOR_AGENT, OperatorUnderTest, eventually
from tests.integration.support.export_fixtures import SE, config, set_cluster_id
from tests.integration.support.relay_fixtures import DGDS, RELAYS, WORKER, dgd_body, relay_body

POOL = "llama"
EXAMPLES = int(os.environ.get("DPO_INTERLEAVING_EXAMPLES", "3"))
MAX_STEPS = 12
OWNER_CM = "user-owner"

#: Frontend sets the DGD can be switched between (renames, removals, additions).
FRONTEND_SETS: dict[str, list[dict[str, Any]]] = {
    "frontend": [{"name": "Frontend", "type": "frontend"}],
    "gateway": [{"name": "Gateway", "type": "frontend"}],
    "both": [{"name": "Frontend", "type": "frontend"}, {"name": "ChatV2", "type": "frontend"}],
    "none": [],
}
#: Every export name a step may touch: the relay's and each possible frontend's.
EXPORT_NAMES = [f"{POOL}-pool-relay", f"{POOL}-frontend", f"{POOL}-gateway", f"{POOL}-chatv2"]

export_name = st.sampled_from(EXPORT_NAMES)
STEP = st.tuples(
    st.one_of(
        st.tuples(st.just("create_export"), export_name, st.sampled_from(["none", "user"])),
        st.tuples(st.just("label_export"), export_name),
        st.tuples(st.just("edit_ref"), export_name),
        st.tuples(st.just("take_over"), export_name),
        st.tuples(st.just("release"), export_name),
        st.tuples(st.just("delete_export"), export_name),
        st.tuples(st.just("frontends"), st.sampled_from(sorted(FRONTEND_SETS))),
        st.tuples(st.just("delete_dgd")),
        st.tuples(st.just("create_dgd")),
        st.tuples(st.just("recreate_dgd")),
        st.tuples(st.just("delete_relay")),
        st.tuples(st.just("create_relay")),
        st.tuples(st.just("discovery"), st.sampled_from(["etcd", "kubernetes", None])),
        st.tuples(st.just("cluster_id"), st.sampled_from(["east", "west", None])),
    ),
    st.one_of(st.just(0), st.integers(0, 50)),  # pause after the step, in ms
)


def _note(text: str) -> None:
    """`hypothesis.note` inside a hypothesis example, nothing elsewhere (regressions)."""
    with contextlib.suppress(InvalidArgument):
        note(text)


def _controller_uid(obj: Mapping[str, Any]) -> str | None:
    ref = controller_of(obj)
    if ref is None or ref.get("kind") != crd.KIND:
        return None
    return str(ref.get("uid"))


@dataclass
class World:
    """What the test knows: its own writes, and the export history from its watch."""

    client: Client
    ns: str
    frontends: str = "frontend"
    annotation: str | None = None
    relay_uids: set[str] = field(default_factory=set)
    owner_ref: dict[str, Any] = field(default_factory=dict)
    user_rvs: set[str] = field(default_factory=set)  # resourceVersions the test wrote
    user_deletes: Counter[str] = field(default_factory=Counter)
    events: list[dict[str, Any]] = field(default_factory=list)
    checked: int = 0
    state: dict[str, dict[str, Any]] = field(default_factory=dict)
    foreign_changes: Counter[str] = field(default_factory=Counter)  # MODIFIED by non-test
    relay_deletions: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    watching: bool = False

    def relay_controlled(self, obj: Mapping[str, Any] | None) -> bool:
        return obj is not None and _controller_uid(obj) in self.relay_uids

    # ------------------------------------------------------------ invariant 1 (watch)
    def check_watch(self) -> None:
        while self.checked < len(self.events):
            ev = self.events[self.checked]
            self.checked += 1
            obj = ev["object"]
            name = obj["metadata"]["name"]
            rv = obj["metadata"]["resourceVersion"]
            prev = self.state.get(name)
            if ev["type"] == "ADDED":
                self.state[name] = obj
            elif ev["type"] == "MODIFIED":
                self.state[name] = obj
                if rv not in self.user_rvs:
                    self.foreign_changes[name] += 1
                    if not self.relay_controlled(prev):
                        self.violations.append(
                            f"{name} changed to rv {rv} by someone else than the test while "
                            f"not controlled by a relay: was {_meta(prev)}, now {_meta(obj)}"
                        )
            elif ev["type"] == "DELETED":
                self.state.pop(name, None)
                if self.relay_controlled(obj):
                    self.relay_deletions[name] += 1
                elif self.user_deletes[name] > 0:
                    self.user_deletes[name] -= 1
                else:
                    self.violations.append(
                        f"{name} (not controlled by a relay: {_meta(obj)}) was deleted, "
                        "not by the test"
                    )
        assert not self.violations, "\n".join(self.violations)


def _meta(obj: Mapping[str, Any] | None) -> Any:
    if obj is None:
        return None
    m = obj["metadata"]
    return {
        "rv": m.get("resourceVersion"),
        "labels": m.get("labels"),
        "ownerReferences": m.get("ownerReferences"),
    }


async def _watch(w: World) -> None:
    listed = await w.client.list(SE, w.ns)
    for e in listed.items:
        w.events.append({"type": "ADDED", "object": e})
    rv = listed.resource_version
    w.watching = True
    while True:
        try:
            async for ev in w.client.watch(SE, w.ns, resource_version=rv, timeout_seconds=60):
                if ev["type"] == "BOOKMARK":
                    rv = ev["object"]["metadata"]["resourceVersion"]
                    continue
                w.events.append(ev)
                rv = ev["object"]["metadata"]["resourceVersion"]
        except errors.Gone:  # pragma: no cover - the test is far shorter than compaction
            raise


# ------------------------------------------------------------ the user's steps
def _export(w: World, name: str, owner: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": w.ns, "labels": {"team": "user"}}
    if owner == "user":
        meta["ownerReferences"] = [w.owner_ref]
    return {"apiVersion": SE.api_version, "kind": "ServiceExport", "metadata": meta}


async def _patch_export(w: World, name: str, patch: dict[str, Any]) -> None:
    with contextlib.suppress(errors.NotFound):
        out = await w.client.merge_patch(SE, name, patch, w.ns)
        w.user_rvs.add(out["metadata"]["resourceVersion"])


async def _patch_dgd(w: World, patch: dict[str, Any]) -> None:
    with contextlib.suppress(errors.NotFound):
        await w.client.merge_patch(DGDS, POOL, patch, w.ns)


async def _refs(w: World, name: str) -> list[dict[str, Any]] | None:
    try:
        e = await w.client.get(SE, name, w.ns)
    except errors.NotFound:
        return None
    return list(e["metadata"].get("ownerReferences") or [])


async def _dgd(w: World) -> None:
    ann = {DISCOVERY_BACKEND_ANNOTATION: w.annotation} if w.annotation else None
    body = dgd_body(POOL, w.ns, [*FRONTEND_SETS[w.frontends], WORKER], annotations=ann)
    with contextlib.suppress(errors.AlreadyExists):
        await w.client.create(DGDS, body)


async def _delete(w: World, res: Any, name: str) -> None:
    with contextlib.suppress(errors.NotFound):
        await w.client.delete(res, name, w.ns)


async def run_step(w: World, step: tuple[Any, ...]) -> None:
    kind, args = step[0], step[1:]
    if kind == "create_export":
        with contextlib.suppress(errors.AlreadyExists):
            await w.client.create(SE, _export(w, args[0], args[1]))
    elif kind == "label_export":  # drop our label, add the user's
        await _patch_export(
            w, args[0], {"metadata": {"labels": {names.DGD_NAME: None, "team": "edited"}}}
        )
    elif kind == "edit_ref":  # change a field of the controller reference
        refs = await _refs(w, args[0])
        if refs:
            refs = [{**r, "blockOwnerDeletion": False} for r in refs]
            await _patch_export(w, args[0], {"metadata": {"ownerReferences": refs}})
    elif kind == "take_over":  # the user's ConfigMap becomes the controller
        await _patch_export(w, args[0], {"metadata": {"ownerReferences": [w.owner_ref]}})
    elif kind == "release":  # no owner at all
        await _patch_export(w, args[0], {"metadata": {"ownerReferences": None}})
    elif kind == "delete_export":
        w.user_deletes[args[0]] += 1
        try:
            await w.client.delete(SE, args[0], w.ns)
        except errors.NotFound:
            w.user_deletes[args[0]] -= 1
    elif kind == "frontends":
        w.frontends = args[0]
        await _patch_dgd(w, {"spec": {"components": [*FRONTEND_SETS[w.frontends], WORKER]}})
    elif kind == "delete_dgd":
        await _delete(w, DGDS, POOL)
    elif kind == "create_dgd":
        await _dgd(w)
    elif kind == "recreate_dgd":
        await _delete(w, DGDS, POOL)
        await _dgd(w)
    elif kind == "delete_relay":
        await _delete(w, RELAYS, POOL)
    elif kind == "create_relay":
        await _create_relay(w)
    elif kind == "discovery":
        w.annotation = args[0]
        await _patch_dgd(w, {"metadata": {"annotations": {DISCOVERY_BACKEND_ANNOTATION: args[0]}}})
    elif kind == "cluster_id":
        await set_cluster_id(w.client, args[0])
    else:  # pragma: no cover
        raise AssertionError(f"unknown step {step}")


async def _create_relay(w: World) -> None:
    try:
        made = await w.client.create(RELAYS, relay_body(POOL, w.ns, clusterId="east"))
    except errors.AlreadyExists:
        return
    w.relay_uids.add(made["metadata"]["uid"])


# ------------------------------------------------------------ invariant 2 (plan)
async def _get(client: Client, res: Any, name: str, ns: str) -> dict[str, Any] | None:
    try:
        return await client.get(res, name, ns)
    except errors.NotFound:
        return None


async def remaining_work(w: World, op: OperatorUnderTest) -> list[str]:
    """What a fresh plan on the API server's objects would still do (empty = converged)."""
    client, ns = w.client, w.ns
    exports = {e["metadata"]["name"]: e for e in (await client.list(SE, ns)).items}
    relay_obj = await _get(client, RELAYS, POOL, ns)
    if relay_obj is None:
        # No relay: the garbage collector removes whatever a relay controlled.
        left = sorted(n for n, e in exports.items() if w.relay_controlled(e))
        return [f"relay gone but still controlled: {n}" for n in left]
    cfg = op.config
    relay = relay_from_object(
        relay_obj,
        RelayDefaults(
            image=cfg.pool_relay.image,
            port=cfg.pool_relay.port,
            replicas=cfg.pool_relay.replicas,
            image_pull_policy=cfg.pool_relay.image_pull_policy,
        ),
    )
    dgd = await _get(client, DGDS, POOL, ns)
    pool = pool_from_object(dgd) if dgd is not None else None
    relay_name = f"{POOL}-pool-relay"
    decision = decide(
        relay,
        pool,
        {
            "Deployment": await _get(client, DEPLOYMENTS, relay_name, ns),
            "Service": await _get(client, SERVICES, relay_name, ns),
        },
        default_discovery_backend=cfg.discovery.backend,
    )
    controlled = [e for e in exports.values() if _controller_uid(e) == relay.uid]
    relevant = relevant_exports(relay, pool, exports.get, controlled)
    p = plan(
        relay,
        decision,
        pool,
        relevant,
        implementation=Implementation.MCS,
        cluster_id=ClusterID(),
        resource=SE,
    )
    out = [f"{a.verb} {a.name}" for a in p.actions if a.verb not in (Verb.NONE, Verb.FOREIGN)]
    # Exports of an earlier (deleted) relay incarnation are the garbage collector's.
    stale = sorted(
        n for n, e in exports.items() if w.relay_controlled(e) and _controller_uid(e) != relay.uid
    )
    out += [f"old relay's export still there: {n}" for n in stale]
    return out


async def audit_check(w: World, cp: ControlPlane, since: int) -> None:
    """Each successful operator DELETE/PATCH/UPDATE of an export matches a watched change
    of an export that a relay controlled (checked in `check_watch`)."""
    writes = await asyncio.to_thread(cp.audit.writes, since, user_agent_prefix=OPERATOR_AGENT)
    deletes: Counter[str] = Counter()
    changes: Counter[str] = Counter()
    for e in writes:
        if e.resource != "serviceexports" or e.namespace != w.ns or e.code >= 300:
            continue
        if e.verb == "delete":
            deletes[e.name] += 1
        elif e.verb in ("patch", "update"):
            changes[e.name] += 1
        elif e.verb == "deletecollection":
            w.violations.append(f"operator deletecollection of serviceexports: {e.raw}")
    for name, n in deletes.items():
        if n > w.relay_deletions[name]:
            w.violations.append(
                f"operator deleted {name} {n} times, but only {w.relay_deletions[name]} "
                "deletions of it were of a relay-controlled export"
            )
    for name, n in changes.items():
        if n > w.foreign_changes[name]:
            w.violations.append(
                f"operator patched {name} {n} times, but only {w.foreign_changes[name]} "
                "changes of it by others were seen (each checked to be relay-controlled)"
            )
    assert not w.violations, "\n".join(w.violations)


# ------------------------------------------------------------ one example
async def run_example(cp: ControlPlane, steps: list[tuple[Any, ...]]) -> None:
    ns = f"il-{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(cp.create_namespace, ns)
    try:
        async with (
            Client(load_kubeconfig(cp.kubeconfig), user_agent="dpo-tests") as client,
            OperatorUnderTest(cp, config("mcs")) as op,
        ):
            w = World(client, ns)
            cm = await client.create(
                CONFIGMAPS, {"metadata": {"name": OWNER_CM, "namespace": ns}}, ns
            )
            w.owner_ref = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "name": OWNER_CM,
                "uid": cm["metadata"]["uid"],
                "controller": True,
            }
            since = await asyncio.to_thread(cp.audit.offset)
            watcher = asyncio.create_task(_watch(w))
            try:

                async def watching() -> bool:
                    return w.watching

                await eventually(watching)
                await _dgd(w)
                await _create_relay(w)
                await op.settle(timeout=20)
                for i, (step, pause) in enumerate(steps):
                    await run_step(w, step)
                    w.check_watch()
                    if pause:
                        await asyncio.sleep(pause / 1000)
                    _note(f"step {i}: {step} ok")
                await asyncio.sleep(0.3)
                await op.settle(timeout=20)

                async def converged() -> bool:
                    with contextlib.suppress(AssertionError):
                        w.check_watch()
                    if w.violations:
                        return True  # stop waiting: reported just below
                    return not await remaining_work(w, op)

                try:
                    await eventually(converged, timeout=20)
                except AssertionError as e:
                    raise AssertionError(f"not converged: {await remaining_work(w, op)}") from e
                await asyncio.sleep(0.3)  # let the watch catch up with the last writes
                w.check_watch()
                listed = {e["metadata"]["name"] for e in (await client.list(SE, ns)).items}
                assert listed == set(w.state), f"watch state {set(w.state)} != list {listed}"
                await audit_check(w, cp, since)
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await watcher
                with contextlib.suppress(Exception):
                    await set_cluster_id(client, None)
    finally:
        await asyncio.to_thread(cp.delete_namespace, ns)


#: Always run: take-over, release, foreign create, rename, relay and DGD re-creation.
FIXED: list[tuple[Any, ...]] = [
    (("create_export", f"{POOL}-gateway", "user"), 0),
    (("take_over", f"{POOL}-pool-relay"), 0),
    (("release", f"{POOL}-frontend"), 5),
    (("label_export", f"{POOL}-frontend"), 0),
    (("frontends", "both"), 0),
    (("edit_ref", f"{POOL}-chatv2"), 0),
    (("delete_relay",), 0),
    (("create_relay",), 20),
    (("delete_export", f"{POOL}-pool-relay"), 0),
    (("frontends", "gateway"), 0),
    (("recreate_dgd",), 0),
    (("discovery", "etcd"), 30),
    (("discovery", None), 0),
    (("cluster_id", "west"), 0),
]


def _show(steps: list[tuple[Any, ...]]) -> str:
    return "\n".join(f"  {i:2d}. {s!r} then sleep {p} ms" for i, (s, p) in enumerate(steps))


@pytest.fixture
def cp(control_plane: ControlPlane) -> ControlPlane:
    return control_plane


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    report_multiple_bugs=False,
)
@given(steps=st.lists(STEP, min_size=5, max_size=MAX_STEPS))
@example(steps=FIXED)
def test_user_interleavings_never_touch_foreign_exports_and_converge(
    cp: ControlPlane, steps: list[tuple[Any, ...]]
) -> None:
    note(f"steps:\n{_show(steps)}")
    started = time.monotonic()
    try:
        asyncio.run(run_example(cp, steps))
    except BaseException as e:
        print(f"FAILING SEQUENCE ({type(e).__name__}: {e}):\n{_show(steps)}")
        raise
    note(f"example took {time.monotonic() - started:.1f}s")
