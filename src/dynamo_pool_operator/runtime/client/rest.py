"""Async REST client for the Kubernetes API (aiohttp + orjson).

Only the verbs a controller needs, each with the API server's own semantics:
server-side apply with a field manager, deletes with uid/resourceVersion
preconditions, paginated lists and watches that keep bookmarks. Errors are
classified once (`errors.classify`). There is no client-side throttling unless
`qps` is set: API Priority and Fairness on the server governs, as
controller-runtime does since v0.21.
"""

from __future__ import annotations

import asyncio
import errno
import os
import random
import re
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
from prometheus_client import CollectorRegistry, Counter, Histogram

from dynamo_pool_operator import __version__
from dynamo_pool_operator.runtime.auth.config import ClusterConfig
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.background import (
    BackgroundWrites,
    ChangesFirst,
    in_background,
)
from dynamo_pool_operator.runtime.client.undecodable import Page, Undecodable, decode_page
from dynamo_pool_operator.runtime.objects.resources import Resource
from dynamo_pool_operator.runtime.ratelimit import TokenBucket
from dynamo_pool_operator.runtime.registry import REGISTRY, per_registry

JSON = "application/json"
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"

DEFAULT_USER_AGENT = f"dynamo-pool-operator/{__version__}"

# Connection timing as client-go's transport (k8s.io/client-go/transport/cache.go: a
# net.Dialer with Timeout and KeepAlive of 30 s, TLSHandshakeTimeout 10 s). Without
# them a connection to a host that went away silently hung until the request's total
# timeout, and a watch (which has none) until its read timeout, minutes later.
#: Seconds to establish a connection, TCP and TLS together (aiohttp's sock_connect).
DIAL_TIMEOUT = 30.0
#: Seconds for the TLS handshake alone.
TLS_HANDSHAKE_TIMEOUT = 10.0
#: TCP keepalive: first probe after this many idle seconds, then one every as many.
TCP_KEEPALIVE = 30.0
#: Seconds a watch may stay silent before it counts as dead. The informer asks the
#: server to end every watch sooner than this (and the server sends a bookmark just
#: before it does), so a healthy watch never stays silent this long; see informer.py.
WATCH_IDLE_TIMEOUT = 60.0


#: client-go's buckets for rest_client_request_duration_seconds.
REQUEST_DURATION_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
#: The `code` of a request that got no HTTP answer (client-go's label value).
NO_ANSWER = "<error>"


@per_registry
def _client_metrics(registry: CollectorRegistry) -> tuple[Counter, Histogram]:
    """client-go's REST client metrics, by its names and labels, so its dashboards and
    alerts apply: every request attempt (retries included), watches at their answer."""
    return (
        Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=registry,
        ),
        Histogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds, by verb and host (a watch: until its answer "
            "began, not its whole life).",
            ["verb", "host"],
            buckets=REQUEST_DURATION_BUCKETS,
            registry=registry,
        ),
    )


@dataclass(frozen=True, slots=True)
class ListResult:
    """All items of a (paginated) list and the list's resourceVersion to watch from."""

    items: list[dict[str, Any]]
    resource_version: str
    #: Items the decoder refused (too deep, say), named by their metadata; not in `items`.
    undecodable: list[Undecodable] = field(default_factory=list)


