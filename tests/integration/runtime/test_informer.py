"""The informer against a real kube-apiserver + etcd: restarts, 410 Gone, indexes.

The destructive tests (an apiserver restart, an etcd compaction) run on a private
control plane started by this module, so the session's shared one is never
disturbed. It is started with two flags, both explained where they matter:

* ``--shutdown-watch-termination-grace-period=1s``: without it kube-apiserver keeps
  open watches through its graceful shutdown until the harness SIGKILLs it 10 s
  later; with it the server ends them after 1 s and restarts take ~3.5 s.
* ``--watch-cache-sizes=secrets#0``: Secrets bypass the watch cache, so a watch
  on them is served by etcd itself and a compacted resourceVersion is answered
  with 410 Gone. (With the watch cache, the default for ConfigMaps, a watch from
  a recent resourceVersion is served from the cache's memory even after etcd was
  compacted; the cache only answers 410 once the version is older than its
  window, e.g. right after an apiserver restart.)
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.cache.informer import INITIAL_EVENTS_END, EventType, Informer
from dynamo_pool_operator.runtime.cache.store import Obj, object_key
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client, ListResult
from dynamo_pool_operator.runtime.objects.resources import CONFIGMAPS, NAMESPACES, SECRETS, Resource
from dynamo_pool_operator.runtime.ratelimit import Backoff
from tests.harness import eventually
from tests.indexes import OWNER_UID_INDEX, index_by_owner_uid, label_index
from tests.integration.support.objects import config_map
from tests.integration.support.tcp_proxy import TcpProxy
from tests.leaks import run_plane

#: Informer retries fast here: a restart should not cost the test seconds of backoff.
FAST = (0.05, 0.5)


# ---------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def private_cp(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A control plane of this module's own (no GC, no CRDs), for restarts and compaction."""
    from dynamo_pool_operator.localcluster.assets import resolve

    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        assets = resolve()
    cp = ControlPlane(
        assets=assets,
        garbage_collector=False,
        extra_apiserver_args=[
            "--shutdown-watch-termination-grace-period=1s",
            "--watch-cache-sizes=secrets#0",
        ],
    )
    yield from run_plane(cp)


@pytest.fixture
def private_ns(private_cp: ControlPlane) -> str:
    name = f"p-{uuid.uuid4().hex[:10]}"
    private_cp.create_namespace(name)
    return name  # no namespace controller here: the namespace dies with the control plane


@pytest.fixture
async def private_client(private_cp: ControlPlane) -> AsyncIterator[Client]:
    async with Client(load_kubeconfig(private_cp.kubeconfig), user_agent="dpo-tests") as c:
        yield c


# ---------------------------------------------------------------- helpers
def _secret(name: str, ns: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "stringData": data,
    }


def _rv(obj: Obj) -> str:
    return str(obj["metadata"]["resourceVersion"])


def _uid(obj: Obj) -> str:
    return str(obj["metadata"]["uid"])


@dataclass(frozen=True)
class Seen:
    """One handler call: for DELETED, the object handed over as `old`."""

    type: EventType
    name: str
    uid: str
    rv: str


