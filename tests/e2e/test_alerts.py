"""The chart's PrometheusRule and the operator's secure metrics, scraped for real.

What `promtool check rules` would do, without promtool: every expression is parsed by a
PromQL parser (promql-parser, the Rust parser GreptimeDB maintains, with Python
bindings), and every metric a rule reads must be one the operator exposes. "Exposes"
is not a list kept by hand: the operator runs as the chart's ServiceAccount with the
chart's default configuration (secure metrics), publishes and exports a pool, and is
scraped over HTTPS with the token of a ServiceAccount bound to the chart's
metrics-reader ClusterRole, as Prometheus would be. A token without that binding is
refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import aiohttp
import promql_parser
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dynamo_pool_operator.localcluster.controlplane import ControlPlane, free_port
from dynamo_pool_operator.runtime.client import Client
from tests.e2e.chart_helpers import CHART, helm, one, template
from tests.e2e.chart_operator import (
    POOL,
    Release,
    cluster_id,
    exported_status,
    install_as_service_account,
    mint_token,
    new_release,
    operator_running,
    publish_pool,
)

RULE_VALUES = {"prometheusRule": {"enabled": True}}
#: Labels Prometheus adds to every scraped series (target labels), not the operator.
TARGET_LABELS = {"job", "namespace", "instance", "pod", "service", "endpoint", "container"}


def rules(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    docs = template(RULE_VALUES | (values or {}))
    rule = one(docs, "PrometheusRule")
    return [r for g in rule["spec"]["groups"] for r in g["rules"]]


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
        cp, release, {"multiCluster": {"mcsImplementation": "mcs", "unconfirmedAfter": "0s"}}
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

    with cluster_id(cp) as cluster:
        async with operator_running(installed, cfg, client, namespace) as run:
            await publish_pool(client, namespace, cluster)
            await run.until(lambda: exported_status(client, namespace), "the pool exported")

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