class Client:
    """One connection pool to one API server, shared by informers and writers."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        user_agent: str = DEFAULT_USER_AGENT,
        qps: float | None = None,
        burst: int = 100,
        request_timeout: float = 30.0,
        max_retries: int = 5,
        dial_timeout: float = DIAL_TIMEOUT,
        tls_handshake_timeout: float = TLS_HANDSHAKE_TIMEOUT,
        tcp_keepalive: float = TCP_KEEPALIVE,
        watch_idle_timeout: float = WATCH_IDLE_TIMEOUT,
        field_manager: str | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.config = config
        self._m_requests, self._m_duration = _client_metrics(
            registry if registry is not None else REGISTRY
        )
        self._host = urlsplit(config.server).netloc
        self._m_series: dict[tuple[str, str], tuple[Any, Any]] = {}
        self.user_agent = user_agent
        #: The field manager of every write that names none (controller-runtime's
        #: field owner): one name for all of a process's server-side apply ownership.
        self.field_manager = field_manager
        # The work queue's bucket, reserving a token per request: concurrent callers
        # queue behind each other at `qps`, as golang.org/x/time/rate's Wait does.
        self._limiter = TokenBucket(qps, burst) if qps and qps > 0 else None
        self._timeout = request_timeout
        self._max_retries = max_retries
        self._dial_timeout = dial_timeout
        self._tls_handshake_timeout = tls_handshake_timeout
        self._tcp_keepalive = tcp_keepalive
        #: Seconds of silence after which a watch is given up as dead (`ServerTimeout`).
        self.watch_idle_timeout = watch_idle_timeout
        #: Asked right before each write is sent (retries included); False refuses it
        #: with `NotLeader`, unsent. The operator sets its elector's `is_leader` here,
        #: so no write of this client leaves once leadership has ended: the one place
        #: every writer (reconciler, Events, exports) goes through.
        self.write_gate: Callable[[], bool] | None = None
        #: Caps the writes of background work in flight (background.py); None: no cap.
        self.background_writes: BackgroundWrites | None = None
        #: A lone change's writes first (None: in the order they come).
        self.changes_first: ChangesFirst | None = None
        self._session: aiohttp.ClientSession | None = None

    # ------------------------------------------------------------ lifecycle
    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=_Connector(
                    tls_handshake_timeout=self._tls_handshake_timeout,
                    limit=0,
                    enable_cleanup_closed=True,
                    socket_factory=_keepalive_sockets(self._tcp_keepalive),
                ),
                json_serialize=lambda o: orjson.dumps(o).decode(),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------ transport
    def _observe(self, method: str, code: str, started: float) -> None:
        key = (method, code)
        series = self._m_series.get(key)
        if series is None:
            series = self._m_series[key] = (
                self._m_requests.labels(code, method, self._host),
                self._m_duration.labels(method, self._host),
            )
        series[0].inc()
        series[1].observe(time.perf_counter() - started)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        accept: str = JSON,
        decode: Callable[[bytes], Any] = orjson.loads,
    ) -> Any:
        """Send one request and decode the JSON answer; raise a classified `ApiError`.

        Retries only where the server said to, up to `max_retries` times, waiting
        Retry-After (at most 30 s) each time: a 429 for every verb (not processed
        at all), a 5xx carrying Retry-After for idempotent requests only (see
        `_repeatable`); and once after a 401 with refreshed credentials (rotated
        token or exec plugin). Nothing else: no connection failure, no timeout.
        """
        first = self.changes_first
        if first is not None and method not in _READS:
            await first.turn()
        gate = self.background_writes
        if gate is not None and method not in _READS and in_background():
            async with gate.slot():
                return await self._request(method, path, params, body, content_type, accept, decode)
        return await self._request(method, path, params, body, content_type, accept, decode)

    async def _request(
        self,
        method: str,
        path: str,
        params: dict[str, str] | None,
        body: Any,
        content_type: str,
        accept: str,
        decode: Callable[[bytes], Any] = orjson.loads,
    ) -> Any:
        data = orjson.dumps(body) if body is not None else None
        attempt = 0
        refreshed = False
        while True:
            if self._limiter is not None:
                delay = self._limiter.when(None)
                if delay > 0:
                    await asyncio.sleep(delay)
            headers = {"User-Agent": self.user_agent, "Accept": accept}
            headers.update(await self.config.credentials.headers())
            if data is not None:
                headers["Content-Type"] = content_type
            ssl = await self.config.credentials.ssl_context()
            if method not in _READS and self.write_gate is not None and not self.write_gate():
                raise errors.NotLeader(f"{method} {path}: not sent, this replica does not lead")
            started = time.perf_counter()
            code = NO_ANSWER
            try:
                async with self._http().request(
                    method,
                    self.config.server + path,
                    params=params,
                    data=data,
                    headers=headers,
                    ssl=ssl,
                    server_hostname=self.config.server_hostname,
                    proxy=self.config.proxy,
                    timeout=aiohttp.ClientTimeout(
                        total=self._timeout, sock_connect=self._dial_timeout
                    ),
                ) as resp:
                    code = str(resp.status)
                    raw = await resp.read()
                    self._observe(method, code, started)
                    if resp.status < 300:
                        return decode(raw) if raw else None
                    err = _error_from(resp.status, raw, resp.headers.get("Retry-After"))
            except aiohttp.ConnectionTimeoutError as e:
                self._observe(method, code, started)
                raise errors.ConnectionFailed(unreachable(e, self._host)) from e
            except TimeoutError as e:
                self._observe(method, code, started)
                raise errors.ServerTimeout(f"{method} {path}: no answer in {self._timeout}s") from e
            except aiohttp.ClientError as e:
                self._observe(method, code, started)
                raise errors.ConnectionFailed(unreachable(e, self._host)) from e
            if isinstance(err, errors.Unauthorized) and not refreshed:
                refreshed = True
                self.config.credentials.invalidate()
                continue
            retry_after = err.retry_after
            if isinstance(err, errors.ServerError | errors.ServerTimeout) and not _repeatable(
                method, content_type
            ):
                retry_after = None
            if retry_after is not None and attempt < self._max_retries:
                attempt += 1
                await asyncio.sleep(min(retry_after, 30.0))
                continue
            raise err

    # ------------------------------------------------------------ reads
    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", res.path(namespace, name))
        return result

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 500,
        each: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> ListResult:
        """List every item, following `continue` tokens page by page.

        `each`, if given, maps every item as its page arrives (None drops it), so a
        caller that trims objects never holds more than one untrimmed page: an
        informer relisting thousands of Deployments would otherwise hold them all
        with their managedFields at once, and the heap keeps that high-water mark.

        `resource_version` (with `resource_version_match`) is the API's list
        semantics: None (unset) is a consistent read; "0" is "any version", which the
        server answers from its watch cache (and in one page: it ignores `limit`);
        a version with `NotOlderThan` is "at least this new", from the cache too."""
        items: list[dict[str, Any]] = []
        undecodable: list[Undecodable] = []
        params = _selectors(label_selector, field_selector)
        params["limit"] = str(limit)
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        if resource_version_match is not None:
            params["resourceVersionMatch"] = resource_version_match
        while True:
            # Item by item when the page does not decode whole: one object nobody can
            # decode is left out and named, not the list failed (undecodable.py).
            page: Page = await self.request(
                "GET", res.path(namespace), params=params, decode=decode_page
            )
            undecodable.extend(page.undecodable)
            if each is None:
                items.extend(page.items)
            else:
                items.extend(kept for kept in map(each, page.items) if kept is not None)
            page.items = []  # before the next page is fetched: the untrimmed originals go
            token = page.meta.get("continue")
            if not token:
                return ListResult(items, str(page.meta.get("resourceVersion", "")), undecodable)
            params["continue"] = token

    async def watch_lines(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        allow_bookmarks: bool = True,
        timeout_seconds: int = 300,
        label_selector: str | None = None,
        field_selector: str | None = None,
        send_initial_events: bool = False,
    ) -> AsyncIterator[bytes]:
        """Open a watch and yield each event line undecoded, so callers can decode
        only the fields they need or the whole object (orjson).

        `send_initial_events` asks for a streaming list (the API's watch-list):
        ADDED for every object at least as new as `resource_version` ("" is the
        current state), then a BOOKMARK annotated `k8s.io/initial-events-end`, then
        the watch goes on. It implies `resourceVersionMatch=NotOlderThan` and
        bookmarks, as the API requires."""
        params = _selectors(label_selector, field_selector)
        params.update(
            watch="true",
            resourceVersion=resource_version,
            timeoutSeconds=str(timeout_seconds),
        )
        if allow_bookmarks or send_initial_events:
            params["allowWatchBookmarks"] = "true"
        if send_initial_events:
            params["sendInitialEvents"] = "true"
            params["resourceVersionMatch"] = "NotOlderThan"
        headers = {"User-Agent": self.user_agent, "Accept": JSON}
        headers.update(await self.config.credentials.headers())
        started = time.perf_counter()
        answered = False
        try:
            async with self._http().get(
                self.config.server + res.path(namespace),
                params=params,
                headers=headers,
                ssl=await self.config.credentials.ssl_context(),
                server_hostname=self.config.server_hostname,
                proxy=self.config.proxy,
                # No total: a watch lasts as long as the server keeps it. Silence is
                # what gives a dead one away (see WATCH_IDLE_TIMEOUT).
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=self._dial_timeout, sock_read=self.watch_idle_timeout
                ),
            ) as resp:
                answered = True
                self._observe("WATCH", str(resp.status), started)
                if resp.status >= 300:
                    raw = await resp.read()
                    err = _error_from(resp.status, raw, resp.headers.get("Retry-After"))
                    if isinstance(err, errors.Unauthorized):
                        self.config.credentials.invalidate()
                    raise err
                buf = b""
                async for chunk in resp.content.iter_any():
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        if line.strip():
                            yield line
        except aiohttp.ConnectionTimeoutError as e:
            self._observe("WATCH", NO_ANSWER, started)
            raise errors.ConnectionFailed(
                f"watch {res.group_resource}: {unreachable(e, self._host)}"
            ) from e
        except TimeoutError as e:
            if not answered:
                self._observe("WATCH", NO_ANSWER, started)
            raise errors.ServerTimeout(
                f"watch {res.group_resource}: no byte in {self.watch_idle_timeout:.0f}s "
                "(or no connection): the connection is taken for dead"
            ) from e
        except aiohttp.ClientError as e:
            if not answered:
                self._observe("WATCH", NO_ANSWER, started)
            raise errors.ConnectionFailed(
                f"watch {res.group_resource}: {unreachable(e, self._host)}"
            ) from e

    async def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Like `watch_lines` (with bookmarks), decoded to `{"type": ..., "object": {...}}`:
        for tools and tests that follow one resource. An in-stream ERROR event carrying a
        410 is raised as `Gone`."""
        async for line in self.watch_lines(
            res, namespace, resource_version=resource_version, timeout_seconds=timeout_seconds
        ):
            event = orjson.loads(line)
            if event.get("type") == "ERROR":
                status = event.get("object") or {}
                raise errors.classify(int(status.get("code") or 500), status)
            yield event

    # ------------------------------------------------------------ writes
    def _manager(self, field_manager: str | None) -> dict[str, str] | None:
        """The write's `fieldManager` query: the one given, else the client's; none."""
        manager = field_manager or self.field_manager
        return {"fieldManager": manager} if manager else None

    async def create(
        self,
        res: Resource,
        body: dict[str, Any],
        namespace: str | None = None,
        *,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """POST: exclusive create; `AlreadyExists` if the name is taken (never adopts)."""
        ns = namespace or body.get("metadata", {}).get("namespace")
        params = self._manager(field_manager)
        result: dict[str, Any] = await self.request("POST", res.path(ns), params=params, body=body)
        return result

    async def apply(
        self,
        res: Resource,
        body: dict[str, Any],
        *,
        field_manager: str | None = None,
        force: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Server-side apply. A body carrying `metadata.uid` is refused if that object is
        gone (never re-created); carrying `metadata.resourceVersion` it is refused with
        Conflict if the object changed since it was read."""
        meta = body.get("metadata", {})
        manager = field_manager or self.field_manager
        if not manager:
            raise ValueError("a server-side apply needs a field manager")
        params = {"fieldManager": manager}
        if force:
            params["force"] = "true"
        result: dict[str, Any] = await self.request(
            "PATCH",
            res.path(meta.get("namespace"), meta["name"], subresource),
            params=params,
            body=body,
            content_type=APPLY_PATCH,
        )
        return result

    async def merge_patch(
        self,
        res: Resource,
        name: str,
        patch: dict[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        params = self._manager(field_manager)
        result: dict[str, Any] = await self.request(
            "PATCH",
            res.path(namespace, name, subresource),
            params=params,
            body=patch,
            content_type=MERGE_PATCH,
        )
        return result

    async def replace(
        self,
        res: Resource,
        body: dict[str, Any],
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """PUT: an optimistic update when `metadata.resourceVersion` is set (Conflict if stale)."""
        meta = body["metadata"]
        params = self._manager(field_manager)
        result: dict[str, Any] = await self.request(
            "PUT",
            res.path(meta.get("namespace"), meta["name"], subresource),
            params=params,
            body=body,
        )
        return result

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation_policy: str | None = None,
    ) -> dict[str, Any] | None:
        """DELETE with optional preconditions: the server refuses (Conflict) when the stored
        object's uid or resourceVersion differ, so we never delete a newer incarnation."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        pre: dict[str, str] = {}
        if uid:
            pre["uid"] = uid
        if resource_version:
            pre["resourceVersion"] = resource_version
        if pre:
            body["preconditions"] = pre
        if propagation_policy:
            body["propagationPolicy"] = propagation_policy
        result: dict[str, Any] | None = await self.request(
            "DELETE", res.path(namespace, name), body=body
        )
        return result


#: Methods that never change anything: the write gate lets them through.
_READS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Requests whose repeat cannot do more than the first did. A 5xx with Retry-After may
#: come after the server carried the request out (a 504 once the write was stored):
#: repeating a create would then fail as AlreadyExists, so a create is left to the
#: caller. client-go retries every verb; we retry these. A PUT carries the
#: resourceVersion it read, so a repeat of one that landed is refused (Conflict).
_REPEATABLE_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE"})
#: PATCH bodies that state the end result rather than a change: applying one twice
#: leaves the object as applying it once does.
_REPEATABLE_PATCHES = frozenset({APPLY_PATCH, MERGE_PATCH})


def _repeatable(method: str, content_type: str) -> bool:
    if method in _REPEATABLE_METHODS:
        return True
    return method == "PATCH" and content_type in _REPEATABLE_PATCHES


def _keepalive_sockets(idle: float) -> Callable[[tuple[Any, ...]], socket.socket]:
    """Sockets with TCP keepalive every `idle` seconds, as Go's dialer sets it: the
    kernel then notices a peer that vanished (a node gone, a reset it never got)
    on connections we only read from, such as a watch."""

    def make(addr_info: tuple[Any, ...]) -> socket.socket:
        family, type_, proto, _, _ = addr_info
        sock = socket.socket(family=family, type=type_, proto=proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        seconds = max(int(idle), 1)
        for option in ("TCP_KEEPIDLE", "TCP_KEEPINTVL"):  # Linux; elsewhere the OS default
            if hasattr(socket, option):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), seconds)
        return sock

    return make


class _Connector(aiohttp.TCPConnector):
    """aiohttp's connector with a TLS handshake timeout of its own.

    aiohttp bounds connecting as a whole (`sock_connect`) but lets asyncio's 60 s
    default stand for the handshake. It hands its keyword arguments on to
    `loop.create_connection`, which takes `ssl_handshake_timeout`; the unit tests
    check that the bound holds, should aiohttp stop handing them on."""

    def __init__(self, *, tls_handshake_timeout: float, **kw: Any) -> None:
        super().__init__(**kw)
        self._tls_handshake_timeout = tls_handshake_timeout

    async def _wrap_create_connection(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("ssl"):
            kwargs.setdefault("ssl_handshake_timeout", self._tls_handshake_timeout)
        return await super()._wrap_create_connection(*args, **kwargs)


def unreachable(e: aiohttp.ClientError, server: str) -> str:
    """A failed connection said as kubectl says it, not as aiohttp's repr of its socket
    (`ssl:<ssl.SSLContext object at 0x...> [Connect call failed ...]`). `server` is the
    API server's host:port, named when the error does not name its own."""
    if isinstance(e, aiohttp.ClientConnectorError):
        server = f"{e.host}:{e.port}"
    dial = f"dial tcp {server}"
    if isinstance(e, aiohttp.ConnectionTimeoutError):
        return f"Unable to connect to the server: {dial}: i/o timeout"
    if isinstance(e, aiohttp.ClientConnectorCertificateError):
        cert = e.certificate_error
        why = getattr(cert, "verify_message", "") or str(cert)
        return f"Unable to connect to the server: tls: failed to verify certificate: {why}"
    if isinstance(e, aiohttp.ClientConnectorSSLError):
        why = getattr(e.os_error, "reason", None) or str(e.os_error)
        return f"Unable to connect to the server: tls: {str(why).lower().replace('_', ' ')}"
    if isinstance(e, aiohttp.ClientConnectorError) and "handshake" in str(e.os_error).lower():
        return "Unable to connect to the server: net/http: TLS handshake timeout"
    if isinstance(e, aiohttp.ClientConnectorDNSError):
        return f"Unable to connect to the server: dial tcp: lookup {e.host}: no such host"
    if isinstance(e, aiohttp.ClientConnectorError):
        # Several addresses tried (IPv6 and IPv4 for `localhost`): one errno each.
        codes = {int(n) for n in re.findall(r"\[Errno (\d+)\]", str(e.os_error))}
        codes |= {e.os_error.errno} if e.os_error.errno else set()
        if codes == {errno.ECONNREFUSED}:
            return (
                f"The connection to the server {server} was refused - did you specify the "
                "right host or port?"
            )
        strerror = os.strerror(min(codes)) if codes else str(e.os_error)
        return f"Unable to connect to the server: {dial}: connect: {strerror.lower()}"
    if isinstance(e, aiohttp.ServerDisconnectedError):
        return f"the connection to the server {server} was closed before it answered (EOF)"
    if isinstance(e, aiohttp.ClientOSError) and e.strerror:
        return f"the connection to the server {server} failed: {e.strerror.lower()}"
    return f"the connection to the server {server} failed: {e or type(e).__name__}"


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    params: dict[str, str] = {}
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    return params


def _error_from(status: int, raw: bytes, retry_after_header: str | None) -> errors.ApiError:
    try:
        body = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        # A plain-text answer (the aggregator's 503 "service unavailable\n"): one line.
        body = {"message": raw[:500].decode(errors="replace").strip()}
    retry_after: float | None = None
    if retry_after_header:
        try:
            retry_after = float(retry_after_header)
        except ValueError:
            retry_after = None
    return errors.classify(status, body if isinstance(body, dict) else None, retry_after)


def jittered(seconds: float, factor: float = 0.1) -> float:
    """`seconds` plus up to `factor` of itself, so many watchers do not line up."""
    return seconds * (1 + random.random() * factor)