class Recorder:
    """A handler that records every call, in order."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []

    def __call__(self, etype: EventType, old: Obj | None, new: Obj | None) -> None:
        obj = new if new is not None else old
        assert obj is not None
        self.seen.append(Seen(etype, obj["metadata"]["name"], _uid(obj), _rv(obj)))

    def of(self, name: str) -> list[Seen]:
        return [s for s in self.seen if s.name == name]


class SpyClient:
    """Passes the informer's two reads to the real client and records them: the
    resourceVersion of each list, where each watch started, and each 410 it met. A
    streaming list (a watch-list) counts as a list, at its end bookmark's version."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.lists: list[str] = []
        self.watches: list[str] = []
        self.gone: list[tuple[str, str]] = []  # (watch start RV, how the 410 came)
        self.failures: list[tuple[float, Exception]] = []  # (monotonic time, what a watch raised)

    async def list(self, res: Resource, namespace: str | None = None, **kw: Any) -> ListResult:
        result = await self.client.list(res, namespace, **kw)
        self.lists.append(result.resource_version)
        return result

    async def watch_lines(
        self, res: Resource, namespace: str | None = None, *, resource_version: str, **kw: Any
    ) -> AsyncIterator[bytes]:
        streaming = bool(kw.get("send_initial_events"))
        if not streaming:
            self.watches.append(resource_version)
        lines = self.client.watch_lines(res, namespace, resource_version=resource_version, **kw)
        try:
            async with contextlib.aclosing(lines):
                async for line in lines:
                    event = orjson.loads(line)
                    if event.get("type") == "ERROR" and event["object"].get("code") == 410:
                        self.gone.append((resource_version, "in-stream ERROR"))
                    meta = (event.get("object") or {}).get("metadata") or {}
                    if streaming and (meta.get("annotations") or {}).get(INITIAL_EVENTS_END):
                        self.lists.append(str(meta["resourceVersion"]))
                    yield line
        except errors.Gone as e:
            self.gone.append((resource_version, "HTTP 410"))
            self.failures.append((time.monotonic(), e))
            raise
        except Exception as e:
            self.failures.append((time.monotonic(), e))
            raise


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[Informer]:
    task = asyncio.create_task(informer.run())
    try:
        assert await informer.wait_synced(10), f"{informer.description} did not sync"
        yield informer
    finally:
        informer.stop()
        await asyncio.wait_for(task, 10)


async def _server_state(client: Client, res: Resource, ns: str) -> dict[str, str]:
    """{name: resourceVersion} as the API server lists it now."""
    return {o["metadata"]["name"]: _rv(o) for o in (await client.list(res, ns)).items}


def _store_state(informer: Informer) -> dict[str, str]:
    return {o["metadata"]["name"]: _rv(o) for o in informer.store.list()}


async def _converged(client: Client, informer: Informer, res: Resource, ns: str) -> None:
    """Wait until the informer's store holds exactly what the server lists."""

    async def same() -> bool:
        return _store_state(informer) == await _server_state(client, res, ns)

    await eventually(same, timeout=10)


# ---------------------------------------------------------------- tests
async def test_watch_survives_apiserver_restart_without_losing_an_update(
    private_cp: ControlPlane, private_client: Client, private_ns: str
) -> None:
    """The informer rides out a kube-apiserver restart (connection refused while it is
    down, then a resume or, if the restarted server's watch cache no longer has our
    resourceVersion, a 410 and a relist). Either way no change is lost: every object
    changed right after the restart reaches the handler in its final state, the store
    converges to the server's list, and afterwards the watch delivers each single
    update again."""
    c, ns = private_client, private_ns
    for name in ("a", "b", "c"):
        await c.create(CONFIGMAPS, config_map(name, ns, v="0"))
    rec = Recorder()
    informer = Informer(c, CONFIGMAPS, ns, backoff=Backoff(*FAST))
    informer.add_handler(rec)
    async with running(informer):
        # In a thread, so the informer keeps running and sees the server go away.
        await asyncio.to_thread(private_cp.restart_apiserver)
        for v in ("1", "2", "3"):
            a = await c.merge_patch(CONFIGMAPS, "a", {"data": {"v": v}}, ns)
        await c.delete(CONFIGMAPS, "b", ns)
        d = await c.create(CONFIGMAPS, config_map("d", ns, v="0"))

        await _converged(c, informer, CONFIGMAPS, ns)
        assert informer.has_synced
        assert Seen(EventType.MODIFIED, "a", _uid(a), _rv(a)) in rec.of("a")
        assert [s.type for s in rec.of("b")] == [EventType.ADDED, EventType.DELETED]
        assert rec.of("d") == [Seen(EventType.ADDED, "d", _uid(d), _rv(d))]
        assert [s.type for s in rec.of("c")] == [EventType.ADDED], "c did not change"

        # The watch is live again: each update now arrives, in order, none folded.
        rvs = []
        for v in range(1, 6):  # (v=0 would be a no-op patch: no new version, no event)
            rvs.append(_rv(await c.merge_patch(CONFIGMAPS, "c", {"data": {"v": str(v)}}, ns)))

        async def all_c_updates() -> bool:
            return [s.rv for s in rec.of("c")][1:] == rvs

        await eventually(all_c_updates, timeout=10)
        assert all(s.type is EventType.MODIFIED for s in rec.of("c")[1:])


