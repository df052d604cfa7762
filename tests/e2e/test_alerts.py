"""The chart's PrometheusRule and the operator's secure metrics, scraped for real.

What `promtool check rules` would do, without promtool: every expression is parsed by a
PromQL parser (promql-parser, the Rust parser GreptimeDB maintains, with Python
bindings), and every metric a rule reads must be one the operator exposes. "Exposes"
is not a list kept by hand: the operator runs as the chart's ServiceAccount with the
chart's default configuration (secure metrics), publishes and exports a pool, and is
scraped over HTTPS with the token of a ServiceAccount bound to the chart's
metrics-reader ClusterRole, as Prometheus would be. A token without that binding is
refused.

The gauge alerts are also evaluated (`promql_eval.py`, PromQL's instant-query
semantics for what those expressions use) on the scrapes of the chart's two replicas,
each a `dynamo-pool-operator run` process: an alert aggregates over replicas, and a
follower's series count as much as the leader's.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import promql_parser
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dynamo_pool_operator.localcluster.controlplane import ControlPlane, free_port
from dynamo_pool_operator.runtime.client.rest import Client
from tests.e2e.chart_helpers import CHART, helm, one, template
from tests.e2e.chart_operator import (
    POOL,
    RELAYS,
    Release,
    ReplicaProcess,
    exporting,
    install_as_service_account,
    mint_token,
    new_release,
    relay,
    replicas_running,
)
from tests.e2e.promql_eval import Sample, evaluate
from tests.e2e.promql_eval import sample as make_sample

RULE_VALUES = {"prometheusRule": {"enabled": True}}
#: Labels Prometheus adds to every scraped series (target labels), not the operator.
TARGET_LABELS = {"job", "namespace", "instance", "pod", "service", "endpoint", "container"}


BACKLOG = "DynamoPoolOperatorQueueBacklog"
NO_LEADER = "DynamoPoolOperatorNoLeader"


def rules(
    values: dict[str, Any] | None = None,
    *,
    release: str = "dynamo-pool-operator",
    namespace: str = "dpo-system",
) -> list[dict[str, Any]]:
    docs = template(RULE_VALUES | (values or {}), release=release, namespace=namespace)
    rule = one(docs, "PrometheusRule")
    return [r for g in rule["spec"]["groups"] for r in g["rules"]]


def expr_of(found: list[dict[str, Any]], alert: str) -> str:
    return str(next(r for r in found if r["alert"] == alert)["expr"])


def threshold(expr: str) -> float:
    """The number an `... > N` expression compares with, read from the rule itself."""
    node = promql_parser.parse(expr)
    assert isinstance(node, promql_parser.BinaryExpr), expr
    assert str(node.op) == ">", expr
    assert isinstance(node.rhs, promql_parser.NumberLiteral), expr
    return float(node.rhs.val)


def metrics_job(release: str = "dynamo-pool-operator", namespace: str = "dpo-system") -> str:
    """The `job` label Prometheus gives the series: the ServiceMonitor scrapes the metrics
    Service, and the Prometheus Operator names the job after it."""
    docs = template(release=release, namespace=namespace)
    names = [d["metadata"]["name"] for d in docs if d["kind"] == "Service"]
    found = [n for n in names if n.endswith("-metrics")]
    assert len(found) == 1, names
    return found[0]


def scraped(text: str, *, job: str, namespace: str, pod: str, port: int) -> list[Sample]:
    """One scrape as Prometheus stores it: every sample with the target's labels (a
    scraped label of the same name becomes `exported_<name>`, as without honor_labels)."""
    target = {
        "job": job,
        "namespace": namespace,
        "service": job,
        "pod": pod,
        "instance": f"127.0.0.1:{port}",
        "endpoint": "metrics",
        "container": "operator",
    }
    out = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = {(f"exported_{k}" if k in target else k): v for k, v in s.labels.items()}
            out.append(make_sample(s.name, {**labels, **target}, s.value))
    return out


@dataclasses.dataclass(frozen=True)
class Selector:
    metric: str
    labels: frozenset[str]


def selectors(expr: str) -> list[Selector]:
    """Every metric an expression reads, with the label names it matches on."""
    found: list[Selector] = []

    def visit(node: Any) -> bool:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names = {m.name for m in node.matchers.matchers}
            found.append(Selector(node.name, frozenset(names)))
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


# ====================================================================== render and parse
def test_the_rule_is_off_by_default() -> None:
    assert not [d for d in template() if d["kind"] == "PrometheusRule"]


def test_every_alert_parses_and_is_complete() -> None:
    found = rules()
    names = [r["alert"] for r in found]
    assert len(names) == len(set(names)), "alert names repeat"
    # What docs/operations.md recommends alerting on, each covered.
    for want in (
        "DynamoPoolOperatorNoLeader",
        "DynamoPoolOperatorReconcileErrors",
        "DynamoPoolExportsFailing",
        "DynamoPoolRelayNotReady",
        "DynamoPoolOperatorQueueBacklog",
        "DynamoPoolOperatorQueueStalled",
        "DynamoPoolOperatorInformerFailing",
        "DynamoPoolOperatorUndecodableObjects",
    ):
        assert want in names
    for r in found:
        promql_parser.parse(r["expr"])  # raises on a syntax error
        assert selectors(r["expr"]), f"{r['alert']} reads no metric"
        assert r["labels"]["severity"] in ("critical", "warning", "info"), r
        assert r["annotations"]["summary"], r
        assert r["annotations"]["description"], r
        if "for" in r:
            assert promql_parser.parse_duration(r["for"]).total_seconds() > 0, r
        for s in selectors(r["expr"]):
            # This release's series only, whatever else the Prometheus scrapes.
            assert {"job", "namespace"} <= s.labels, f"{r['alert']}: {s}"


def test_a_broken_expression_is_caught() -> None:
    """The parser is a real check: it refuses what promtool refuses."""
    with pytest.raises(Exception, match=r"."):
        promql_parser.parse("sum(rate(workqueue_depth[5m]) > 0")
    with pytest.raises(Exception, match=r"."):
        promql_parser.parse('max(x{state="Failed"}) >')


def test_values_reach_the_rules() -> None:
    found = {
        r["alert"]: r
        for r in rules(
            {
                "prometheusRule": {
                    "enabled": True,
                    "relayNotReadyFor": "30m",
                    "queueDepthThreshold": 7,
                    "additionalAlertLabels": {"team": "ml"},
                }
            }
        )
    }
    assert found["DynamoPoolRelayNotReady"]["for"] == "30m"
    assert found["DynamoPoolOperatorQueueBacklog"]["expr"].endswith("> 7")
    assert all(r["labels"]["team"] == "ml" for r in found.values())


def test_the_backlog_and_leader_alerts_are_judged_over_every_replica() -> None:
    """The rendered expressions, evaluated on hand-made scrapes of two replicas: a
    backlog on any one replica fires, and so does any count of leaders but one; series
    of another job are not this release's."""
    found = rules()
    backlog, no_leader = expr_of(found, BACKLOG), expr_of(found, NO_LEADER)
    limit = threshold(backlog)
    job = metrics_job()

    def on(pod: str, name: str, value: float, labels: dict[str, str], **where: str) -> Sample:
        target = {"job": job, "namespace": "dpo-system", "pod": pod} | where
        return make_sample(name, labels | target, value)

    def depths(a: float, b: float, **where: str) -> list[Sample]:
        q = {"name": "dynamopoolrelay"}
        return [on("a", "workqueue_depth", a, q, **where), on("b", "workqueue_depth", b, q)]

    assert evaluate(backlog, depths(0, 0)) == []
    assert evaluate(backlog, depths(limit, 0)) == []
    assert evaluate(backlog, depths(0, limit + 1)) == [Sample((), limit + 1)]
    assert evaluate(backlog, depths(limit + 1, 0)) == [Sample((), limit + 1)]
    assert evaluate(backlog, depths(limit + 1, 0, job="other")) == []

    def leaders(*status: float) -> list[Sample]:
        lease = {"name": "dynamo-pool-operator-leader"}
        return [on(str(i), "leader_election_master_status", v, lease) for i, v in enumerate(status)]

    assert evaluate(no_leader, leaders(1, 0)) == []
    assert evaluate(no_leader, leaders(1, 1)) == [Sample((), 2.0)]
    assert evaluate(no_leader, leaders(0, 0)) == [Sample((), 0.0)]
    assert evaluate(no_leader, []) == [Sample((), 0.0)]  # no replica scraped at all


