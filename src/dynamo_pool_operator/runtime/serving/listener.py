"""A TCP listener that holds a bounded number of connections: the metrics port's.

Whoever reaches the port may open connections, each costing a file descriptor (those
the Lease renewals need too) and maybe a TLS handshake. So at most `MAX_CONNECTIONS`,
handshakes included; one past that is closed at once (a failed scrape, retried),
rather than left in the backlog as Go's `LimitListener` does, where a scraper would
wait behind others' idle connections. An idle connection frees its place after
`IDLE_TIMEOUT`. asyncio's server accepts without a bound and handshakes before we see
a connection, hence our own accept loop into `loop.connect_accepted_socket`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import ssl

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from dynamo_pool_operator.runtime.registry import per_registry

log = logging.getLogger(__name__)

#: Connections the metrics listener holds at once: a Prometheus keeps one per target,
#: an HA pair and a person with curl a handful; the rest is headroom.
MAX_CONNECTIONS = 64
#: The TLS handshake a connection gets before it is closed (a place it holds meanwhile).
HANDSHAKE_TIMEOUT = 10.0
#: How long a connection may stay idle before its place is freed: aiohttp's `run_app`
#: default (its runner's own is an hour), longer than a scrape interval.
IDLE_TIMEOUT = 75.0
#: The wait before accepting again when out of descriptors or memory (as asyncio's).
ACCEPT_RETRY_DELAY = 1.0
#: accept() errors that say nothing about the listener: the connection went away first.
_GONE = {errno.ECONNABORTED, errno.EPROTO, errno.EAGAIN, errno.EWOULDBLOCK}


@per_registry
def _refused_metric(registry: CollectorRegistry) -> Counter:
    """Connections the metrics listener closed for want of a place."""
    return Counter(
        "metrics_connections_refused_total",
        "Connections to the metrics port closed at once: the listener held its bound.",
        registry=registry,
    )


class BoundedListener:
    """Serves `factory` (aiohttp's) on `host:port`, at most `max_connections` at once."""

    def __init__(
        self,
        factory: web.Server,
        host: str,
        port: int,
        *,
        registry: CollectorRegistry,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = MAX_CONNECTIONS,
        backlog: int = 128,
    ) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self.factory, self.host, self.port = factory, host, port
        self.ssl_context, self.max_connections, self.backlog = ssl_context, max_connections, backlog
        self._refused_total = _refused_metric(registry)
        self._sockets: list[socket.socket] = []
        self._accepting: list[asyncio.Task[None]] = []
        self._handshakes: set[asyncio.Task[None]] = set()
        #: Connections closed for want of a place, for the log and tests.
        self.refused = 0

    @property
    def open(self) -> int:
        """Connections held now: served, or in their TLS handshake."""
        return len(self.factory.connections) + len(self._handshakes)

    async def start(self) -> None:
        """Bind every address of `host` (as asyncio's server does) and accept on each."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(
            self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        try:
            for family, kind, proto, _, address in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                self._sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
                sock.listen(self.backlog)
                sock.setblocking(False)
        except OSError:
            await self.stop()
            raise
        self.port = self._sockets[0].getsockname()[1]
        self._accepting = [
            asyncio.create_task(self._accept(s), name=f"accept {self.host}:{self.port}")
            for s in self._sockets
        ]

    async def stop(self) -> None:
        """Stop accepting and end the handshakes under way; served connections are
        aiohttp's to close (`AppRunner.cleanup`)."""
        tasks = [*self._accepting, *self._handshakes]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._accepting.clear()
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()

    async def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError as e:
                if e.errno in _GONE:
                    continue
                # EMFILE, ENOMEM, ...: wait rather than spin on a readable listener.
                log.warning("metrics: cannot accept a connection: %s", e)
                await asyncio.sleep(ACCEPT_RETRY_DELAY)
                continue
            if self.open >= self.max_connections:
                conn.close()
                self._refuse()
                continue
            task = asyncio.create_task(self._serve(conn))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _serve(self, conn: socket.socket) -> None:
        """Hand `conn` to aiohttp once its TLS handshake is done (at once without TLS)."""
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(
                self.factory,
                conn,
                ssl=self.ssl_context,
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT if self.ssl_context else None,
            )
        except asyncio.CancelledError:
            conn.close()
            raise
        except Exception as e:  # a failed handshake ends its connection, not the listener
            log.debug("metrics: a connection ended in its TLS handshake: %s", e)
            with contextlib.suppress(OSError):
                conn.close()

    def _refuse(self) -> None:
        self.refused += 1
        self._refused_total.inc()
        if self.refused == 1 or self.refused % 1000 == 0:
            log.warning(
                "metrics: %d connections closed at once: the port holds %d at most",
                self.refused,
                self.max_connections,
            )