async def test_watch_ended_by_the_server_resumes_from_its_resource_version_without_relisting(
    client: Client, namespace: str
) -> None:
    """The server ends every watch after `timeoutSeconds` (1 s here). The informer
    re-watches from the last resourceVersion it saw: one list in total, each later
    watch starts past the list's version, and every single update is delivered."""
    spy = SpyClient(client)
    rec = Recorder()
    informer = Informer(spy, CONFIGMAPS, namespace, watch_timeout=1, backoff=Backoff(*FAST))
    informer.add_handler(rec)
    await client.create(CONFIGMAPS, config_map("x", namespace, v="0"))
    async with running(informer):
        rvs = []
        for v in range(1, 13):  # over ~3 s: several watches end and resume meanwhile
            made = await client.merge_patch(CONFIGMAPS, "x", {"data": {"v": str(v)}}, namespace)
            rvs.append(_rv(made))
            await asyncio.sleep(0.25)

        async def all_delivered() -> bool:
            return [s.rv for s in rec.of("x")][1:] == rvs

        await eventually(all_delivered, timeout=10)
    assert len(spy.lists) == 1, f"relisted: {spy.lists}"
    assert len(spy.watches) >= 3, f"the server did not end the watches: {spy.watches}"
    resumed = [int(rv) for rv in spy.watches[1:]]
    assert min(resumed) > int(spy.lists[0]), "a watch restarted from the list's version"
    assert resumed == sorted(resumed), "a watch went back in time"
    assert not spy.gone


def _delete_modify_and_compact_while_frozen(cp: ControlPlane, ns: str) -> int:
    """Synchronous on purpose: the event loop (and with it the informer) is frozen for
    the whole call, like a paused process. The server ends the informer's open watch
    (timeoutSeconds=1) during the first 1.6 s; only then do the changes happen, so no
    watch carries them, and etcd is compacted past them."""
    time.sleep(1.6)
    base = f"/api/v1/namespaces/{ns}/secrets"
    for name in ("s1", "s2"):
        assert cp.request("DELETE", f"{base}/{name}")[0] == 200
    status, _ = cp.request(
        "PATCH", f"{base}/s3", {"stringData": {"v": "changed"}}, "application/merge-patch+json"
    )
    assert status == 200
    assert cp.request("DELETE", f"{base}/s4")[0] == 200
    assert cp.request("POST", base, _secret("s4", ns, v="reborn"))[0] == 201
    assert cp.request("POST", base, _secret("s5", ns, v="new"))[0] == 201
    return cp.compact_etcd()


