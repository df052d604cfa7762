"""The controller loop (informer -> work queue -> workers -> reconcile) on a real API server:
per-key exclusion under concurrent updates, and per-key exponential backoff."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.cache.informer import Informer
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.control.controller import Controller, Request, Result
from dynamo_pool_operator.runtime.objects.resources import CONFIGMAPS
from dynamo_pool_operator.runtime.serving.server import Probes, ProbeServer
from tests.harness import eventually
from tests.integration.support.objects import config_map


@contextlib.asynccontextmanager
async def running(informer: Informer, controller: Controller) -> AsyncIterator[Controller]:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(controller.start(), 10)
        yield controller
    finally:
        await controller.stop(drain_timeout=5)
        informer.stop()
        await asyncio.wait_for(task, 10)


class Exclusive:
    """Records every reconcile: overlaps per key, peak parallelism, what each one read."""

    def __init__(self, informer: Informer) -> None:
        self.informer = informer
        self.active: set[Request] = set()
        self.overlaps: list[Request] = []
        self.peak = 0
        #: key -> resourceVersion read from the cache by the latest reconcile to finish.
        self.last_read: dict[Request, str | None] = {}

    async def reconcile(self, request: Request) -> Result | None:
        if request in self.active:
            self.overlaps.append(request)
        self.active.add(request)
        self.peak = max(self.peak, len(self.active))
        try:
            obj = self.informer.store.get(*request)
            rv = obj["metadata"]["resourceVersion"] if obj else None
            await asyncio.sleep(0.02)  # long enough for events to pile up meanwhile
            self.last_read[request] = rv
            return None
        finally:
            self.active.discard(request)


async def test_a_key_is_never_reconciled_concurrently_and_its_last_state_is_reconciled(
    client: Client, namespace: str
) -> None:
    """Four workers, four ConfigMaps updated 15 times each as fast as the server takes it:
    no key is ever in two reconciles at once (yet different keys do run in parallel), and
    every object's final version is what its last reconcile read."""
    names = [f"cm{i}" for i in range(4)]
    for name in names:
        await client.create(CONFIGMAPS, config_map(name, namespace, v="0"))
    informer = Informer(client, CONFIGMAPS, namespace)
    rec = Exclusive(informer)
    controller = Controller("exclusive", rec, workers=4, registry=CollectorRegistry())
    controller.for_(informer)

    async def hammer(name: str) -> str:
        rv = ""
        for v in range(1, 16):
            made = await client.merge_patch(CONFIGMAPS, name, {"data": {"v": str(v)}}, namespace)
            rv = made["metadata"]["resourceVersion"]
            await asyncio.sleep(0.005)
        return rv

    async with running(informer, controller):
        finals = dict(zip(names, await asyncio.gather(*map(hammer, names)), strict=True))

        async def all_final_versions_reconciled() -> bool:
            return controller.settled and all(
                rec.last_read.get((namespace, n)) == rv for n, rv in finals.items()
            )

        await eventually(all_final_versions_reconciled, timeout=10)
    assert rec.overlaps == [], f"keys reconciled concurrently: {rec.overlaps}"
    assert rec.peak > 1, "the workers never ran in parallel: the test proves nothing"


class Flaky:
    """Fails `failures` times for one key, recording when each attempt started and how
    many requeues the queue had counted for it at that moment."""

    def __init__(self, key: Request) -> None:
        self.key = key
        self.failures = 0
        self.attempts: list[tuple[float, int]] = []
        self.requests: list[Request] = []
        self.controller: Controller | None = None

    async def reconcile(self, request: Request) -> Result | None:
        self.requests.append(request)
        if request != self.key:
            return None
        assert self.controller is not None
        self.attempts.append((time.monotonic(), self.controller.queue.num_requeues(request)))
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError(f"planned failure, {self.failures} left")
        return None


