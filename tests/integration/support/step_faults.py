"""Faults at exactly one step: a validating admission webhook the real kube-apiserver
calls for one write of the operator and nothing else.

One HTTPS server per test module (`StepFaults`); each case registers its own
ValidatingWebhookConfiguration, whose single webhook matches:

- one operation on one resource (`matchPolicy: Equivalent`, so every served version),
- in the case's namespace (a namespace selector),
- by the operator's own user, for the object of that name (CEL match conditions on
  `request.userInfo.username` and `request.name`: a DELETE's admission object is the
  old object, the request's name is the same for every operation).

It answers per `Fault`: refuse with 403, fail (HTTP 500: the server answers 500
"failed calling webhook"), answer 409 Conflict (the code the API server then returns,
which the guarded writes take for a lost race), or sleep past `timeoutSeconds: 1`
(failurePolicy Fail: the write fails). Every message carries `WEBHOOK`, so a status
that shows the API server's answer shows where it came from.

A dry-run request is always allowed and counted as a probe: `inject` returns once a
dry run of that write by the operator's user reached the webhook, so the fault is in
force before the test moves on (the API server loads webhook configurations from a
watch, a moment after they are written).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import MERGE_PATCH, Client
from tests.faults.admission_server import CONFIGS, AdmissionServer, Reply, review
from tests.integration.support.step_plans import Step

#: The webhook's name: the API server quotes it in every answer it derives from ours.
WEBHOOK = "step-fault.dpo.test"
#: What the webhook is given to answer; a slower answer is a timeout.
TIMEOUT_SECONDS = 1
#: How long a `TIMEOUT` answer takes.
SLOW_ANSWER = TIMEOUT_SECONDS + 0.5


class Fault(enum.Enum):
    REFUSED = "403"
    FAILED = "500"
    CONFLICT = "409"
    TIMEOUT = "timeout"


@dataclass
class Injected:
    """One registered fault: how often it was applied (`hits`) and probed."""

    step: Step
    fault: Fault
    namespace: str
    config_name: str
    hits: int = 0
    probes: int = 0

    def message(self) -> str:
        return f"{WEBHOOK} injects {self.fault.value} on {self.step}"


class StepFaults:
    """`with StepFaults(cp, user) as faults:` — the server; `faults.inject(...)` a fault."""

    def __init__(self, cp: ControlPlane, user: str) -> None:
        self.cp, self.user = cp, user
        self._lock = threading.Lock()
        self._routes: dict[str, Injected] = {}
        self._server = AdmissionServer("dpo-step-faults", self._answer)

    def __enter__(self) -> StepFaults:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for injected in list(self._routes.values()):
            self._unregister(injected)
        self._server.stop()

    # ------------------------------------------------------------ injecting
    @contextlib.asynccontextmanager
    async def inject(
        self, step: Step, fault: Fault, namespace: str, probe: Client, *, timeout: float = 10.0
    ) -> AsyncIterator[Injected]:
        """While open, the operator's `step` in `namespace` meets `fault`. `probe` is a
        client of the operator's user (another user agent). Leaving lifts the fault."""
        key = uuid.uuid4().hex[:12]
        injected = Injected(step, fault, namespace, f"dpo-step-{namespace}-{key}")
        with self._lock:
            self._routes[key] = injected
        try:
            await asyncio.to_thread(self.cp.apply, self._configuration(injected, key))
            await self._until_probed(injected, probe, timeout)
            yield injected
        finally:
            await asyncio.to_thread(self._unregister, injected)

    def lift(self, injected: Injected) -> None:
        """Remove the fault's registration (the server stops calling the webhook a
        moment later); leaving `inject` does it too."""
        self._unregister(injected)

    def _unregister(self, injected: Injected) -> None:
        self.cp.request("DELETE", f"{CONFIGS}/{injected.config_name}")

    async def wait_hits(self, injected: Injected, count: int, timeout: float) -> int:
        """Wait until the fault was applied `count` times; returns how often it was."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if injected.hits >= count:
                    return injected.hits
            await asyncio.sleep(0.05)
        with self._lock:
            return injected.hits

    async def _until_probed(self, injected: Injected, probe: Client, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            before = injected.probes
            with contextlib.suppress(errors.ApiError):
                await _dry_run(probe, injected.step, injected.namespace)
            with self._lock:
                if injected.probes > before:
                    return
            await asyncio.sleep(0.05)
        raise TimeoutError(f"the fault on {injected.step} not in force within {timeout}s")

    def _configuration(self, injected: Injected, key: str) -> dict[str, Any]:
        res, step = injected.step.resource, injected.step
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": injected.config_name},
            "webhooks": [
                {
                    "name": WEBHOOK,
                    "clientConfig": self._server.client_config(f"/step/{key}"),
                    "rules": [
                        {
                            "apiGroups": [res.group],
                            "apiVersions": ["*"],
                            "resources": [res.plural],
                            "operations": [step.operation],
                            "scope": "Namespaced",
                        }
                    ],
                    "matchPolicy": "Equivalent",
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": injected.namespace}
                    },
                    "matchConditions": [
                        {
                            "name": "the-operator",
                            "expression": f"request.userInfo.username == '{self.user}'",
                        },
                        {"name": "the-object", "expression": f"request.name == '{step.name}'"},
                    ],
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": TIMEOUT_SECONDS,
                }
            ],
        }

    # ------------------------------------------------------------ serving
    def _answer(self, path: str, request: dict[str, Any]) -> Reply:
        key = path.split("?")[0].rsplit("/", 1)[-1]  # the server adds ?timeout=
        with self._lock:
            injected = self._routes.get(key)
            if injected is not None and request.get("dryRun"):
                injected.probes += 1
            elif injected is not None:
                injected.hits += 1
        if injected is None or request.get("dryRun"):
            return review({"uid": request["uid"], "allowed": True})
        fault = injected.fault
        if fault is Fault.FAILED:
            return 500, injected.message().encode()
        if fault is Fault.TIMEOUT:
            time.sleep(SLOW_ANSWER)
            return review({"uid": request["uid"], "allowed": True})
        code, reason = (403, "Forbidden") if fault is Fault.REFUSED else (409, "Conflict")
        status = {"code": code, "reason": reason, "message": injected.message()}
        return review({"uid": request["uid"], "allowed": False, "status": status})


# ---------------------------------------------------------------- probes
def _probe_body(step: Step, namespace: str) -> dict[str, Any]:
    """A valid object of the step's kind and name, for a dry-run create."""
    meta = {"name": step.name, "namespace": namespace}
    res = step.resource
    body: dict[str, Any] = {"apiVersion": res.api_version, "kind": res.kind, "metadata": meta}
    if res.kind == "Service":
        body["spec"] = {"clusterIP": "None", "ports": [{"port": 80}]}
    elif res.kind == "Deployment":
        labels = {"probe": "step-fault"}
        body["spec"] = {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "probe", "image": "probe:1"}]},
            },
        }
    return body


async def _dry_run(client: Client, step: Step, namespace: str) -> None:
    """The step's write as a dry run (admission runs, nothing is stored)."""
    res, dry = step.resource, {"dryRun": "All"}
    if step.method == "POST":
        body = _probe_body(step, namespace)
        await client.request("POST", res.path(namespace), params=dry, body=body)
    elif step.method == "DELETE":
        await client.request("DELETE", res.path(namespace, step.name), params=dry)
    else:
        patch = {"metadata": {"annotations": {"dpo-probe": str(time.monotonic_ns())}}}
        await client.request(
            "PATCH",
            res.path(namespace, step.name),
            params=dry,
            body=patch,
            content_type=MERGE_PATCH,
        )