async def test_relist_after_410_synthesizes_the_deletes_it_missed(
    private_cp: ControlPlane, private_client: Client, private_ns: str
) -> None:
    """How the 410 is forced, reliably: the informer watches Secrets, which this control
    plane serves from etcd (no watch cache), with a 1 s server-side watch timeout. The
    test then freezes the event loop (a synchronous call, nothing awaits), waits for the
    server to end the watch, deletes/changes/re-creates objects and compacts etcd past
    them. When the loop runs again the same informer instance re-watches from its old
    resourceVersion, etcd answers 410 Gone, and the informer must relist and turn the
    difference into events: DELETED for the objects that vanished (the cached object,
    i.e. a synthesized delete, not one read from a watch), DELETED+ADDED for a name
    re-created with a new UID, MODIFIED and ADDED for the rest. Indexes follow."""
    c, ns = private_client, private_ns
    before = {}
    for i in range(1, 5):
        before[f"s{i}"] = await c.create(SECRETS, _secret(f"s{i}", ns, v=str(i)))
    spy = SpyClient(c)
    rec = Recorder()
    informer = Informer(spy, SECRETS, ns, watch_timeout=1, backoff=Backoff(0.05, 0.2))
    informer.store.add_index("name", lambda o: [o["metadata"]["name"]])
    informer.add_handler(rec)
    async with running(informer):
        resume_rv = informer.last_resource_version
        assert resume_rv is not None
        compacted = _delete_modify_and_compact_while_frozen(private_cp, ns)
        assert int(resume_rv) < compacted

        await _converged(c, informer, SECRETS, ns)
        after = {o["metadata"]["name"]: o for o in (await c.list(SECRETS, ns)).items}

    assert spy.gone, f"no 410 seen; watches started at {spy.watches}"
    assert len(spy.lists) == 2, f"expected the initial list and one relist: {spy.lists}"
    for name in ("s1", "s2"):
        old = before[name]
        assert rec.of(name)[-1] == Seen(EventType.DELETED, name, _uid(old), _rv(old)), (
            f"{name}: the delete was not synthesized from the cached object"
        )
    s3 = after["s3"]
    assert rec.of("s3")[-1] == Seen(EventType.MODIFIED, "s3", _uid(s3), _rv(s3))
    old4, new4 = before["s4"], after["s4"]
    assert _uid(old4) != _uid(new4)
    assert rec.of("s4")[-2:] == [
        Seen(EventType.DELETED, "s4", _uid(old4), _rv(old4)),
        Seen(EventType.ADDED, "s4", _uid(new4), _rv(new4)),
    ]
    assert rec.of("s5") == [Seen(EventType.ADDED, "s5", _uid(after["s5"]), _rv(after["s5"]))]
    assert sorted(informer.store.index_values("name")) == ["s3", "s4", "s5"]


def _owner_ref(owner: Obj, *, controller: bool) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": owner["metadata"]["name"],
        "uid": _uid(owner),
        "controller": controller,
    }


