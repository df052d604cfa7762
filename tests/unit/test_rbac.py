"""The operator's RBAC rules (rbac.py): what they grant, what they never grant, and how
they are laid out as roles in either mode."""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator import rbac
from dynamo_pool_operator.config import LeaderElectionConfig

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
