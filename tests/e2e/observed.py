"""What the e2e tests observe of a running world: what an operator in the test process
has cached, when it has nothing left to do, and which pods are Ready."""

from __future__ import annotations

from dynamo_pool_operator.localcluster import kwok
from dynamo_pool_operator.runtime import Client
from tests.harness import OperatorUnderTest


async def cached_at(op: OperatorUnderTest, namespace: str, export: str, rv: str) -> bool:
    """The operator's export cache holds `export` at resourceVersion `rv`."""
    exports = op.running.exports
    assert exports is not None
    cached = exports.exports.store.get(namespace, export)
    return cached is not None and cached["metadata"]["resourceVersion"] == rv


async def at_rest(op: OperatorUnderTest) -> None:
    """Nothing queued or in flight, and every Event written."""
    await op.settle()
    await op.running.recorder.wait_idle()


async def ready_pod_ips(client: Client, ns: str, selector: str) -> list[str]:
    """The pod IPs of the running, Ready pods that `selector` picks in `ns`, sorted."""
    pods = (await client.list(kwok.PODS, ns, label_selector=selector)).items
    return sorted(
        p["status"]["podIP"]
        for p in pods
        if kwok.running(p)
        and p["status"].get("podIP")
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in p["status"].get("conditions") or []
        )
    )
