"""A controller that has not started (a follower) keeps no queue; starting it (taking
the Lease) queues every key, at LOW, as a cold start's list would.

A follower's informers run (its caches are warm when it takes over), but until the
controller starts nothing is queued: no worker would ever take it, and its
`workqueue_depth` would read as a backlog that never drains (the backlog alert fired
forever on every follower with more relays than its threshold).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.cache.informer import Informer
from dynamo_pool_operator.runtime.control.controller import Controller
from dynamo_pool_operator.runtime.control.queue import LOW, NORMAL
from dynamo_pool_operator.runtime.objects.resources import CONFIGMAPS, DEPLOYMENTS
from tests.unit.runtime.control.test_controller_priority import (
    NoReconcile,
    Scripted,
    cm,
    drain,
    running,
    settle,
)


def depth(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value("workqueue_depth", {"name": "follow"})


def adds(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value("workqueue_adds_total", {"name": "follow"})


async def test_a_follower_queues_nothing_and_its_start_queues_every_key_at_low() -> None:
    client = Scripted([cm("a", "1"), cm("b", "2")], [("MODIFIED", cm("a", "11"))])
    informer = Informer(client, CONFIGMAPS)
    registry = CollectorRegistry()
    # No workers: what the start queued stays there to be looked at.
    c = Controller("follow", NoReconcile(), registry=registry, workers=0).for_(informer)
    async with running(informer):  # the follower's cache is warm
        client.release.set()  # a change while following
        await settle()
        c.enqueue_all([("ns", "a"), ("ns", "z")])  # a mass requeue while following
        assert len(c.queue) == 0
        assert depth(registry) == 0.0
        assert adds(registry) == 0.0

        await c.start()  # the Lease is taken
        try:
            assert c.queue.depth_by_priority() == {LOW: 2}
            assert depth(registry) == 2.0
            assert sorted(k for k, _ in await drain(c)) == [("ns", "a"), ("ns", "b")]
        finally:
            await c.stop()


async def test_a_watch_added_while_following_queues_only_once_the_controller_runs() -> None:
    """The export feature adds watches at runtime (an API that came to be served), on
    followers too: they must not queue either, and must replay once leading."""
    configmaps = Scripted([cm("a", "1")])
    deployments = Scripted([cm("d", "1")])
    first = Informer(configmaps, CONFIGMAPS)
    later = Informer(deployments, DEPLOYMENTS)
    registry = CollectorRegistry()
    c = Controller("follow", NoReconcile(), registry=registry, workers=0).for_(first)
    async with running(first), running(later):
        c.watches(later, lambda obj: [("ns", "from-" + obj["metadata"]["name"])])
        assert len(c.queue) == 0
        await c.start()
        try:
            queued = await drain(c)
            assert sorted(queued) == [(("ns", "a"), LOW), (("ns", "from-d"), LOW)]
            # Leading: a watch added now replays its cache at once, and a mass requeue
            # queues.
            c.watches(later, lambda obj: [("ns", "again-" + obj["metadata"]["name"])])
            c.enqueue_all([("ns", "z")])
            assert sorted(await drain(c)) == [(("ns", "again-d"), LOW), (("ns", "z"), LOW)]
            c.queue.add(("ns", "user"))
            assert await drain(c) == [(("ns", "user"), NORMAL)]
        finally:
            await c.stop()
