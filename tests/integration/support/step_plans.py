"""A scenario's writes, computed from the operator's own planner: the steps the
step-failure matrix faults one at a time.

Pure: a synthetic world (the relay, its DGD, the objects named for it, the relay's
status as the server shows it, a clock) is planned with `pool.plan.make_plan` and
the real export rules, every planned write "succeeds" (it is applied to the
world), the status is reported as the reconciler reports it, and the next pass plans
again from there, until a pass writes nothing and waits for nothing (a hold that ends
by itself moves the clock to its end). With the feature off, the exports the
feature-off cleanup withdraws (`exports.cleanup.ours`) are writes of the world too.

So a scenario is data: a setup and a trigger, each a list of `Change`s; its steps are
the writes between the world the setup converges to and the one the trigger converges
to. A plan that gains a write gains a step, and the matrix a case, with no new test.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, cast

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.dgd import pool_from_object
from dynamo_pool_operator.api.mcs import ClusterID, Implementation, serviceexports
from dynamo_pool_operator.api.relay import RelayDefaults, relay_from_object
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.pool.exports.cleanup import ours as cleanup_withdraws
from dynamo_pool_operator.pool.exports.feature import (
    ExportCaches,
    PoolExports,
    relevant_exports,
)
from dynamo_pool_operator.pool.exports.plan import ExportRules
from dynamo_pool_operator.pool.model import (
    ActionResult,
    Outcome,
    Result,
    Snapshot,
    Verb,
)
from dynamo_pool_operator.pool.plan import make_plan
from dynamo_pool_operator.pool.report import report
from dynamo_pool_operator.runtime.cache.informer import Informer
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.meta import is_controlled_by, rfc3339
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES, Resource
from tests.integration.support.relay_fixtures import dgd_body, relay_body
from tests.unit.pool.support import dgds_services

#: The ServiceExport resource of the synthetic world (only its plural and kind matter).
EXPORTS = serviceexports("v1beta1")
#: The HTTP method each writing verb is sent as (`runtime/writes/guarded.py`).
METHODS = {Verb.CREATE: "POST", Verb.APPLY: "PATCH", Verb.WITHDRAW: "DELETE"}
#: The admission operation the API server asks a webhook about, by HTTP method (an
#: apply of an existing object is an UPDATE).
OPERATIONS = {"POST": "CREATE", "PATCH": "UPDATE", "DELETE": "DELETE"}
KINDS = {r.plural: r for r in (DEPLOYMENTS, SERVICES, EXPORTS)}
#: More passes than this without converging is a plan that never settles.
MAX_PASSES = 12


@dataclass(frozen=True, slots=True)
class Step:
    """One write of a scenario: HTTP method, resource (plural) and object name."""

    method: Literal["POST", "PATCH", "DELETE"]
    plural: str
    name: str

    @property
    def operation(self) -> str:
        return OPERATIONS[self.method]

    @property
    def resource(self) -> Resource:
        return KINDS[self.plural]

    @property
    def kind(self) -> str:
        return self.resource.kind

    def __str__(self) -> str:
        return f"{self.method} {self.plural} {self.name}"


@dataclass(frozen=True, slots=True)
class Change:
    """Something a user (or an operator restart) does to the world.

    - `create-pool`: the DGD and its relay (`spec`, `finalizers`) are created;
    - `delete-dgd`: the DGD is deleted;
    - `patch-relay`: `spec` is merged into the relay's spec;
    - `delete-relay`: the relay is deleted (it stays while a finalizer holds it);
    - `feature-off`: the operator restarts with `mcsImplementation: ""`.
    """

    kind: Literal["create-pool", "delete-dgd", "patch-relay", "delete-relay", "feature-off"]
    spec: Mapping[str, Any] = field(default_factory=dict)
    finalizers: tuple[str, ...] = ()


@dataclass
class World:
    """What the planner reads, kept as the API server would keep it."""

    pool: str
    namespace: str
    config: OperatorConfiguration
    relay: dict[str, Any] | None = None
    dgd: dict[str, Any] | None = None
    #: Deployments, Services and ServiceExports by (plural, name).
    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    status: dict[str, Any] | None = None
    now: datetime = datetime(2026, 1, 1, tzinfo=UTC)
    serial: int = 0
    #: Each step written since `converge` began, with the steps it must follow: those of
    #: earlier passes, the writes its action needs and, a withdrawal, every earlier
    #: write of its pass that makes or changes an object (the executor's order; steps
    #: nothing orders are sent at once, in any order).
    follows: dict[Step, set[Step]] = field(default_factory=dict)

    def _meta(self, prefix: str) -> dict[str, Any]:
        self.serial += 1
        return {
            "uid": f"{prefix}-{self.serial}",
            "resourceVersion": str(self.serial),
            "creationTimestamp": rfc3339(self.now),
            "generation": 1,
        }

    def change(self, change: Change) -> None:
        if change.kind == "create-pool":
            self.dgd = dgd_body(self.pool, self.namespace)
            self.dgd["metadata"].update(self._meta("dgd"))
            self.relay = relay_body(self.pool, self.namespace, **change.spec)
            self.relay["metadata"].update(self._meta("relay"), finalizers=list(change.finalizers))
        elif change.kind == "delete-dgd":
            self.dgd = None
        elif change.kind == "patch-relay":
            assert self.relay is not None
            self.relay["spec"] = {**self.relay["spec"], **copy.deepcopy(dict(change.spec))}
            self.relay["metadata"]["generation"] += 1
        elif change.kind == "delete-relay":
            assert self.relay is not None
            if self.relay["metadata"].get("finalizers"):
                self.relay["metadata"]["deletionTimestamp"] = rfc3339(self.now)
            else:
                self.relay = None  # the garbage collector takes what it controlled
        else:
            multi = dataclasses.replace(
                self.config.multi_cluster, mcs_implementation=Implementation.NONE
            )
            self.config = dataclasses.replace(self.config, multi_cluster=multi)

    # ------------------------------------------------------------ one pass
    def export_rules(self) -> ExportRules | None:
        implementation = Implementation(self.config.multi_cluster.mcs_implementation)
        if not implementation:
            return None
        never_run = Informer(cast("Client", object()), EXPORTS)
        after = timedelta(seconds=self.config.multi_cluster.unconfirmed_after)
        return PoolExports(
            ExportCaches(never_run),
            resource=EXPORTS,
            implementation=implementation,
            about_version=None,
            unconfirmed_after=after,
        ).rules

    def exports(self) -> dict[str, dict[str, Any]]:
        return {n: o for (p, n), o in self.objects.items() if p == EXPORTS.plural}

    def cleanup(self) -> list[Step]:
        """The feature-off cleanup: every export of ours withdrawn (in list order)."""
        if self.config.multi_cluster.mcs_implementation:
            return []
        steps = [Step("DELETE", EXPORTS.plural, n) for n, e in sorted(self.exports().items())]
        steps = [s for s in steps if cleanup_withdraws(self.exports()[s.name])]
        for s in steps:
            del self.objects[s.plural, s.name]
        return steps

    def one_pass(self) -> tuple[list[Step], datetime | None]:
        """Plan the relay once, carry out every write, report; returns the writes and
        when the plan changes by itself (None: only an event changes it)."""
        earlier = set(self.follows)
        steps = self.cleanup()
        for step in steps:
            self.follows.setdefault(step, set()).update(earlier)
        if self.relay is None:
            return steps, None
        pc = self.config.pool_relay
        defaults = RelayDefaults(pc.image, pc.port, pc.replicas, pc.image_pull_policy, pc.headless)
        relay = relay_from_object(self.relay, defaults)
        pool = pool_from_object(self.dgd) if self.dgd is not None else None
        name = names.relay_name(self.pool)
        mine = [e for e in self.exports().values() if is_controlled_by(e, relay.uid)]
        feature = self.export_rules()
        snapshot = Snapshot(
            relay,
            pool,
            {
                "Deployment": self.objects.get((DEPLOYMENTS.plural, name)),
                "Service": self.objects.get((SERVICES.plural, name)),
            },
            relevant_exports(relay, pool, self.exports().get, mine) if feature is not None else {},
            ClusterID(),
            shown_status=self.status,
            read_at=self.now,
            # Dynamo's operator made the frontends' Services (step_cases does, on the server).
            services=dgds_services(pool),
        )
        plan = make_plan(snapshot, feature, default_discovery_backend=self.config.discovery.backend)
        outcome = Outcome()
        written: dict[tuple[str, str], tuple[Verb, Step]] = {}
        for action in plan.actions:
            if action.verb in METHODS:
                step = self._carry_out(action.verb, action.resource, action.name, action.body)
                follows = earlier | {written[k][1] for k in action.needs if k in written}
                if action.verb is Verb.WITHDRAW:
                    follows |= {s for v, s in written.values() if v is not Verb.WITHDRAW}
                self.follows.setdefault(step, set()).update(follows)
                written[action.key] = (action.verb, step)
                steps.append(step)
            outcome.results.append(ActionResult(action, Result.DONE))
        said = report(snapshot, plan, outcome, feature, now=self.now)
        self.status = said.status
        return steps, said.recheck_at

    def _carry_out(
        self, verb: Verb, res: Resource, name: str, body: Mapping[str, Any] | None
    ) -> Step:
        key = (res.plural, name)
        if verb is Verb.WITHDRAW:
            del self.objects[key]
        elif verb is Verb.CREATE:
            assert body is not None
            made = copy.deepcopy(dict(body))
            made["metadata"].update(self._meta(res.kind.lower()))
            self.objects[key] = made
        else:
            assert body is not None
            live = self.objects[key]
            kept = {k: live["metadata"][k] for k in ("uid", "creationTimestamp", "generation")}
            updated = copy.deepcopy(dict(body))
            updated["metadata"].update(kept, resourceVersion=str(self.serial + 1))
            self.serial += 1
            self.objects[key] = updated
        return Step(cast("Literal['POST', 'PATCH', 'DELETE']", METHODS[verb]), res.plural, name)

    def converge(self) -> list[Step]:
        """Pass after pass (one second apart, or to the end of a hold) until nothing is
        written or waited for; the writes, in plan order (`follows`: the order the
        operator must keep)."""
        self.follows = {}
        steps: list[Step] = []
        for _ in range(MAX_PASSES):
            wrote, recheck = self.one_pass()
            steps += wrote
            if not wrote and recheck is None:
                return steps
            self.now = max(self.now + timedelta(seconds=1), recheck or self.now)
        raise AssertionError(f"the plan of {self.pool} did not settle in {MAX_PASSES} passes")


def scenario_steps(
    config: OperatorConfiguration,
    setup: Sequence[Change],
    trigger: Sequence[Change],
    *,
    pool: str,
    namespace: str = "synthetic",
) -> tuple[list[Step], World]:
    """The steps of a scenario (each once, in the order first written) and the world
    they converge to."""
    world = World(pool, namespace, config)
    for change in setup:
        world.change(change)
    world.converge()
    for change in trigger:
        world.change(change)
    steps = list(dict.fromkeys(world.converge()))
    return steps, world