def test_lint_with_the_rule_enabled() -> None:
    proc = helm("lint", "--strict", str(CHART), values=RULE_VALUES)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ====================================================================== against the operator
@pytest.fixture
def control_plane(node_plane: ControlPlane) -> ControlPlane:
    """The plane with a (kwok) Node: the relay-Ready alert needs a relay that can be
    Ready, and a relay is Ready only when its pods run."""
    return node_plane


@pytest.fixture
def release(control_plane: ControlPlane) -> Iterator[Release]:
    with new_release(control_plane, "alerts") as rel:
        yield rel


def grant_reader(cp: ControlPlane, docs: list[dict[str, Any]], ns: str, sa: str) -> None:
    """Bind the chart's metrics-reader ClusterRole to `ns/sa`, as a user binds it to
    their Prometheus."""
    reader = next(
        d
        for d in docs
        if (d["kind"] == "ClusterRole" and d["metadata"]["name"].startswith(f"{ns}-"))
        or (d["kind"] == "ClusterRole" and "-metrics-reader." in d["metadata"]["name"])
    )
    cp.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {
                "name": f"{reader['metadata']['name']}-{sa}",
                "labels": {"app.kubernetes.io/instance": ns},
            },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": reader["metadata"]["name"],
            },
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
        }
    )


async def scrape(url: str, token: str) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers, ssl=False) as r:
        return r.status, await r.text()


