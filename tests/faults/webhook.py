"""A validating admission webhook the real kube-apiserver calls, whose answer a test
switches at run time: allow, fail with HTTP 500, or refuse with 429 + Retry-After.

It is registered for the operator's writes only (a CEL match condition on the user's
group), in one namespace, on the resources the operator owns — not on Events or
Leases, so leadership and reporting keep working while its writes are refused.
"""

from __future__ import annotations

import enum
import threading
from collections import Counter
from typing import Any

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from tests.faults.admission_server import CONFIGS, AdmissionServer, Reply, review


class Mode(enum.Enum):
    ALLOW = "allow"
    FAIL_500 = "500"  # the webhook itself fails: the API server answers 500
    THROTTLE_429 = "429"  # the webhook refuses with 429 and retryAfterSeconds


class Webhook:
    """`with Webhook(cp, namespace, group) as hook:` — serving, registered, then removed."""

    def __init__(
        self, cp: ControlPlane, namespace: str, group: str, *, retry_after: int = 1
    ) -> None:
        self.cp, self.namespace, self.group = cp, namespace, group
        self.retry_after = retry_after
        self.mode = Mode.ALLOW
        self.name = f"dpo-faults-{namespace}"
        #: (mode, resource, operation) -> requests answered.
        self.answered: Counter[tuple[Mode, str, str]] = Counter()
        self._lock = threading.Lock()
        self._server = AdmissionServer("dpo-webhook", self._answer)

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> Webhook:
        self._server.start()
        self.cp.apply(self._configuration())
        return self

    def __exit__(self, *exc: object) -> None:
        self.cp.request("DELETE", f"{CONFIGS}/{self.name}")
        self._server.stop()

    def set(self, mode: Mode) -> None:
        with self._lock:
            self.mode = mode

    def refused(self, mode: Mode | None = None) -> int:
        with self._lock:
            return sum(
                n
                for (m, _, _), n in self.answered.items()
                if m is not Mode.ALLOW and (mode is None or m is mode)
            )

    # ------------------------------------------------------------ registration
    def _configuration(self) -> dict[str, Any]:
        rules = [
            (["apps"], ["deployments"]),
            ([""], ["services"]),
            (["multicluster.x-k8s.io"], ["serviceexports"]),
            (["nvidia.com"], ["dynamopoolrelays", "dynamopoolrelays/status"]),
        ]
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": self.name},
            "webhooks": [
                {
                    "name": "faults.dpo.test",
                    "clientConfig": self._server.client_config("/validate"),
                    "rules": [
                        {
                            "apiGroups": groups,
                            "apiVersions": ["*"],
                            "resources": resources,
                            "operations": ["CREATE", "UPDATE", "DELETE"],
                            "scope": "Namespaced",
                        }
                        for groups, resources in rules
                    ],
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": self.namespace}
                    },
                    "matchConditions": [
                        {
                            "name": "operator-only",
                            "expression": f"'{self.group}' in request.userInfo.groups",
                        }
                    ],
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 5,
                }
            ],
        }

    # ------------------------------------------------------------ serving
    def _answer(self, path: str, request: dict[str, Any]) -> Reply:
        res = request["resource"]["resource"]
        if request.get("subResource"):
            res += "/" + request["subResource"]
        with self._lock:
            mode = self.mode
            self.answered[mode, res, request["operation"]] += 1
        if mode is Mode.FAIL_500:
            return 500, b"webhook is down (injected)"
        if mode is Mode.THROTTLE_429:
            status = {
                "code": 429,
                "reason": "TooManyRequests",
                "message": "slow down (injected)",
                "details": {"retryAfterSeconds": self.retry_after},
            }
            return review({"uid": request["uid"], "allowed": False, "status": status})
        return review({"uid": request["uid"], "allowed": True})