async def flaky_controller(
    client: Client,
    namespace: str,
    failures: int,
    name: str,
    *,
    workers: int,
    registry: CollectorRegistry,
) -> tuple[Request, Flaky, Informer, Controller]:
    """Controller `name` for ConfigMaps, whose reconcile of ConfigMap `flaky` (created
    here) fails `failures` times: (its key, the reconciler, the informer, the controller)."""
    await client.create(CONFIGMAPS, config_map("flaky", namespace, v="0"))
    key = (namespace, "flaky")
    informer = Informer(client, CONFIGMAPS, namespace)
    flaky = Flaky(key)
    flaky.failures = failures
    controller = Controller(name, flaky, workers=workers, registry=registry)
    flaky.controller = controller
    controller.for_(informer)
    return key, flaky, informer, controller


async def test_backoff_doubles_from_5ms_on_repeated_errors_and_resets_on_success(
    client: Client, namespace: str
) -> None:
    """A reconcile that fails 7 times is retried after 5, 10, 20 ... 320 ms (never sooner,
    give or take scheduling later); success forgets the key's history, so a failure
    after it is retried after 5 ms again."""
    registry = CollectorRegistry()
    key, flaky, informer, controller = await flaky_controller(
        client, namespace, 7, "flaky", workers=2, registry=registry
    )

    async with running(informer, controller):

        async def succeeded() -> bool:
            return len(flaky.attempts) == 8 and controller.settled

        await eventually(succeeded, timeout=5)
        assert controller.queue.num_requeues(key) == 0
        times = [t for t, _ in flaky.attempts]
        intervals = [b - a for a, b in itertools.pairwise(times)]
        expected = [0.005 * 2**i for i in range(7)]
        for i, (got, want) in enumerate(zip(intervals, expected, strict=True)):
            assert got >= want * 0.95, f"retry {i + 1} after {got * 1000:.1f} ms < {want * 1000} ms"
            assert got <= want * 1.5 + 0.03, f"retry {i + 1} after {got * 1000:.1f} ms >> {want}"
        assert [n for _, n in flaky.attempts] == list(range(8))
        errors_total = registry.get_sample_value(
            "controller_runtime_reconcile_errors_total", {"controller": "flaky"}
        )
        assert errors_total == 7

        # A later failure starts from the first step again: 5 ms, not 640 ms.
        flaky.failures = 1
        await client.merge_patch(CONFIGMAPS, "flaky", {"data": {"v": "1"}}, namespace)

        async def retried() -> bool:
            return len(flaky.attempts) == 10 and controller.settled

        await eventually(retried, timeout=5)
        (t1, n1), (t2, n2) = flaky.attempts[8:]
        assert (n1, n2) == (0, 1)
        assert 0.005 * 0.95 <= t2 - t1 <= 0.005 * 1.5 + 0.03
        assert controller.queue.num_requeues(key) == 0