def exposed(text: str) -> dict[str, set[str]]:
    """Sample name -> label names seen, for every family in a scrape. A family with no
    samples yet (a labelled counter never incremented) still declares its names."""
    out: dict[str, set[str]] = {}
    suffixes = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count")}
    for family in text_string_to_metric_families(text):
        for suffix in suffixes.get(family.type, ("",)):
            out.setdefault(family.name + suffix, set())
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return out


async def test_every_alert_reads_metrics_the_operator_exposes(
    control_plane: ControlPlane, client: Client, namespace: str, release: Release
) -> None:
    cp = control_plane
    installed = install_as_service_account(
        cp, release, {"multiCluster": {"mcsImplementation": "mcs", "confirmation": "none"}}
    )
    cfg = installed.configuration()
    assert cfg.server.metrics_secure, "the chart's default is secure metrics"
    port = free_port()
    cfg = dataclasses.replace(
        cfg, server=dataclasses.replace(cfg.server, metrics_address=f"127.0.0.1:{port}")
    )
    for sa in ("prometheus", "stranger"):
        status, body = cp.request(
            "POST",
            f"/api/v1/namespaces/{release.namespace}/serviceaccounts",
            {"metadata": {"name": sa}},
        )
        assert status == 201, body
    grant_reader(cp, installed.docs, release.namespace, "prometheus")
    prometheus = mint_token(cp, release.namespace, "prometheus")
    stranger = mint_token(cp, release.namespace, "stranger")
    url = f"https://127.0.0.1:{port}/metrics"

    async with exporting(cp, installed, cfg, client, namespace) as (run, _, _):

        async def scraped() -> str | None:
            status, text = await scrape(url, prometheus)
            ready = f'relay="{POOL}",relay_namespace="{namespace}"'
            return text if status == 200 and f"relay_ready{{{ready}}} 1.0" in text else None

        text = await run.until(scraped, "a scrape showing the relay Ready")
        status, body = await scrape(url, stranger)
        assert status == 403, f"an unbound token scraped: {status} {body[:200]}"

    series = exposed(text)
    for r in rules():
        for s in selectors(r["expr"]):
            assert s.metric in series, f"{r['alert']} reads {s.metric}, which is not exposed"
            labels = s.labels - TARGET_LABELS
            if series[s.metric]:  # samples seen: their label names are known
                assert labels <= series[s.metric], (
                    f"{r['alert']} matches {sorted(labels - series[s.metric])} on {s.metric}, "
                    f"which has {sorted(series[s.metric])}"
                )


