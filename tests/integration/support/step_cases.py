"""The live half of the step-failure matrix: a scenario's changes made through the API
server, the operator started and restarted as they say, the end state read back, and
the invariants checked against the relay's status and the API server's audit log.

The invariants, each about the pool `<d>`:

- **No export of a Service that is gone.** Our export `<d>-pool-relay` never exists
  while the Service `<d>-pool-relay` does not, neither now nor at any point of the
  audit log (replayed write by write).
- **No export of a relay without its pods.** Our export `<d>-pool-relay` is never
  created while the relay Deployment `<d>-pool-relay` does not exist (audit log).
- **No relay object goes before the exports that point at it.** No successful DELETE
  of the relay Deployment or Service while an export the scenario withdraws is still
  there; so a refused export DELETE leaves them in place.
- **The status says what is pending and why** (`status_problem`): not `Ready=True`, and
  the faulted object (or one its fault holds back) is named in a condition or a
  `status.exports[]` line, with the API server's answer (it names the webhook). The
  feature-off cleanup is the operator's, not a relay pass: it says so in a Warning
  Event on the export's relay (`warning_problem`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.relay import is_headless
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.localcluster.audit import AuditEvent
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import MERGE_PATCH, Client
from dynamo_pool_operator.runtime.objects.meta import Meta, controller_of
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SERVICES, Resource
from tests.harness import OPERATOR_AGENT, OperatorUnderTest
from tests.integration.support.export_fixtures import SE, config
from tests.integration.support.relay_fixtures import (
    DGDS,
    RELAYS,
    dgd_body,
    dynamos_services,
    relay_body,
)
from tests.integration.support.step_faults import WEBHOOK
from tests.integration.support.step_plans import Change, Step

POOL = "llama"
RELAY_OBJECT = names.relay_name(POOL)
FRONTEND_EXPORT = f"{POOL}-frontend"


def operator_config(implementation: str = "mcs", namespace: str = "") -> OperatorConfiguration:
    """The operator of the matrix: no implementation writes export conditions here, so an
    export counts as exported (unconfirmed) at once and a pool can be `Ready`."""
    multi = {"mcsImplementation": implementation, "confirmation": "none"}
    return config(implementation, multiCluster=multi, namespace={"restricted": namespace})


@dataclass(frozen=True)
class EndState:
    """What a scenario converges to once no write is refused."""

    published: bool
    #: `Ready`'s status is True exactly when this is "Ready"; else its reason.
    ready_reason: str
    exports: frozenset[str]
    relay_objects: bool
    headless: bool = True
    port: int = OperatorConfiguration().pool_relay.port


STEADY = EndState(True, "Ready", frozenset({RELAY_OBJECT, FRONTEND_EXPORT}), True)


class Live:
    """One case's namespace, its operator (started, restarted, stopped) and readers."""

    def __init__(self, cp: ControlPlane, admin: Client, namespace: str, kubeconfig: Path) -> None:
        self.cp, self.admin, self.ns, self.kubeconfig = cp, admin, namespace, kubeconfig
        self.op: OperatorUnderTest | None = None

    async def warning_problem(self, faulted: Step) -> str | None:
        """None when a Warning Event on the relay names the faulted object; else why not."""
        from dynamo_pool_operator.runtime.objects.resources import EVENTS

        for e in (await self.admin.list(EVENTS, self.ns)).items:
            related = e.get("related") or {}
            if (
                e.get("type") == "Warning"
                and (e.get("regarding") or {}).get("name") == POOL
                and related.get("name") == faulted.name
            ):
                return None
        return f"no Warning on relay {POOL} names {faulted.method} {faulted.plural} {faulted.name}"

    async def start_operator(self, implementation: str = "mcs") -> OperatorUnderTest:
        await self.stop_operator()
        cfg = operator_config(implementation, self.ns)
        self.op = OperatorUnderTest(self.cp, cfg, kubeconfig=self.kubeconfig)
        await self.op.start()
        return self.op

    async def stop_operator(self) -> None:
        if self.op is not None:
            await self.op.stop()
            self.op = None

    @property
    def operator(self) -> OperatorUnderTest:
        assert self.op is not None, "no operator running"
        return self.op

    async def change(self, change: Change) -> None:
        ns = self.ns
        if change.kind == "create-pool":
            dgd = await self.admin.create(DGDS, dgd_body(POOL, ns))
            await dynamos_services(self.admin, dgd)
            body = relay_body(POOL, ns, **change.spec)
            body["metadata"]["finalizers"] = list(change.finalizers)
            await self.admin.create(RELAYS, body)
        elif change.kind == "delete-dgd":
            await self.admin.delete(DGDS, POOL, ns)
        elif change.kind == "patch-relay":
            await self.admin.merge_patch(RELAYS, POOL, {"spec": dict(change.spec)}, ns)
        elif change.kind == "delete-relay":
            await self.admin.delete(RELAYS, POOL, ns)
        else:
            await self.start_operator("")

    async def close(self) -> None:
        await self.stop_operator()
        with contextlib.suppress(errors.NotFound):
            await self.admin.request(
                "PATCH",
                RELAYS.path(self.ns, POOL),
                body={"metadata": {"finalizers": None}},
                content_type=MERGE_PATCH,
            )

    # ------------------------------------------------------------ reading
    async def get(self, res: Resource, name: str) -> dict[str, Any] | None:
        try:
            return await self.admin.get(res, name, self.ns)
        except errors.NotFound:
            return None

    async def status(self) -> dict[str, Any]:
        relay = await self.get(RELAYS, POOL)
        return dict((relay or {}).get("status") or {})

    async def exports(self) -> dict[str, dict[str, Any]]:
        return {e["metadata"]["name"]: e for e in (await self.admin.list(SE, self.ns)).items}

    async def off_from(self, end: EndState) -> str | None:
        """How the cluster differs from `end` (None: it is there)."""
        relay = await self.get(RELAYS, POOL)
        if relay is None:
            return "the relay is gone"
        status = relay.get("status") or {}
        if status.get("observedGeneration") != relay["metadata"]["generation"]:
            return f"status not current: {status}"
        conds = {c["type"]: c for c in status.get("conditions") or []}
        ready, published = conds.get("Ready", {}), conds.get("Published", {})
        want_ready = "True" if end.ready_reason == "Ready" else "False"
        if (ready.get("status"), ready.get("reason")) != (want_ready, end.ready_reason):
            return f"Ready is {ready}, want {want_ready} {end.ready_reason}"
        if published.get("status") != ("True" if end.published else "False"):
            return f"Published is {published}"
        exports = await self.exports()
        if set(exports) != end.exports:
            return f"exports are {sorted(exports)}, want {sorted(end.exports)}"
        lines = {x["name"]: x for x in status.get("exports") or []}
        if any(lines.get(n, {}).get("state") != "Exported" for n in end.exports):
            return f"status.exports is {list(lines.values())}"
        deployment, service = (
            await self.get(DEPLOYMENTS, RELAY_OBJECT),
            await self.get(SERVICES, RELAY_OBJECT),
        )
        if (deployment is not None, service is not None) != (end.relay_objects,) * 2:
            return (
                f"relay Deployment there: {deployment is not None}, Service: {service is not None}"
            )
        if service is None or deployment is None:
            return None
        if is_headless(service) != end.headless:
            return f"the relay Service's clusterIP is {service['spec'].get('clusterIP')!r}"
        ports = [p["port"] for p in service["spec"]["ports"]]
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        if ports != [end.port] or container["ports"][0]["containerPort"] != end.port:
            return f"ports: Service {ports}, container {container['ports']}"
        return None

    async def reaches(self, end: EndState, timeout: float) -> None:
        """Wait (polling) until the cluster is in `end`, or fail saying how it is not."""
        deadline = asyncio.get_running_loop().time() + timeout
        while (off := await self.off_from(end)) is not None:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"not converged in {timeout}s: {off}")
            await asyncio.sleep(0.1)

    # ------------------------------------------------------------ invariants, now
    async def orphan_export_now(self) -> str | None:
        """Our export of the relay Service while that Service is absent or going."""
        export = (await self.exports()).get(RELAY_OBJECT)
        if export is None or (controller_of(export) or {}).get("kind") != RELAYS.kind:
            return None
        service = await self.get(SERVICES, RELAY_OBJECT)
        if service is None or Meta(service).terminating:
            return f"ServiceExport {RELAY_OBJECT} exists, its Service is {service and 'going'}"
        return None

    async def relay_objects_gone(self, kinds: set[str]) -> list[str]:
        """Which of the relay objects of these kinds are absent or being deleted."""
        return [
            f"{res.kind} {RELAY_OBJECT}"
            for res in (DEPLOYMENTS, SERVICES)
            if res.kind in kinds
            and ((obj := await self.get(res, RELAY_OBJECT)) is None or Meta(obj).terminating)
        ]

    async def audit_breaks(self, since: int, withdrawn_exports: frozenset[str]) -> list[str]:
        """The invariants the audit log broke since `since` (before the case's setup)."""

        def read() -> list[AuditEvent]:
            self.cp.audit.sync()
            return list(self.cp.audit.events(since))

        return replay(await asyncio.to_thread(read), self.ns, withdrawn_exports)


