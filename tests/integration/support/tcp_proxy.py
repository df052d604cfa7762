"""A TCP proxy a test controls: the network path between a client and the API server.

`stall()` makes the path go silent the way a dead NAT entry, a crashed middlebox or a
partition does: every connection stays open (no FIN, no RST, so the client's kernel
reports nothing), but no byte gets through in either direction, and new connections
are accepted and then hear nothing either. `resume()` forwards again; connections that
lived through the stall are reset, as a middlebox that lost their state would, and new
ones work.

Only loopback: the proxy listens on 127.0.0.1 and forwards to the address it is given.
"""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    """`async with TcpProxy(host, port) as proxy:` then dial `proxy.port` on 127.0.0.1."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.connections = 0  # accepted so far
        self._stalled = False
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def stalled(self) -> bool:
        return self._stalled

    async def __aenter__(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
        self._reset_all()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def stall(self) -> None:
        """Stop forwarding; keep every connection open."""
        self._stalled = True

    def resume(self) -> None:
        """Forward again; reset the connections that lived through the stall."""
        self._reset_all()
        self._stalled = False

    # ------------------------------------------------------------ plumbing
    def _reset_all(self) -> None:
        for writer in list(self._open):
            transport = writer.transport
            transport.abort()  # RST, not FIN: the state is gone
        self._open.clear()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._open.add(client_w)
        try:
            upstream_r, upstream_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.transport.abort()
            self._open.discard(client_w)
            return
        self._open.add(upstream_w)
        pumps = [
            asyncio.create_task(self._pump(client_r, upstream_w)),
            asyncio.create_task(self._pump(upstream_r, client_w)),
        ]
        self._tasks.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            self._tasks.difference_update(pumps)
            for writer in (client_w, upstream_w):
                self._open.discard(writer)
                with contextlib.suppress(Exception):
                    writer.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy bytes one way; while stalled, swallow them (the path drops packets)."""
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                if self._stalled or writer.transport.is_closing():
                    continue
                writer.write(data)
                await writer.drain()
