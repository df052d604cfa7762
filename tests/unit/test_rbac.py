"""The operator's RBAC rules (rbac.py): what they grant, what they never grant, and how
they are laid out as roles in either mode."""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator import rbac
from dynamo_pool_operator.config import (
    API_VERSION,
    KIND,
    LeaderElectionConfig,
    OperatorConfiguration,
    parse_configuration,
)

SA_NS, SA = "ops", "dpo"
SUBJECT = [{"kind": "ServiceAccount", "name": SA, "namespace": SA_NS}]


def grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def verbs(rules: list[dict[str, Any]], group: str, resource: str) -> set[str]:
    return {v for g, r, v in grants(rules) if (g, r) == (group, resource)}


def test_manager_rules_are_exactly_what_the_reconcilers_need() -> None:
    rules = rbac.manager_rules()
    assert verbs(rules, "nvidia.com", "dynamopoolrelays") == {"get", "list", "watch"}
    assert verbs(rules, "nvidia.com", "dynamopoolrelays/status") == {"patch"}
    # OwnerReferencesPermissionEnforcement: blockOwnerDeletion needs this, and only this.
    assert verbs(rules, "nvidia.com", "dynamopoolrelays/finalizers") == {"update"}
    assert verbs(rules, "nvidia.com", "dynamographdeployments") == {"get", "list", "watch"}
    # Whose a frontend's Service is (docs/exports.md, 'What is exported'): read only.
    assert verbs(rules, "nvidia.com", "dynamocomponentdeployments") == {"get", "list", "watch"}
    own = {"get", "list", "watch", "create", "patch", "delete"}
    assert verbs(rules, "apps", "deployments") == own
    assert verbs(rules, "", "services") == own
    assert verbs(rules, "policy", "poddisruptionbudgets") == own
    assert verbs(rules, "multicluster.x-k8s.io", "serviceexports") == own
    assert verbs(rules, "events.k8s.io", "events") == {"create", "patch"}
    resources = {(g, r) for g, r, _ in grants(rules)}
    assert len(resources) == 10, f"an unexpected resource is granted: {sorted(resources)}"


def test_no_rule_grants_what_the_operator_must_never_do() -> None:
    everything = rbac.manager_rules() + rbac.leader_election_rules() + rbac.cluster_property_rules()
    for g, r, v in grants(everything):
        assert "*" not in (g, r, v), "no wildcards"
        assert r not in ("secrets", "pods", "configmaps"), f"{r} is not the operator's business"
        assert g != "rbac.authorization.k8s.io", "no RBAC writes (escalation)"
        if r == "dynamographdeployments":
            assert v in ("get", "list", "watch"), "DGDs belong to Dynamo's operator"
        if r == "dynamopoolrelays":
            assert v in ("get", "list", "watch"), "a relay's spec is its user's"


def test_leader_election_and_cluster_property_rules() -> None:
    """The Lease Role reads and renews one Lease by name; only its create cannot be
    named (Kubernetes authorizes a create before the object has a name)."""
    assert rbac.leader_election_rules("team-lease") == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["team-lease"],
            "verbs": ["get", "update"],
        },
    ]
    assert LeaderElectionConfig().name == rbac.DEFAULT_LEASE_NAME
    assert rbac.leader_election_rules() == rbac.leader_election_rules(rbac.DEFAULT_LEASE_NAME)
    assert grants(rbac.cluster_property_rules()) == {
        ("about.k8s.io", "clusterproperties", v) for v in ("get", "list", "watch")
    }


def test_secure_metrics_rules() -> None:
    """The operator reviews tokens and access (kubebuilder's metrics filters), nothing
    else; a scraper gets `get /metrics` and nothing else."""
    assert grants(rbac.metrics_auth_rules()) == {
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    }
    assert rbac.metrics_reader_rules() == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def test_without_metrics_auth_no_metrics_roles() -> None:
    docs = by_kind(rbac.render(SA_NS, SA, None, SA_NS, metrics_auth=False))
    assert not [k for k in docs if "metrics" in k[1]]


def test_crd_upgrade_rules_touch_our_crd_only() -> None:
    """The chart's CRD upgrade hook may apply our CRD, by name, and nothing else (a
    server-side apply that creates checks `create` with the name, so it is named too)."""
    assert rbac.crd_upgrade_rules() == [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "resourceNames": ["dynamopoolrelays.nvidia.com"],
            "verbs": ["get", "create", "patch"],
        }
    ]


def test_each_rule_names_one_group_and_says_why() -> None:
    for rule in (
        rbac.MANAGER_RULES
        + rbac.leader_election_rule_set()
        + rbac.CLUSTER_PROPERTY_RULES
        + rbac.METRICS_AUTH_RULES
        + rbac.CRD_UPGRADE_RULES
    ):
        assert rule.why, f"{rule} does not say why the operator needs it"
        assert len(rule.to_dict()["apiGroups"]) == 1