# ---------------------------------------------------------------- the status
def brief(status: dict[str, Any]) -> dict[str, Any]:
    """The status as an assertion message shows it: what each condition and line says."""
    return {
        "conditions": [
            f"{c.get('type')}={c.get('status')} {c.get('reason')}: {c.get('message')}"
            for c in status.get("conditions") or []
        ],
        "exports": status.get("exports") or [],
        "observedGeneration": status.get("observedGeneration"),
    }


def _texts(status: dict[str, Any]) -> list[str]:
    out = [str(c.get("message", "")) for c in status.get("conditions") or []]
    out += [f"{x.get('reason', '')} {x.get('message', '')}" for x in status.get("exports") or []]
    return out


def names_step(status: dict[str, Any], step: Step) -> bool:
    """The status names the step's object: a `status.exports[]` line of that export that
    is not `Exported`, or a condition or line whose message names the kind and object."""
    if step.kind == SE.kind:
        for line in status.get("exports") or []:
            if line.get("name") == step.name and line.get("state") != "Exported":
                return True
    kind = re.compile(rf"\b{step.kind}\b")
    return any(kind.search(t) and step.name in t for t in _texts(status))


def status_problem(status: dict[str, Any], faulted: Step, held_back: Sequence[Step]) -> str | None:
    """Why the status does not say what is pending and why (None: it does)."""
    conditions = status.get("conditions") or []
    ready: dict[str, Any] = next((c for c in conditions if c["type"] == "Ready"), {})
    if ready.get("status") == "True":
        return f"Ready=True while {faulted} is refused"
    named = [s for s in (faulted, *held_back) if names_step(status, s)]
    if not named:
        return f"nothing in the status names {faulted} (or what it holds back)"
    if not any(WEBHOOK in t for t in _texts(status)):
        return f"the status names {named[0]} but not the API server's answer ({WEBHOOK})"
    return None


