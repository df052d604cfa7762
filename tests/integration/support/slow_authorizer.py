"""A slow list, made by the API server: an authorization webhook that takes its time.

A list that takes longer than the operator waits for a new cache (10 s) happens in real
clusters: a large collection, a loaded etcd, a slow conversion or authorization webhook.
The last is the one a test can dial precisely and leave real: the kube-apiserver is
started with a structured authorizer chain (`--authorization-config`) whose first
authorizer is this webhook, called (by CEL match conditions) only for the `list` and
`watch` requests of chosen resources by one user. While a (resource, version) is slow,
the webhook holds each such request `delay` seconds, then answers "no opinion", so RBAC
decides as usual. The request itself, the operator's informer and client, and the
answer are all real; nothing in the operator's process is touched.

Requests of users in `system:masters` (the tests' admin) never reach an authorizer.
The webhook serves plain HTTP on loopback in a thread of its own, so a held request
does not hold the test's event loop.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml


class SlowAuthorizer:
    """`with SlowAuthorizer(dir, user, {"serviceexports"}) as slow:` then start a
    control plane with `slow.apiserver_args`, and `slow.hold("serviceexports",
    "v1beta1", 13)` to make that version's lists and watches take 13 s."""

    def __init__(self, directory: Path, user: str, resources: set[str]) -> None:
        self.user = user
        self.resources = resources
        self._dir = directory
        self._lock = threading.Lock()
        self._held: dict[tuple[str, str], float] = {}
        #: Every request the webhook saw: (verb, resource, version, seconds held).
        self.seen: list[tuple[str, str, str, float]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> SlowAuthorizer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def hold(self, resource: str, version: str, seconds: float) -> None:
        """Hold each list and watch of `resource` at `version` for `seconds` (0: not)."""
        with self._lock:
            self._held[(resource, version)] = seconds

    def seen_of(self, resource: str, version: str) -> list[tuple[str, float]]:
        with self._lock:
            return [(verb, held) for verb, r, v, held in self.seen if (r, v) == (resource, version)]

    @property
    def apiserver_args(self) -> list[str]:
        """The kube-apiserver flag: this webhook first, then RBAC."""
        port = self._server.server_address[1]
        kubeconfig = self._dir / "slow-authorizer.kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {"name": "slow", "cluster": {"server": f"http://127.0.0.1:{port}/"}}
                    ],
                    "users": [{"name": "apiserver", "user": {}}],
                    "contexts": [
                        {"name": "slow", "context": {"cluster": "slow", "user": "apiserver"}}
                    ],
                    "current-context": "slow",
                }
            )
        )
        resources = ", ".join(f"'{r}'" for r in sorted(self.resources))
        match = (
            "has(request.resourceAttributes) && "
            "request.resourceAttributes.verb in ['list', 'watch'] && "
            f"request.resourceAttributes.resource in [{resources}] && "
            f"request.user == '{self.user}'"
        )
        config = self._dir / "authorization-config.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "apiserver.config.k8s.io/v1",
                    "kind": "AuthorizationConfiguration",
                    "authorizers": [
                        {
                            "type": "Webhook",
                            "name": "slow-lists.dpo.test",
                            "webhook": {
                                "timeout": "30s",
                                "authorizedTTL": "1s",
                                "unauthorizedTTL": "1s",
                                "cacheAuthorizedRequests": False,
                                "cacheUnauthorizedRequests": False,
                                "subjectAccessReviewVersion": "v1",
                                "matchConditionSubjectAccessReviewVersion": "v1",
                                "failurePolicy": "NoOpinion",
                                "connectionInfo": {
                                    "type": "KubeConfigFile",
                                    "kubeConfigFile": str(kubeconfig),
                                },
                                "matchConditions": [{"expression": match}],
                            },
                        },
                        {"type": "RBAC", "name": "rbac"},
                    ],
                }
            )
        )
        return [f"--authorization-config={config}"]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                attrs: dict[str, Any] = review.get("spec", {}).get("resourceAttributes", {})
                key = (str(attrs.get("resource", "")), str(attrs.get("version", "")))
                with owner._lock:
                    delay = owner._held.get(key, 0.0)
                    owner.seen.append((str(attrs.get("verb", "")), *key, delay))
                if delay:
                    time.sleep(delay)
                body = json.dumps(
                    {
                        "apiVersion": "authorization.k8s.io/v1",
                        "kind": "SubjectAccessReview",
                        "status": {"allowed": False},  # no opinion: RBAC decides
                    }
                ).encode()
                # The API server hangs up when the request it authorizes was cancelled.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: the test reads `seen`

        return Handler
