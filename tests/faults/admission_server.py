"""An HTTPS server on 127.0.0.1, with a CA of its own, that the real kube-apiserver calls
as an admission webhook: the one server behind every webhook the tests register.

What it answers is the caller's (`answer(path, request)`); this module holds what
every such server shares: the certificate, the TLS socket, the thread, the cleanup
and the AdmissionReview envelope.
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import tempfile
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from dynamo_pool_operator.localcluster.certs import TinyCA

#: Where ValidatingWebhookConfigurations live, to register and delete them.
CONFIGS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"

#: (HTTP status, body) for one call: `review(...)` for an answer, else a failure.
Reply = tuple[int, bytes]
#: The request path (the API server appends `?timeout=`) and the AdmissionReview's request.
Answer = Callable[[str, dict[str, Any]], Reply]


def review(response: dict[str, Any]) -> Reply:
    """An AdmissionReview answer (HTTP 200) carrying `response`."""
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
    return 200, json.dumps({**body, "response": response}).encode()


class AdmissionServer:
    """Serving from `start()` to `stop()`; `client_config(path)` is what a webhook
    registration needs to reach it."""

    def __init__(self, name: str, answer: Answer) -> None:
        ca = TinyCA(f"{name}-ca")
        pair = ca.issue("127.0.0.1", ips=("127.0.0.1",), server=True)
        self._ca_pem = ca.cert_pem
        self._dir = Path(tempfile.mkdtemp(prefix=f"{name}-"))
        (self._dir / "tls.pem").write_bytes(pair.cert_pem + pair.key_pem)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(answer))
        self._server.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self._dir / "tls.pem")
        self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def client_config(self, path: str) -> dict[str, str]:
        port = self._server.server_address[1]
        return {
            "url": f"https://127.0.0.1:{port}{path}",
            "caBundle": base64.b64encode(self._ca_pem).decode(),
        }

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        for f in self._dir.iterdir():
            f.unlink()
        self._dir.rmdir()


def _handler(answer: Answer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["request"]
            code, body = answer(self.path, request)
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the API server gave up waiting
                self.wfile.write(body)

        def log_message(self, *args: Any) -> None:  # quiet
            pass

    return Handler