def by_kind(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def test_render_cluster_wide() -> None:
    docs = by_kind(rbac.render(SA_NS, SA, None, SA_NS))
    assert set(docs) == {
        ("ClusterRole", "dynamo-pool-operator"),
        ("ClusterRoleBinding", "dynamo-pool-operator"),
        ("Role", "dynamo-pool-operator-leader-election"),
        ("RoleBinding", "dynamo-pool-operator-leader-election"),
        ("ClusterRole", "dynamo-pool-operator-clusterproperty-reader"),
        ("ClusterRoleBinding", "dynamo-pool-operator-clusterproperty-reader"),
        ("ClusterRole", "dynamo-pool-operator-metrics-auth"),
        ("ClusterRoleBinding", "dynamo-pool-operator-metrics-auth"),
        # For Prometheus, so deliberately not bound to the operator.
        ("ClusterRole", "dynamo-pool-operator-metrics-reader"),
    }
    assert docs["ClusterRole", "dynamo-pool-operator"]["rules"] == rbac.manager_rules()
    assert "namespace" not in docs["ClusterRole", "dynamo-pool-operator"]["metadata"]
    lease = docs["Role", "dynamo-pool-operator-leader-election"]
    assert lease["metadata"]["namespace"] == SA_NS
    assert lease["rules"] == rbac.leader_election_rules()
    for kind, name in docs:
        if kind.endswith("Binding"):
            binding = docs[kind, name]
            assert binding["subjects"] == SUBJECT
            assert binding["roleRef"] == {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": kind.removesuffix("Binding"),
                "name": name,
            }


@pytest.mark.parametrize("lease_ns", ["team-a", "ops"])
def test_render_restricted(lease_ns: str) -> None:
    docs = by_kind(rbac.render(SA_NS, SA, "team-a", lease_ns))
    role = docs["Role", "dynamo-pool-operator"]
    assert role["metadata"]["namespace"] == "team-a"
    assert role["rules"] == rbac.manager_rules()
    binding = docs["RoleBinding", "dynamo-pool-operator"]
    assert binding["metadata"]["namespace"] == "team-a"
    assert binding["subjects"] == SUBJECT  # the ServiceAccount lives elsewhere
    assert ("ClusterRole", "dynamo-pool-operator") not in docs
    # Cluster-scoped ClusterProperties: always a separate, read-only ClusterRole.
    reader = docs["ClusterRole", "dynamo-pool-operator-clusterproperty-reader"]
    assert reader["rules"] == rbac.cluster_property_rules()
    assert docs["Role", "dynamo-pool-operator-leader-election"]["metadata"]["namespace"] == lease_ns


def test_render_is_deterministic_and_fresh() -> None:
    a = rbac.render(SA_NS, SA, None, SA_NS)
    a[0]["rules"].clear()  # callers may mutate what they get
    assert rbac.render(SA_NS, SA, None, SA_NS)[0]["rules"] == rbac.manager_rules() != []


def test_chart_rules_are_the_roles() -> None:
    assert rbac.chart_rules() == {
        "manager": rbac.manager_rules(),
        "leaderElection": rbac.leader_election_rules(rbac.CHART_LEASE_NAME),
        "clusterPropertyReader": rbac.cluster_property_rules(),
        "metricsAuth": rbac.metrics_auth_rules(),
        "metricsReader": rbac.metrics_reader_rules(),
        "crdUpgrade": rbac.crd_upgrade_rules(),
        "relayEditor": rbac.relay_editor_rules(),
        "relayViewer": rbac.relay_viewer_rules(),
    }


def test_relay_user_roles_are_aggregated_to_kubernetes_user_facing_roles() -> None:
    """kubebuilder's editor and viewer roles: bound to nobody, aggregated so that
    `admin`/`edit` write relays and `view` reads them."""
    editor, viewer = rbac.user_roles()
    assert editor["kind"] == viewer["kind"] == "ClusterRole"
    assert editor["metadata"]["name"] == "dynamo-pool-operator-dynamopoolrelay-editor"
    assert viewer["metadata"]["name"] == "dynamo-pool-operator-dynamopoolrelay-viewer"
    aggregate = "rbac.authorization.k8s.io/aggregate-to-"
    assert {k: v for k, v in editor["metadata"]["labels"].items() if k.startswith(aggregate)} == {
        f"{aggregate}admin": "true",
        f"{aggregate}edit": "true",
    }
    assert {k: v for k, v in viewer["metadata"]["labels"].items() if k.startswith(aggregate)} == {
        f"{aggregate}view": "true"
    }
    assert editor["rules"] == [
        {
            "apiGroups": ["nvidia.com"],
            "resources": ["dynamopoolrelays"],
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        },
        {"apiGroups": ["nvidia.com"], "resources": ["dynamopoolrelays/status"], "verbs": ["get"]},
    ]
    assert viewer["rules"] == [
        {
            "apiGroups": ["nvidia.com"],
            "resources": ["dynamopoolrelays"],
            "verbs": ["get", "list", "watch"],
        },
        {"apiGroups": ["nvidia.com"], "resources": ["dynamopoolrelays/status"], "verbs": ["get"]},
    ]
    # Neither touches anything but relays: no Deployments, no status writes.
    for role in (editor, viewer):
        assert all(r["apiGroups"] == ["nvidia.com"] for r in role["rules"])
        assert not [
            r for r in role["rules"] if "status" in r["resources"][0] and r["verbs"] != ["get"]
        ]


# ---------------------------------------------------------------- what is asked, where
def _config(**sections: Any) -> OperatorConfiguration:
    return parse_configuration({"apiVersion": API_VERSION, "kind": KIND, **sections})


def _asked(cfg: OperatorConfiguration, lease_ns: str | None) -> set[tuple[str, str, str]]:
    return {(n.what, n.api_resource, n.namespace) for n in rbac.needs(cfg, lease_ns)}


def test_needs_are_every_verb_of_every_rule_the_configuration_uses() -> None:
    """One review per verb of each rule (as `check` and `run` ask them), where the rule
    applies: the manager's cluster-wide, or in the one namespace it is restricted to."""
    wide = rbac.needs(_config(), "ops")
    manager = [n for n in wide if n.what == rbac.MANAGER]
    assert len(manager) == sum(len(r.resources) * len(r.verbs) for r in rbac.MANAGER_RULES)
    assert {n.namespace for n in manager} == {""}
    lease = {(n.verb, n.rule.resource_names) for n in wide if n.what == rbac.LEADER_ELECTION}
    lease_name = rbac.DEFAULT_LEASE_NAME
    assert lease == {("create", ()), ("get", (lease_name,)), ("update", (lease_name,))}
    restricted = _asked(_config(namespace={"restricted": "team-a"}), "team-a")
    assert {ns for what, _, ns in restricted if what == rbac.MANAGER} == {"team-a"}


def test_needs_only_what_the_configuration_turns_on() -> None:
    assert {w for w, _, _ in _asked(_config(), None)} == {rbac.MANAGER}  # no Lease known
    off = _config(leaderElection={"enabled": False}, multiCluster={"mcsImplementation": "mcs"})
    assert {w for w, _, _ in _asked(off, "ops")} == {rbac.MANAGER, rbac.CLUSTER_ID}
    secure = _config(server={"metricsSecure": True, "metricsAddress": ":8443"})
    assert rbac.SECURE_METRICS in {w for w, _, _ in _asked(secure, "ops")}
    no_metrics = _config(server={"metricsSecure": True, "metricsAddress": "0"})
    assert rbac.SECURE_METRICS not in {w for w, _, _ in _asked(no_metrics, "ops")}


def test_what_the_operator_runs_without_is_optional() -> None:
    """The cluster ID's read and secure metrics' reviews degrade what they serve (the
    relays say `ClusterPropertyUnreadable`, a scrape gets 500); without the manager's or
    the Lease's rules nothing works: `run` exits."""
    cfg = _config(
        multiCluster={"mcsImplementation": "mcs"},
        server={"metricsSecure": True, "metricsAddress": ":8443"},
    )
    optional = {n.what for n in rbac.needs(cfg, "ops") if n.optional}
    assert optional == {rbac.CLUSTER_ID, rbac.SECURE_METRICS}


def test_missing_permissions_are_grouped_by_resource() -> None:
    """One line per resource (and named object), place and purpose, its verbs in the
    rule's order: what to grant reads as a Role's rules do."""
    needs = rbac.needs(_config(namespace={"restricted": "team-a"}), "ops")
    missing = [
        n for n in needs if n.api_resource in ("deployments.apps", "leases.coordination.k8s.io")
    ]
    assert rbac.grouped(missing) == [
        "deployments.apps in team-a: get, list, watch, create, patch, delete (manager)",
        "leases.coordination.k8s.io in ops: create (leader election)",
        f"leases.coordination.k8s.io {rbac.DEFAULT_LEASE_NAME} in ops: get, update "
        "(leader election)",
    ]
    status = [n for n in needs if n.resource.endswith("/status")]
    assert rbac.grouped(status) == ["dynamopoolrelays.nvidia.com/status in team-a: patch (manager)"]