# ---------------------------------------------------------------- the audit log
#: The resources of the objects a relay owns, as the audit log names them.
EXPORTS = "serviceexports"
OWNED = frozenset({"deployments", "services", EXPORTS})


def replay(
    events: Sequence[AuditEvent], namespace: str, withdrawn_exports: frozenset[str]
) -> list[str]:
    """Replay the successful creates and deletes of the pool's objects in `namespace`, in
    log order (the namespace is new: nothing existed before), and return each write that
    broke an invariant."""
    live: set[tuple[str, str]] = set()
    broken: list[str] = []
    orphaned = False
    for e in events:
        if e.namespace != namespace or e.subresource or e.code >= 300 or _dry_run(e):
            continue
        if e.verb not in ("create", "delete") or e.resource not in OWNED:
            continue
        what = f"{e.verb} {e.resource} {e.name} ({e.code}, {e.user_agent.split(' ')[0]})"
        exports_left = sorted(n for n in withdrawn_exports if (EXPORTS, n) in live)
        relay_object = e.name == RELAY_OBJECT and e.resource != EXPORTS
        if e.verb == "delete" and relay_object and exports_left:
            broken.append(f"{what} while the export(s) {exports_left} still existed")
        pods = ("deployments", RELAY_OBJECT)
        if (e.verb, e.resource, e.name) == ("create", EXPORTS, RELAY_OBJECT) and pods not in live:
            broken.append(f"{what} before Deployment {RELAY_OBJECT} existed")
        key = (e.resource, e.name)
        live.add(key) if e.verb == "create" else live.discard(key)
        was = orphaned
        orphaned = (EXPORTS, RELAY_OBJECT) in live and ("services", RELAY_OBJECT) not in live
        if orphaned and not was:
            broken.append(f"{what} left ServiceExport {RELAY_OBJECT} without its Service")
    return broken


def _dry_run(e: AuditEvent) -> bool:
    return "dryRun=" in str(e.raw.get("requestURI", ""))


def operator_writes(events: Sequence[AuditEvent], namespace: str) -> list[AuditEvent]:
    return [
        e
        for e in events
        if e.namespace == namespace
        and e.user_agent.startswith(OPERATOR_AGENT)
        and e.resource in OWNED
        and not e.subresource
    ]


@contextlib.asynccontextmanager
async def live_case(
    cp: ControlPlane, admin: Client, namespace: str, kubeconfig: Path
) -> AsyncIterator[Live]:
    live = Live(cp, admin, namespace, kubeconfig)
    try:
        yield live
    finally:
        await live.close()
