"""`/healthz`, `/readyz` and `/metrics` on aiohttp, as controller-runtime serves them.

`/healthz` passes while the loop runs and every liveness check passes (a wedged loop
cannot answer: that is what the kubelet should restart). `/readyz` passes once the
caches synced; a follower is ready too (warm caches, quick takeover). Secure `/metrics`
is HTTPS and only for a token authorized for `get /metrics` (auth.py).

Probes and metrics may share an address; secure metrics never do (kubelet probes are
plain HTTP). Only a metrics listener of its own bounds its connections (listener.py):
a refused probe restarts the pod.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from dynamo_pool_operator.runtime.serving.auth import DelegatedAuth
from dynamo_pool_operator.runtime.serving.listener import (
    IDLE_TIMEOUT,
    MAX_CONNECTIONS,
    BoundedListener,
)
from dynamo_pool_operator.runtime.serving.tls import ServingCertificate

log = logging.getLogger(__name__)

Check = Callable[[], bool]


def parse_address(address: str) -> tuple[str, int] | None:
    """`host:port` (empty host = all interfaces) -> (host, port); "0" or "" disables."""
    if address in ("", "0"):
        return None
    host, _, port = address.rpartition(":")
    return (host or "0.0.0.0", int(port))


@dataclass
class Probes:
    """Named checks; a probe passes when all of its checks return True."""

    liveness: dict[str, Check] = field(default_factory=dict)
    readiness: dict[str, Check] = field(default_factory=dict)

    @staticmethod
    def _run(checks: dict[str, Check]) -> tuple[bool, str]:
        lines, ok = [], True
        for name, check in sorted(checks.items()):
            try:
                passed = bool(check())
            except Exception:  # a broken check fails its probe, it does not crash the server
                log.exception("probe check %s raised", name)
                passed = False
            ok = ok and passed
            lines.append(f"[{'+' if passed else '-'}]{name} {'ok' if passed else 'failed'}")
        lines.append("ok" if ok else "not ok")
        return ok, "\n".join(lines) + "\n"

    def healthz(self) -> tuple[bool, str]:
        return self._run(self.liveness)

    def readyz(self) -> tuple[bool, str]:
        return self._run(self.readiness)


class ProbeServer:
    """Serves the probes and metrics on one or two addresses until `stop()`."""

    def __init__(
        self,
        probes: Probes,
        registry: CollectorRegistry,
        *,
        health_address: str,
        metrics_address: str,
        metrics_tls: ServingCertificate | None = None,
        metrics_auth: DelegatedAuth | None = None,
        metrics_max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        if (metrics_tls is None) != (metrics_auth is None):
            raise ValueError("secure metrics need both a certificate and an authenticator")
        self.probes = probes
        self.registry = registry
        self._health = parse_address(health_address)
        self._metrics = parse_address(metrics_address)
        self.metrics_tls = metrics_tls
        self.metrics_auth = metrics_auth
        self.metrics_max_connections = metrics_max_connections
        self._cert_watch: asyncio.Task[None] | None = None
        self._runners: list[web.AppRunner] = []
        self._listeners: list[BoundedListener] = []
        #: The (host, port) pairs actually bound (port 0 resolves to a free port).
        self.bound: dict[str, tuple[str, int]] = {}

    def _probe_handler(self, probe: Callable[[], tuple[bool, str]]) -> Callable[..., object]:
        async def handle(_: web.Request) -> web.Response:
            ok, text = probe()
            return web.Response(status=200 if ok else 500, text=text)

        return handle

    async def _metrics_handler(self, request: web.Request) -> web.Response:
        if self.metrics_auth is not None:
            verdict = await self.metrics_auth.verdict(
                request.headers.get("Authorization"), request.method.lower(), request.path
            )
            if not verdict.allowed:
                headers = {}
                if verdict.retry_after is not None:
                    headers["Retry-After"] = str(verdict.retry_after)
                return web.Response(
                    status=verdict.status, text=verdict.message + "\n", headers=headers
                )
        # `?name[]=a`: only those series' collectors run (the relay status collector
        # renders a series per relay: ~0.1 s at 5,000 relays, in the event loop).
        names = request.query.getall("name[]", [])
        registry = self.registry.restricted_registry(names) if names else self.registry
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self) -> None:
        health_routes = [
            web.get("/healthz", self._probe_handler(self.probes.healthz)),  # type: ignore[arg-type]
            web.get("/readyz", self._probe_handler(self.probes.readyz)),  # type: ignore[arg-type]
        ]
        metrics_routes = [web.get("/metrics", self._metrics_handler)]
        # Secure metrics get a listener of their own (kubelet probes speak plain HTTP);
        # the configuration refuses one port for both, so only port 0 gets here.
        shared = self.metrics_tls is None and self._health == self._metrics
        if shared and self._health is not None:
            await self._serve("health", self._health, health_routes + metrics_routes)
            self.bound["metrics"] = self.bound["health"]
            return
        if self._health is not None:
            await self._serve("health", self._health, health_routes)
        if self._metrics is not None:
            tls = self.metrics_tls.context if self.metrics_tls is not None else None
            await self._serve("metrics", self._metrics, metrics_routes, tls, bounded=True)
            if self.metrics_tls is not None:
                self._cert_watch = asyncio.create_task(
                    self.metrics_tls.watch(), name="metrics certificate watch"
                )

    async def _serve(
        self,
        name: str,
        address: tuple[str, int],
        routes: list[web.RouteDef],
        tls: ssl.SSLContext | None = None,
        *,
        bounded: bool = False,
    ) -> None:
        """Serve `routes` on `address`; `bounded`: at most `metrics_max_connections`."""
        app = web.Application()
        app.add_routes(routes)
        # An idle connection closes within minutes, not aiohttp's hour: it holds a place.
        runner = web.AppRunner(app, access_log=None, keepalive_timeout=IDLE_TIMEOUT)
        await runner.setup()
        self._runners.append(runner)
        if bounded:
            assert runner.server is not None  # set up above
            listener = BoundedListener(
                runner.server,
                *address,
                registry=self.registry,
                ssl_context=tls,
                max_connections=self.metrics_max_connections,
            )
            await listener.start()
            self._listeners.append(listener)
            port = listener.port
        else:
            site = web.TCPSite(runner, address[0], address[1], ssl_context=tls)
            await site.start()
            port = site.port  # the bound port, when 0 was asked
        self.bound[name] = (address[0], port)
        log.info("serving %s on %s:%d%s", name, address[0], port, " (HTTPS)" if tls else "")

    async def stop(self) -> None:
        if self._cert_watch is not None:
            self._cert_watch.cancel()
            await asyncio.gather(self._cert_watch, return_exceptions=True)
            self._cert_watch = None
        for listener in self._listeners:
            await listener.stop()
        self._listeners.clear()
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
