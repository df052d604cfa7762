"""The reconciler's memory of quiet passes (pool/reconciler.py, `Snapshot.quiet_key`):
one number a relay, however many inputs the key reads, and a pass whose inputs moved
decides afresh."""

from __future__ import annotations

import copy
import gc
import sys

from dynamo_pool_operator.pool.reconciler import PoolRelayReconciler
from tests.unit.pool.support import reconciler
from tests.unit.pool.test_reconciler_own_writes import REQUEST, Server, relay


async def quiet_reconciler() -> tuple[Server, PoolRelayReconciler]:
    server = Server()
    r = reconciler(server)
    store = r.caches.relays.store
    store.put(relay("1"))
    await r.reconcile(REQUEST)  # writes the status
    store.put(relay("2", copy.deepcopy(server.applied[0]["status"])))  # its event
    await r.reconcile(REQUEST)  # decides again, does nothing: quiet
    assert REQUEST in r._quiet
    return server, r


async def test_a_quiet_pass_is_remembered_as_one_number_not_its_inputs() -> None:
    """At 10,000 pools the inputs themselves (a tuple of versions a field) held ~8 MB."""
    _, r = await quiet_reconciler()
    memo = r._quiet[REQUEST]
    assert not gc.get_referents(memo), f"the memo holds other objects: {memo!r}"
    assert sys.getsizeof(memo) <= 36


async def test_a_pass_whose_inputs_moved_is_not_skipped() -> None:
    server, r = await quiet_reconciler()
    before = r._quiet[REQUEST]
    store = r.caches.relays.store
    moved = relay("3", copy.deepcopy(server.applied[0]["status"]))
    moved["spec"] = {"clusterId": "west"}
    store.put(moved)
    await r.reconcile(REQUEST)
    assert len(server.applied) == 2  # decided afresh: the cluster ID it shows moved
    assert r._quiet.get(REQUEST) != before