def _expected_indexes(items: list[Obj]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Ground truth from the server's objects: owner UID -> names, label app -> names."""
    by_owner: dict[str, set[str]] = {}
    by_app: dict[str, set[str]] = {}
    for o in items:
        meta = o["metadata"]
        for ref in meta.get("ownerReferences") or []:
            by_owner.setdefault(ref["uid"], set()).add(meta["name"])
        app = (meta.get("labels") or {}).get("app")
        if app is not None:
            by_app.setdefault(app, set()).add(meta["name"])
    return by_owner, by_app


def _index_contents(informer: Informer, index: str) -> dict[str, set[str]]:
    store = informer.store
    contents = {
        v: {name for _, name in store.index_keys(index, v)} for v in store.index_values(index)
    }
    for value, names in contents.items():  # the objects behind the keys are the cached ones
        assert {o["metadata"]["name"] for o in store.by_index(index, value)} == names
    return contents


async def test_indexes_stay_consistent_through_create_update_delete_and_gc(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    """Owner-UID and label indexes on real objects match what the server holds after
    each step: creates, an update that moves an object to another owner and label, a
    label removal, a direct delete, and a delete by the real garbage collector."""
    c, ns = client, namespace
    informer = Informer(c, CONFIGMAPS, ns)
    informer.store.add_index(OWNER_UID_INDEX, index_by_owner_uid)
    informer.store.add_index("app", label_index("app"))

    async def check(step: str) -> None:
        await _converged(c, informer, CONFIGMAPS, ns)
        items = (await c.list(CONFIGMAPS, ns)).items
        by_owner, by_app = _expected_indexes(items)
        assert _index_contents(informer, OWNER_UID_INDEX) == by_owner, step
        assert _index_contents(informer, "app") == by_app, step

    async with running(informer):
        o1 = await c.create(CONFIGMAPS, config_map("o1", ns))
        o2 = await c.create(CONFIGMAPS, config_map("o2", ns))
        d1 = config_map("d1", ns, {"app": "web"})
        d1["metadata"]["ownerReferences"] = [_owner_ref(o1, controller=True)]
        d2 = config_map("d2", ns, {"app": "web"})
        d2["metadata"]["ownerReferences"] = [
            _owner_ref(o1, controller=True),
            _owner_ref(o2, controller=False),
        ]
        await c.create(CONFIGMAPS, d1)
        await c.create(CONFIGMAPS, d2)
        await c.create(CONFIGMAPS, config_map("d3", ns, {"app": "db"}))
        await check("created")
        assert _index_contents(informer, OWNER_UID_INDEX)[_uid(o1)] == {"d1", "d2"}

        moved = {"labels": {"app": "db"}, "ownerReferences": [_owner_ref(o2, controller=True)]}
        await c.merge_patch(CONFIGMAPS, "d1", {"metadata": moved}, ns)
        await check("d1 moved to owner o2 and app=db")
        assert _index_contents(informer, "app") == {"web": {"d2"}, "db": {"d1", "d3"}}

        await c.merge_patch(CONFIGMAPS, "d3", {"metadata": {"labels": {"app": None}}}, ns)
        await check("label removed from d3")

        await c.delete(CONFIGMAPS, "d2", ns)
        await check("d2 deleted")
        assert _uid(o1) not in informer.store.index_values(OWNER_UID_INDEX), "empty bucket left"

        await c.delete(CONFIGMAPS, "o2", ns)  # the garbage collector deletes d1, its dependent

        async def d1_collected() -> bool:
            return "d1" not in await _server_state(c, CONFIGMAPS, ns)

        await eventually(d1_collected, timeout=15)
        await check("d1 collected with o2")
        assert informer.store.index_values(OWNER_UID_INDEX) == []
        assert informer.store.index_values("app") == []
        assert sorted(name for _, name in informer.store.keys())  # noqa: SIM118 == ["d3", "o1"]
        assert object_key(o1) in informer.store


# ---------------------------------------------------------------- a silent path
#: The silence after which a watch counts as dead, shortened from the default 60 s.
IDLE = 3.0


async def test_a_watch_gone_silent_is_noticed_and_the_informer_recovers_when_the_path_does(
    control_plane: ControlPlane, client: Client, namespace: str
) -> None:
    """The informer reaches the API server through a proxy that then stops forwarding
    without closing anything, as a dead middlebox does. The silent watch is given up
    `IDLE` seconds after its last byte (by default 60 s; before, only the read
    timeout of 330-390 s noticed), reconnects do not hang (TLS handshake timeout),
    and once the path works again the change made meanwhile arrives. The server ends
    each watch after 1 s here, so a healthy watch is never silent for `IDLE`."""
    await client.create(CONFIGMAPS, config_map("a", namespace, v="0"))
    direct = load_kubeconfig(control_plane.kubeconfig)
    target = urlsplit(direct.server)
    assert target.hostname is not None
    assert target.port is not None
    async with TcpProxy(target.hostname, target.port) as proxy:
        through = dataclasses.replace(direct, server=f"https://127.0.0.1:{proxy.port}")
        async with Client(
            through,
            user_agent="dpo-tests-proxy",
            watch_idle_timeout=IDLE,
            tls_handshake_timeout=1.0,
        ) as proxied:
            spy = SpyClient(proxied)
            informer = Informer(spy, CONFIGMAPS, namespace, backoff=Backoff(*FAST), watch_timeout=1)

            def value() -> str | None:
                obj = informer.store.get(namespace, "a")
                return obj["data"]["v"] if obj else None

            async with running(informer):
                await client.merge_patch(CONFIGMAPS, "a", {"data": {"v": "1"}}, namespace)

                async def seen(v: str) -> bool:
                    return value() == v

                await eventually(lambda: seen("1"), timeout=10)
                assert spy.failures == [], "a healthy watch through the proxy failed"

                proxy.stall()
                stalled_at = time.monotonic()
                await client.merge_patch(CONFIGMAPS, "a", {"data": {"v": "2"}}, namespace)

                def failures_since_stall() -> list[tuple[float, Exception]]:
                    return [(t, e) for t, e in spy.failures if t >= stalled_at]

                async def noticed_and_retried() -> bool:
                    return len(failures_since_stall()) >= 2

                await eventually(noticed_and_retried, timeout=IDLE + 15)
                (first_at, first), _ = failures_since_stall()[:2]
                assert isinstance(first, errors.ServerTimeout), repr(first)
                assert first_at - stalled_at <= IDLE + 2.5, (
                    f"noticed {first_at - stalled_at:.1f}s in"
                )
                assert value() == "1", "nothing can have passed the stalled proxy"

                proxy.resume()
                await eventually(lambda: seen("2"), timeout=10)


def _storage_reads(cp: ControlPlane, resource: str) -> dict[str, float]:
    """The API server's own counters for `resource`: etcd range reads (list operations),
    etcd revision checks, lists served by the watch cache, and watch-lists."""
    from prometheus_client.parser import text_string_to_metric_families

    status, body = cp.request("GET", "/metrics")
    assert status == 200
    out = {"etcd_list": 0.0, "etcd_revision": 0.0, "watchcache_list": 0.0, "watch_list": 0.0}
    for fam in text_string_to_metric_families(str(body)):
        for s in fam.samples:
            if s.labels.get("resource") != resource:
                continue
            op = s.labels.get("operation", "")
            if s.name == "etcd_requests_total" and op.startswith("list"):
                out["etcd_list"] += s.value
            elif s.name == "etcd_requests_total" and op == "getCurrentResourceVersion":
                out["etcd_revision"] += s.value
            elif s.name == "apiserver_storage_list_total" and s.labels.get("storage") == (
                "watchcache"
            ):
                out["watchcache_list"] += s.value
            elif s.name == "apiserver_watch_list_duration_seconds_count":
                out["watch_list"] += s.value
    return out


async def test_the_initial_list_is_streamed_from_the_watch_cache_not_read_from_etcd(
    control_plane: ControlPlane, client: Client, namespace: str
) -> None:
    """On a server with WatchList (1.37 here) the informer makes no list request: one
    watch-list, answered from the watch cache. The server's metrics show no etcd range
    read of the kind for it (one revision check, for the consistent "").

    The server's counters are per kind, not per client: once a test of this module
    has started kube-controller-manager, its namespace controller lists (and deletes
    by collection) the configmaps of every namespace an earlier test left, so the
    window waits until no other namespace is terminating."""
    for i in range(30):
        await client.create(CONFIGMAPS, config_map(f"c{i}", namespace, v=str(i)))

    async def no_other_namespace_terminating() -> bool:
        listed = await client.list(NAMESPACES)
        return not any(
            ns["metadata"].get("deletionTimestamp") and ns["metadata"]["name"] != namespace
            for ns in listed.items
        )

    if control_plane.garbage_collector:  # else nothing empties namespaces meanwhile
        await eventually(no_other_namespace_terminating, timeout=120)
    spy = SpyClient(client)
    before = _storage_reads(control_plane, "configmaps")
    informer = Informer(spy, CONFIGMAPS, namespace)
    async with running(informer):
        assert len(informer.store) == 30
        after = _storage_reads(control_plane, "configmaps")
    assert len(spy.lists) == 1  # the end bookmark of the one watch-list
    assert informer.watch_list
    assert after["watch_list"] - before["watch_list"] == 1
    assert after["etcd_list"] - before["etcd_list"] == 0
    assert after["watchcache_list"] - before["watchcache_list"] == 0  # no list request
