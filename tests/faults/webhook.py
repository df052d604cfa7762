"""A validating admission webhook the real kube-apiserver calls, whose answer a test
switches at run time: allow, fail with HTTP 500, or refuse with 429 + Retry-After.

It is registered for the operator's writes only (a CEL match condition on the user's
group), in one namespace, on the resources the operator owns — not on Events or
Leases, so leadership and reporting keep working while its writes are refused.
"""

from __future__ import annotations

import base64
import enum
import json
import ssl
import tempfile
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from dynamo_pool_operator.localcluster.certs import TinyCA
from dynamo_pool_operator.localcluster.controlplane import ControlPlane

CONFIGS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


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
        ca = TinyCA("dpo-webhook-ca")
        pair = ca.issue("127.0.0.1", ips=("127.0.0.1",), server=True)
        self._ca_pem = ca.cert_pem
        self._dir = Path(tempfile.mkdtemp(prefix="dpo-webhook-"))
        (self._dir / "tls.pem").write_bytes(pair.cert_pem + pair.key_pem)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self._dir / "tls.pem")
        self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> Webhook:
        self._thread.start()
        self.cp.apply(self._configuration())
        return self

    def __exit__(self, *exc: object) -> None:
        self.cp.request("DELETE", f"{CONFIGS}/{self.name}")
        self._server.shutdown()
        self._server.server_close()
        for f in self._dir.iterdir():
            f.unlink()
        self._dir.rmdir()

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
        port = self._server.server_address[1]
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
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{port}/validate",
                        "caBundle": base64.b64encode(self._ca_pem).decode(),
                    },
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
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request = review["request"]
                res = request["resource"]["resource"]
                if request.get("subResource"):
                    res += "/" + request["subResource"]
                with hook._lock:
                    mode = hook.mode
                    hook.answered[mode, res, request["operation"]] += 1
                if mode is Mode.FAIL_500:
                    self._send(500, b"webhook is down (injected)")
                    return
                response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
                if mode is Mode.THROTTLE_429:
                    response = {
                        "uid": request["uid"],
                        "allowed": False,
                        "status": {
                            "code": 429,
                            "reason": "TooManyRequests",
                            "message": "slow down (injected)",
                            "details": {"retryAfterSeconds": hook.retry_after},
                        },
                    }
                body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
                self._send(200, json.dumps({**body, "response": response}).encode())

            def _send(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # quiet
                pass

        return Handler
