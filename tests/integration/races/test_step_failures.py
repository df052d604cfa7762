"""The step-failure matrix: every write of every plan with dependent actions, refused
in every way the API server can refuse it, one at a time.

Scenarios are data (`SCENARIOS`: a setup, a trigger, the end state). Their steps are
computed at collection time from the operator's own planner (`step_plans.py`), so a
plan that gains a write gains cases here with no new test. Each case:

1. sets the scenario up (a published pool, Ready) and injects the fault at exactly that
   step, for the operator's user only (`step_faults.py`: a real admission webhook);
2. triggers the scenario and waits until the faulted write was tried and retried;
3. asserts while the fault holds: no export of a Service that is gone, no relay object
   deleted before the exports that point at it, and a status that is not `Ready=True`
   and names what is refused or held back, with the API server's answer;
4. lifts the fault: the retries alone converge to the end state, a second reconcile
   writes nothing, and the audit log, replayed write by write, never broke an
   invariant (`step_cases.py`).

`test_each_scenario_writes_exactly_its_steps` runs each scenario without a fault and
compares the operator's writes (audit log) with the generated steps, so the steps
cannot drift from what the operator does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dynamo_pool_operator.api.relay import is_headless
from dynamo_pool_operator.localcluster.audit import AuditEvent
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from tests.integration.support.planes import scratch_namespace
from tests.integration.support.step_cases import (
    POOL,
    RELAY_OBJECT,
    STEADY,
    EndState,
    Live,
    brief,
    live_case,
    operator_config,
    operator_writes,
    status_problem,
)
from tests.integration.support.step_faults import Fault, StepFaults
from tests.integration.support.step_plans import Change, Step, World, scenario_steps

pytestmark = pytest.mark.timeout(120)

#: The operator's own user (system:masters: RBAC is not what this matrix is about).
OPERATOR_USER = "dpo-step-matrix"
HOLD = "example.com/hold"
PUBLISH = Change("create-pool", {"replicas": 1})
PUBLISH_HELD = Change("create-pool", {"replicas": 1}, (HOLD,))
WITHDRAWN = frozenset[str]()
#: A refused write is retried with backoff (the first retries within milliseconds; the
#: feature-off cleanup's after 0.5 s; a timed-out one takes a second each).
RETRIED_WITHIN = 8.0


@dataclass(frozen=True)
class Scenario:
    """What is set up (an empty list: nothing, a published pool is reached otherwise),
    what then changes, and what the cluster must come to."""

    name: str
    setup: tuple[Change, ...]
    trigger: tuple[Change, ...]
    end: EndState
    #: Where what is pending is said: the relay's status, or (the feature-off cleanup,
    #: the operator's and not a relay's pass: with no implementation configured the
    #: status has no export condition) a Warning Event on the export's relay.
    reported_in: str = "status"


SCENARIOS = (
    Scenario("publish", (), (PUBLISH,), STEADY),
    Scenario(
        "withdraw",
        (PUBLISH,),
        (Change("delete-dgd"),),
        EndState(False, "DGDNotFound", WITHDRAWN, relay_objects=False),
    ),
    Scenario(
        "service-shape",
        (PUBLISH,),
        (Change("patch-relay", {"service": {"headless": False}}),),
        EndState(True, "Ready", STEADY.exports, True, headless=False),
    ),
    Scenario(
        "port",
        (PUBLISH,),
        (Change("patch-relay", {"port": 9100}),),
        EndState(True, "Ready", STEADY.exports, True, port=9100),
    ),
    Scenario(
        "feature-off",
        (PUBLISH,),
        (Change("feature-off"),),
        EndState(True, "Ready", WITHDRAWN, True),
        reported_in="events",
    ),
    Scenario(
        "relay-deleted",
        (PUBLISH_HELD,),
        (Change("delete-relay"),),
        EndState(False, "RelayTerminating", WITHDRAWN, relay_objects=False),
    ),
)


def _plan(scenario: Scenario) -> tuple[list[Step], World]:
    return scenario_steps(operator_config(), scenario.setup, scenario.trigger, pool=POOL)


#: Each scenario's steps, from the planner, once; and what each must follow.
PLANNED = {s.name: _plan(s) for s in SCENARIOS}
STEPS = {name: steps for name, (steps, _) in PLANNED.items()}


def steps_of(scenario: Scenario) -> list[Step]:
    return STEPS[scenario.name]


def faults_for(step: Step) -> tuple[Fault, ...]:
    return tuple(Fault)


CASES = [
    pytest.param(
        s, step, fault, id=f"{s.name}/{step.method}-{step.plural}-{step.name}/{fault.value}"
    )
    for s in SCENARIOS
    for step in steps_of(s)
    for fault in faults_for(step)
]


# ---------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def operator_kubeconfig(node_plane: ControlPlane) -> Path:
    return node_plane.user_kubeconfig(OPERATOR_USER, groups=("system:masters",))


@pytest.fixture(scope="module")
def faults(node_plane: ControlPlane) -> Iterator[StepFaults]:
    with StepFaults(node_plane, OPERATOR_USER) as server:
        yield server


@pytest.fixture
def pool_namespace(node_plane: ControlPlane) -> Iterator[str]:
    with scratch_namespace(node_plane, "s") as name:
        yield name


@pytest.fixture
async def probe(operator_kubeconfig: Path) -> AsyncIterator[Client]:
    """The operator's user under another user agent: the webhook's dry-run probes."""
    async with Client(load_kubeconfig(operator_kubeconfig), user_agent="dpo-step-probe") as c:
        yield c


@pytest.fixture
async def live(
    node_plane: ControlPlane, node_client: Client, pool_namespace: str, operator_kubeconfig: Path
) -> AsyncIterator[Live]:
    async with live_case(node_plane, node_client, pool_namespace, operator_kubeconfig) as case:
        yield case


async def set_up(live: Live, scenario: Scenario) -> None:
    await live.start_operator()
    for change in scenario.setup:
        await live.change(change)
    if scenario.setup:
        await live.reaches(STEADY, timeout=30)
        await live.operator.settle()


async def trigger(live: Live, scenario: Scenario) -> None:
    for change in scenario.trigger:
        await live.change(change)


async def converged(live: Live, scenario: Scenario, since: int) -> None:
    """The end state, a second pass that writes nothing, and an audit log that never
    broke an invariant."""
    await live.reaches(scenario.end, timeout=40)
    writes = await live.operator.reconcile_again((live.ns, POOL))
    assert writes == [], (
        f"a second reconcile wrote {[(w.verb, w.resource, w.name) for w in writes]}"
    )
    broken = await live.audit_breaks(since, withdrawn_exports(scenario))
    assert broken == [], broken


def withdrawn_exports(scenario: Scenario) -> frozenset[str]:
    """The exports the scenario withdraws: the relay objects must outlast them."""
    return frozenset(
        s.name for s in steps_of(scenario) if s.method == "DELETE" and s.kind == "ServiceExport"
    )


def _synced_events(cp: ControlPlane, since: int) -> list[AuditEvent]:
    cp.audit.sync()
    return list(cp.audit.events(since))


# ---------------------------------------------------------------- the matrix
@pytest.mark.parametrize(("scenario", "step", "fault"), CASES)
async def test_a_refused_step_breaks_no_dependency_is_reported_and_converges_when_lifted(
    scenario: Scenario,
    step: Step,
    fault: Fault,
    live: Live,
    faults: StepFaults,
    probe: Client,
) -> None:
    since = live.cp.audit.offset()
    await set_up(live, scenario)
    steps = steps_of(scenario)
    held_back = steps[steps.index(step) + 1 :]
    async with faults.inject(step, fault, live.ns, probe) as injected:
        await trigger(live, scenario)
        hits = await faults.wait_hits(injected, 2, timeout=RETRIED_WITHIN)
        assert hits >= 1, f"{step} was never tried"
        broken = await live.audit_breaks(since, withdrawn_exports(scenario))
        assert broken == [], broken
        orphan = await live.orphan_export_now()
        assert orphan is None, orphan
        if step.method == "DELETE" and step.kind == "ServiceExport":
            deleted_later = {s.kind for s in held_back if s.method == "DELETE"}
            gone = await live.relay_objects_gone(deleted_later)
            assert gone == [], f"{gone} deleted while {step} is refused"
        problem: str | None = "status not read"
        for _ in range(30):
            if scenario.reported_in == "events":
                problem = await live.warning_problem(step)
            else:
                problem = status_problem(await live.status(), step, held_back)
            if problem is None:
                break
            await asyncio.sleep(0.1)
        assert problem is None, f"{problem}; status: {brief(await live.status())}"
        assert hits >= 2, f"{step} was tried once and not again within {RETRIED_WITHIN}s"
    await converged(live, scenario, since)


# ---------------------------------------------------------------- the steps are real
@pytest.mark.parametrize("scenario", [pytest.param(s, id=s.name) for s in SCENARIOS])
def test_the_planner_takes_each_scenario_to_its_end_state(scenario: Scenario) -> None:
    """The steps are those of a plan that gets there: the synthetic world the planner
    converges to is the scenario's end state (the data is checked against the planner
    here and against the API server in every case)."""
    _, world = _plan(scenario)
    end = scenario.end
    exports = {n for (plural, n) in world.objects if plural == "serviceexports"}
    assert exports == end.exports
    service = world.objects.get(("services", RELAY_OBJECT))
    deployment = world.objects.get(("deployments", RELAY_OBJECT))
    assert (service is not None, deployment is not None) == (end.relay_objects,) * 2
    if service is not None:
        assert is_headless(service) == end.headless
        assert [p["port"] for p in service["spec"]["ports"]] == [end.port]
    assert world.status is not None
    published = next(c for c in world.status["conditions"] if c["type"] == "Published")
    assert published["status"] == ("True" if end.published else "False")
    if not end.published:
        assert published["reason"] == end.ready_reason


@pytest.mark.parametrize("scenario", [pytest.param(s, id=s.name) for s in SCENARIOS])
async def test_each_scenario_writes_exactly_its_steps(scenario: Scenario, live: Live) -> None:
    """Without a fault the operator makes exactly the generated writes, each once, each
    after the writes it must follow (its pass's needs, earlier passes; writes nothing
    orders go at once, in any order). Not steps: a create's hand-over of its fields to
    the apply manager (a merge patch, right after the create or, when it lost a race, in
    a later pass), and a DELETE answered 404 (its object already gone, the cache not yet
    told)."""
    start = live.cp.audit.offset()
    await set_up(live, scenario)
    since = live.cp.audit.offset()
    await trigger(live, scenario)
    await converged(live, scenario, start)
    events = await asyncio.to_thread(_synced_events, live.cp, since)
    methods = {"create": "POST", "patch": "PATCH", "delete": "DELETE"}
    made = [
        f"{methods.get(e.verb, e.verb)} {e.resource} {e.name}"
        for e in operator_writes(events, live.ns)
        if e.code < 300 and not (e.verb == "patch" and "force=true" not in _uri(e))
    ]
    planned = steps_of(scenario)
    assert sorted(made) == sorted(str(s) for s in planned)
    follows = PLANNED[scenario.name][1].follows
    for i, step in enumerate(planned):
        late = [str(f) for f in follows[step] if made.index(str(f)) > made.index(str(step))]
        assert not late, f"{step} was written before {late} (at {i} of {made})"


def _uri(e: AuditEvent) -> str:
    """An apply is a PATCH that forces (`force=true`); the hand-over's merge patch not."""
    return str(e.raw.get("requestURI", ""))