async def test_reconcile_exception_is_logged_with_the_key_and_retried_without_killing_a_worker(
    client: Client, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With the process's normal logging (ERROR enabled), one failing reconcile is logged
    with its key and retried, and the single worker lives on to reconcile other keys.
    (Regression: logging with extra={'name': ...} collides with LogRecord.name, so the
    log call itself raised, the key was never requeued and the worker died.)"""
    caplog.set_level(logging.ERROR, logger="dynamo_pool_operator.runtime.control.controller")
    _, flaky, informer, controller = await flaky_controller(
        client, namespace, 1, "flaky-log", workers=1, registry=CollectorRegistry()
    )

    async with running(informer, controller):

        async def retried() -> bool:
            return len(flaky.attempts) == 2 and controller.settled

        await eventually(retried, timeout=3)
        await client.create(CONFIGMAPS, config_map("later", namespace))

        async def other_key_reconciled() -> bool:
            return (namespace, "later") in flaky.requests

        await eventually(other_key_reconciled, timeout=3)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert any(f"{namespace}/flaky" in r.getMessage() for r in errors)


class WorkerKiller(BaseException):
    """Escapes every `except Exception`: stands for a bug that kills the worker task."""


class Deadly:
    """Reconciles every key; for `key` it first fails `times` times with `failure()`."""

    def __init__(self, key: Request, failure: Callable[[], Awaitable[None]], times: int) -> None:
        self.key = key
        self.failure = failure
        self.times = times
        self.reconciled: list[Request] = []

    async def reconcile(self, request: Request) -> Result | None:
        if request == self.key and self.times > 0:
            self.times -= 1
            await self.failure()
        self.reconciled.append(request)
        return None


async def stray_cancellation() -> None:
    """What a reconcile meets when it awaits a future someone else cancelled: a
    CancelledError that was never sent to the worker's own task."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.cancel()
    await future


async def kill_worker() -> None:
    raise WorkerKiller


async def survives_one_failure(
    client: Client, namespace: str, key: str, fail: Callable[[], Awaitable[None]], name: str
) -> CollectorRegistry:
    """A one-worker controller `name` whose reconcile of ConfigMap `key` fails once by
    `fail`: it must then reconcile `key` and a later object, and stay healthy. Returns
    the controller's metrics."""
    await client.create(CONFIGMAPS, config_map(key, namespace))
    registry = CollectorRegistry()
    informer = Informer(client, CONFIGMAPS, namespace)
    deadly = Deadly((namespace, key), fail, times=1)
    controller = Controller(name, deadly, workers=1, registry=registry)
    controller.for_(informer)

    async with running(informer, controller):
        await client.create(CONFIGMAPS, config_map("later", namespace))

        async def both_reconciled() -> bool:
            return {(namespace, key), (namespace, "later")} <= set(deadly.reconciled)

        await eventually(both_reconciled, timeout=5)
        assert controller.healthy
    return registry


async def test_a_stray_cancelled_error_is_a_failed_reconcile_and_the_worker_lives_on(
    client: Client, namespace: str
) -> None:
    """One worker. A reconcile that raises CancelledError without its worker being
    cancelled is counted as an error and retried; the same worker then reconciles a
    later object. (It used to end the worker silently: nothing reconciled again.)"""
    registry = await survives_one_failure(client, namespace, "stray", stray_cancellation, "stray")
    assert (
        registry.get_sample_value(
            "controller_runtime_reconcile_errors_total", {"controller": "stray"}
        )
        == 1
    )
    assert (
        registry.get_sample_value("controller_worker_restarts_total", {"controller": "stray"}) or 0
    ) == 0


async def test_a_dead_worker_is_restarted_counted_and_its_key_retried(
    client: Client, namespace: str
) -> None:
    """One worker, killed by a bug in the middle of a key: it is replaced at once (and
    counted), the key it held is retried, and later objects are reconciled."""
    registry = await survives_one_failure(client, namespace, "deadly", kill_worker, "restarts")
    assert (
        registry.get_sample_value("controller_worker_restarts_total", {"controller": "restarts"})
        == 1
    )


async def test_healthz_fails_once_workers_die_faster_than_they_are_restarted(
    client: Client, namespace: str
) -> None:
    """A key that kills every worker taking it: after `max_worker_restarts` restarts in
    the window the controller stops replacing them and /healthz answers 500 naming the
    check, so kubelet restarts the process; before that it answered 200."""
    await client.create(CONFIGMAPS, config_map("deadly", namespace))
    informer = Informer(client, CONFIGMAPS, namespace)
    deadly = Deadly((namespace, "deadly"), kill_worker, times=1_000)
    registry = CollectorRegistry()
    controller = Controller(
        "crashloop", deadly, workers=2, registry=registry, max_worker_restarts=3
    )
    controller.for_(informer)
    probes = Probes(liveness={"ping": lambda: True, "workers": lambda: controller.healthy})
    server = ProbeServer(
        probes, CollectorRegistry(), health_address="127.0.0.1:0", metrics_address="0"
    )
    await server.start()
    try:
        host, port = server.bound["health"]
        async with aiohttp.ClientSession() as http:

            async def healthz() -> tuple[int, str]:
                async with http.get(f"http://{host}:{port}/healthz") as resp:
                    return resp.status, await resp.text()

            assert (await healthz())[0] == 200
            async with running(informer, controller):

                async def unhealthy() -> bool:
                    return not controller.healthy

                await eventually(unhealthy, timeout=5)
                status, text = await healthz()
    finally:
        await server.stop()
    assert status == 500
    assert "[-]workers failed" in text
    restarts = registry.get_sample_value(
        "controller_worker_restarts_total", {"controller": "crashloop"}
    )
    assert restarts == 3