# ====================================================================== two replicas
async def poll(
    probe: Callable[[], Awaitable[Any]],
    what: str,
    replicas: list[ReplicaProcess],
    timeout: float = 120,
) -> Any:
    """Poll `probe` until truthy; fail at once, with its log, if a replica exits."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Any = None
    while loop.time() < deadline:
        for r in replicas:
            if r.popen.poll() is not None:
                pytest.fail(f"{r.name} exited with {r.popen.returncode}:\n{r.log_tail()}")
        try:
            last = await probe()
        except aiohttp.ClientError as e:  # not listening yet
            last = e
        else:
            if last:
                return last
        await asyncio.sleep(0.5)
    logs = "\n".join(f"--- {r.name}\n{r.log_tail()}" for r in replicas)
    pytest.fail(f"{what}: not within {timeout}s; last {last!r}\n{logs}")


async def test_no_backlog_alert_on_a_two_replica_install_once_the_leader_drained(
    control_plane: ControlPlane,
    client: Client,
    namespace: str,
    release: Release,
    tmp_path: Path,
) -> None:
    """The chart's default install (two replicas, leader election, secure metrics) with
    more relays than the backlog alert's threshold (read from the rendered rule). Once
    the leader has reconciled them all and its queue is empty, the alert's expression,
    evaluated over the scrapes of both replicas, must not fire; nor the no-leader one.
    (A follower used to queue every relay and never drain: its depth alone kept the
    alert firing for good.)"""
    cp = control_plane
    installed = install_as_service_account(cp, release, {})
    assert one(installed.docs, "Deployment")["spec"]["replicas"] == 2  # the chart default
    found = rules(release=release.name, namespace=release.namespace)
    backlog, no_leader = expr_of(found, BACKLOG), expr_of(found, NO_LEADER)
    count = int(threshold(backlog)) + 20
    job = metrics_job(release.name, release.namespace)

    sem = asyncio.Semaphore(16)

    async def create(i: int) -> None:
        async with sem:
            await client.create(RELAYS, relay(f"pool-{i:03d}", namespace, "c1"))

    await asyncio.gather(*(create(i) for i in range(count)))
    status, body = cp.request(
        "POST",
        f"/api/v1/namespaces/{release.namespace}/serviceaccounts",
        {"metadata": {"name": "prometheus"}},
    )
    assert status == 201, body
    grant_reader(cp, installed.docs, release.namespace, "prometheus")
    token = mint_token(cp, release.namespace, "prometheus")

    with replicas_running(installed, release, tmp_path) as replicas:

        async def scrape_all() -> dict[str, list[Sample]]:
            out = {}
            for r in replicas:
                code, text = await scrape(f"https://127.0.0.1:{r.metrics_port}/metrics", token)
                assert code == 200, f"{r.name}: {code} {text[:200]}"
                out[r.name] = scraped(
                    text, job=job, namespace=release.namespace, pod=r.name, port=r.metrics_port
                )
            return out

        def value(samples: list[Sample], metric: str, **labels: str) -> float:
            return sum(
                s.value
                for s in samples
                if s.label("__name__") == metric and all(s.label(k) == v for k, v in labels.items())
            )

        async def ready() -> bool:
            async with aiohttp.ClientSession() as http:
                for r in replicas:
                    async with http.get(f"http://127.0.0.1:{r.health_port}/readyz") as answer:
                        if answer.status != 200:
                            return False
            return True

        await poll(ready, "both replicas ready (caches synced)", replicas)

        async def drained() -> dict[str, list[Sample]] | None:
            now = await scrape_all()
            leading = [n for n, s in now.items() if value(s, "leader_election_master_status")]
            if len(leading) != 1:
                return None
            leader = now[leading[0]]
            done = value(leader, "controller_runtime_reconcile_total", controller="dynamopoolrelay")
            depth = value(leader, "workqueue_depth", name="dynamopoolrelay")
            return now if done >= count and depth == 0 else None

        now = await poll(drained, f"the leader reconciled {count} relays and drained", replicas)
        await asyncio.sleep(2)  # the follower has had time to queue whatever it would
        now = await scrape_all()
        every = [s for samples in now.values() for s in samples]
        depths = {n: value(s, "workqueue_depth", name="dynamopoolrelay") for n, s in now.items()}
        assert evaluate(backlog, every) == [], (
            f"{BACKLOG} fires with {count} relays, the leader drained: depth by replica "
            f"{depths}, threshold {threshold(backlog):.0f}"
        )
        assert evaluate(no_leader, every) == []
        assert all(d == 0 for d in depths.values()), depths
    codes = {r.name: r.popen.returncode for r in replicas}
    assert set(codes.values()) == {0}, f"replicas did not stop cleanly: {codes}"
