"""A factory that shares informers: one list+watch per resource, however many readers.

As client-go's SharedInformerFactory: controllers ask for an informer by
(resource, namespace, label selector) and get the same one, so each resource is
listed, watched and cached once.
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.cache.informer import Informer, Keep
from dynamo_pool_operator.runtime.cache.transform import DEFAULT_TRANSFORM, Transform
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.clock import Clock
from dynamo_pool_operator.runtime.objects.resources import Resource

log = logging.getLogger(__name__)


class SharedInformers:
    """One informer per (resource, namespace, label selector), shared by every controller:
    one list+watch and one cached copy each. Informers asked for after `start_all()` start
    at once; `forget()` stops one whose API went away; `stop_all()` is final."""

    def __init__(
        self,
        client: Client,
        *,
        clock: Clock | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.client = client
        self._clock = clock
        self._registry = registry
        self._informers: dict[tuple[Resource, str | None, str | None], Informer] = {}
        self._tasks: dict[Informer, asyncio.Task[None]] = {}
        self._started = False
        self._closed = False

    def get(
        self,
        resource: Resource,
        namespace: str | None = None,
        label_selector: str | None = None,
        *,
        transform: Transform | None = None,
        keep: Keep | None = None,
    ) -> Informer:
        """The shared informer for this key, created on first use. Its transform decides
        what every sharer sees, so asking for another than it has is an error (equal
        `Chain`s are the same)."""
        ns = namespace if namespace and resource.namespaced else None
        key = (resource, ns, label_selector or None)
        informer = self._informers.get(key)
        if informer is None:
            if self._closed:
                raise RuntimeError("SharedInformers already stopped")
            informer = Informer(
                self.client,
                resource,
                ns,
                label_selector=label_selector,
                transform=DEFAULT_TRANSFORM if transform is None else transform,
                keep=keep,
                clock=self._clock,
                registry=self._registry,
            )
            self._informers[key] = informer
            if self._started:
                self._start(informer)
        elif (transform is not None and informer.transform != transform) or (
            keep is not None and informer.keep != keep
        ):
            raise ValueError(
                f"informer {informer.description} already exists with another transform or filter"
            )
        return informer

    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    def start_all(self) -> None:
        """Start every informer not running yet (needs a running event loop)."""
        if self._closed:
            raise RuntimeError("SharedInformers already stopped")
        self._started = True
        for informer in self._informers.values():
            self._start(informer)

    def _start(self, informer: Informer) -> None:
        if informer not in self._tasks:
            self._tasks[informer] = asyncio.create_task(
                informer.run(), name=f"informer {informer.description}"
            )

    async def forget(self, informer: Informer) -> None:
        """Stop `informer` and drop it (its resource is no longer served); its store
        keeps its last content, and asking for the key again makes a new one."""
        for key, known in list(self._informers.items()):
            if known is informer:
                del self._informers[key]
        informer.stop()
        task = self._tasks.pop(informer, None)
        if task is not None:
            _log_end(informer, (await asyncio.gather(task, return_exceptions=True))[0])

    async def stop_all(self) -> None:
        """Stop every informer and wait for their loops to end."""
        self._closed = True
        self._started = False
        for informer in self._informers.values():
            informer.stop()
        tasks = list(self._tasks.items())
        self._tasks.clear()
        results = await asyncio.gather(*(t for _, t in tasks), return_exceptions=True)
        for (informer, _), result in zip(tasks, results, strict=True):
            _log_end(informer, result)

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """True once every informer known now has synced; False if one did not in time."""
        informers = self.informers()
        results = await asyncio.gather(*(i.wait_synced(timeout) for i in informers))
        for informer, ok in zip(informers, results, strict=True):
            if not ok:
                log.warning("informer %s: not synced within %ss", informer.description, timeout)
        return all(results)


def _log_end(informer: Informer, result: object) -> None:
    """An informer loop ends only when stopped: anything else it ended with is a bug."""
    if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
        log.error(
            "informer %s: ended with %s: %s", informer.description, type(result).__name__, result
        )
