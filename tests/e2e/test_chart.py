"""The Helm chart: it lints, renders what we mean, and its RBAC is enough and no more.

The last tests prove the chart works as installed: the chart is rendered with `helm
template`, everything but the Deployment is applied to the real control plane, and the
operator process runs with the rendered configuration *as the chart's ServiceAccount*
(a TokenRequest token). It publishes a pool and exports it, so the chart's RBAC is
sufficient; the same identity is refused Secrets and DGD writes, so it is not too wide.
Both cluster-wide and namespace-restricted.
"""

from __future__ import annotations

import io
import re
import uuid
from collections.abc import Awaitable, Iterator
from typing import Any

import pytest
import yaml

from dynamo_pool_operator import __version__
from dynamo_pool_operator import status as status_command
from dynamo_pool_operator.config import OperatorConfiguration, to_document
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import (
    DEPLOYMENTS,
    EVENTS,
    LEASES,
    SECRETS,
    SERVICES,
    Resource,
)
from tests.e2e.chart_helpers import (
    CHART,
    helm,
    one,
    rendered_configuration,
    restricted_values,
    template,
    template_error,
)
from tests.e2e.chart_operator import (
    CLUSTER_PROPERTIES,
    DGDS,
    FRONTEND_SVC,
    POOL,
    RELAY_SVC,
    RELAYS,
    SERVICEEXPORTS,
    Release,
    dgd,
    exporting,
    install_as_service_account,
    mint_token,
    new_release,
)

CLUSTER_ROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
NETWORK_POLICIES = Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy")
CLUSTER_SCOPED = (
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
)

MODES = pytest.mark.parametrize("restricted", [False, True], ids=["cluster-wide", "restricted"])


# ====================================================================== helm lint / template
@pytest.mark.parametrize(
    "values",
    [
        {},
        restricted_values("team-a"),
        {
            "multiCluster": {"mcsImplementation": "karmada"},
            "metrics": {"serviceMonitor": {"enabled": True}},
        },
        {"leaderElection": {"enabled": False}, "replicaCount": 1, "rbac": {"create": False}},
        {"networkPolicy": {"enabled": True, "health": {"from": [{"namespaceSelector": {}}]}}},
    ],
    ids=["default", "restricted", "karmada-servicemonitor", "single-replica", "network-policy"],
)
def test_helm_lint_passes(values: dict[str, Any]) -> None:
    proc = helm("lint", "--strict", str(CHART), values=values)
    assert proc.returncode == 0, f"helm lint failed:\n{proc.stdout}\n{proc.stderr}"


def test_default_render() -> None:
    docs = template()
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert kinds == [
        ("ClusterRole", "dynamo-pool-operator-clusterproperty-reader.dpo-system"),
        ("ClusterRole", "dynamo-pool-operator-crd-upgrade.dpo-system"),  # hook
        ("ClusterRole", "dynamo-pool-operator-dynamopoolrelay-editor.dpo-system"),
        ("ClusterRole", "dynamo-pool-operator-dynamopoolrelay-viewer.dpo-system"),
        ("ClusterRole", "dynamo-pool-operator-metrics-auth.dpo-system"),
        ("ClusterRole", "dynamo-pool-operator-metrics-reader.dpo-system"),
        ("ClusterRole", "dynamo-pool-operator.dpo-system"),
        ("ClusterRoleBinding", "dynamo-pool-operator-clusterproperty-reader.dpo-system"),
        ("ClusterRoleBinding", "dynamo-pool-operator-crd-upgrade.dpo-system"),  # hook
        ("ClusterRoleBinding", "dynamo-pool-operator-metrics-auth.dpo-system"),
        ("ClusterRoleBinding", "dynamo-pool-operator.dpo-system"),
        ("ConfigMap", "dynamo-pool-operator"),
        ("Deployment", "dynamo-pool-operator"),
        ("Job", "dynamo-pool-operator-crd-upgrade"),  # hook
        ("Role", "dynamo-pool-operator-leader-election"),
        ("RoleBinding", "dynamo-pool-operator-leader-election"),
        ("Service", "dynamo-pool-operator-metrics"),
        ("ServiceAccount", "dynamo-pool-operator"),
        ("ServiceAccount", "dynamo-pool-operator-crd-upgrade"),  # hook
        ("ValidatingAdmissionPolicy", "dynamo-pool-operator-relay-pod-fields.dpo-system"),
        ("ValidatingAdmissionPolicyBinding", "dynamo-pool-operator-relay-pod-fields.dpo-system"),
    ]
    for d in docs:
        labels = d["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "dynamo-pool-operator"
        assert labels["app.kubernetes.io/instance"] == "dynamo-pool-operator"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        if d["kind"] not in CLUSTER_SCOPED:
            assert d["metadata"]["namespace"] == "dpo-system"

    dep = one(docs, "Deployment")
    spec = dep["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert pod["serviceAccountName"] == "dynamo-pool-operator"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["image"] == f"nvcr.io/nvidia/ai-dynamo/dynamo-pool-operator:{__version__}"
    assert container["args"] == ["run", "--config", "/etc/dynamo-pool-operator/config.yaml"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8080, "health": 8081}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["resources"]["requests"]
    assert container["resources"]["limits"]
    assert re.fullmatch(
        "[0-9a-f]{64}", spec["template"]["metadata"]["annotations"]["checksum/config"]
    )
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/dynamo-pool-operator"]["readOnly"] is True

    svc = one(docs, "Service")
    assert svc["spec"]["selector"] == spec["selector"]["matchLabels"]
    assert svc["spec"]["ports"] == [
        {"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}
    ]


def test_default_configuration_is_the_operators_default() -> None:
    """values.yaml's defaults are the operator's, except what the chart decides for a pod:
    JSON logs, the Lease named after the release in the release namespace, and secure
    metrics (a pod's port is reachable from the whole pod network)."""
    cfg = to_document(rendered_configuration(template()))
    want = to_document(OperatorConfiguration())
    want["logging"]["format"] = "json"
    want["server"]["metricsSecure"] = True
    want["leaderElection"]["namespace"] = "dpo-system"
    want["leaderElection"]["name"] = "dynamo-pool-operator-leader"
    assert cfg == want


def test_values_reach_the_configuration() -> None:
    values = {
        "multiCluster": {
            "mcsImplementation": "karmada",
            "confirmation": "required",
            "unconfirmedAfter": "0s",
            "apiDiscoveryInterval": "10s",
        },
        "discovery": {"backend": "etcd"},
        "leaderElection": {"leaseDuration": "30s", "renewDeadline": "20s", "retryPeriod": "5s"},
        "poolRelay": {
            "image": "example.com/relay:1.2.3",
            "imagePullPolicy": "Always",
            "port": 9000,
            "replicas": 3,
        },
        "controller": {"workers": 8},
        "clientConnection": {"qps": 50, "burst": 75},
        "logging": {"level": "debug", "format": "text"},
        "metrics": {"port": 9090},
        "health": {"port": 9091},
    }
    docs = template(values)
    cfg = rendered_configuration(docs)
    assert cfg.multi_cluster.mcs_implementation == "karmada"
    assert cfg.multi_cluster.confirmation == "ready"  # `required` is its old name
    assert cfg.multi_cluster.unconfirmed_after == 0
    assert cfg.multi_cluster.api_discovery_interval == 10
    assert cfg.discovery.backend == "etcd"
    le = cfg.leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (30, 20, 5)
    relay = cfg.pool_relay
    assert (relay.image, relay.image_pull_policy, relay.port, relay.replicas) == (
        "example.com/relay:1.2.3",
        "Always",
        9000,
        3,
    )
    assert cfg.controller.workers == 8
    assert (cfg.client_connection.qps, cfg.client_connection.burst) == (50, 75)
    assert (cfg.logging.level, cfg.logging.format) == ("debug", "console")  # text: old name
    assert (cfg.server.metrics_address, cfg.server.health_probe_address) == (":9090", ":9091")
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "metrics": 9090,
        "health": 9091,
    }


def test_secure_metrics_values() -> None:
    """`metrics.secure` reaches the configuration, the ServiceMonitor scrapes HTTPS with
    Prometheus' token, and a `certSecret` is mounted where the configuration says."""
    monitor = {"serviceMonitor": {"enabled": True}}
    docs = template({"metrics": {"certSecret": "dpo-metrics-tls", **monitor}})
    cfg = rendered_configuration(docs)
    assert cfg.server.metrics_secure
    (endpoint,) = one(docs, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["metrics-tls"] == cfg.server.metrics_cert_dir
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["metrics-tls"]["secret"] == {"secretName": "dpo-metrics-tls"}

    plain = template({"metrics": {"secure": False, "certSecret": "ignored", **monitor}})
    cfg = rendered_configuration(plain)
    assert (cfg.server.metrics_secure, cfg.server.metrics_cert_dir) == (False, "")
    assert "scheme" not in one(plain, "ServiceMonitor")["spec"]["endpoints"][0]
    assert not [d for d in plain if "metrics-" in d["metadata"]["name"] and "Role" in d["kind"]]


NS = "dpo-system"  # chart_helpers.template's release namespace


def test_the_service_monitor_verifies_the_certificate_and_sends_a_scraper_token() -> None:
    """Secure metrics scraped by the chart's ServiceMonitor: the serving certificate is
    verified against its CA by the Service's DNS name (no `insecureSkipVerify`), and the
    scrape authenticates with `authorization` (not the deprecated `bearerTokenFile`): the
    token of a ServiceAccount the chart binds to the metrics-reader ClusterRole."""
    docs = template({"metrics": {"serviceMonitor": {"enabled": True}}})
    (endpoint,) = one(docs, "ServiceMonitor")["spec"]["endpoints"]
    assert "bearerTokenFile" not in endpoint
    tls = endpoint["tlsConfig"]
    assert not tls.get("insecureSkipVerify")
    (svc,) = [
        d for d in docs if d["kind"] == "Service" and d["metadata"]["name"].endswith("-metrics")
    ]
    assert tls["serverName"] == f"{svc['metadata']['name']}.{NS}.svc"
    secrets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}
    served = secrets[tls["ca"]["secret"]["name"]]
    assert served["type"] == "kubernetes.io/tls"
    assert {"ca.crt", "tls.crt", "tls.key"} <= set(served["data"])
    cfg = rendered_configuration(docs)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["metrics-tls"]["secret"]["secretName"] == served["metadata"]["name"]
    assert cfg.server.metrics_cert_dir
    _verifies(served, tls["serverName"])

    auth = endpoint["authorization"]
    assert auth["type"] == "Bearer"
    token = secrets[auth["credentials"]["name"]]
    assert token["type"] == "kubernetes.io/service-account-token"
    scraper = token["metadata"]["annotations"]["kubernetes.io/service-account.name"]
    assert ("ServiceAccount", scraper) in {(d["kind"], d["metadata"]["name"]) for d in docs}
    (binding,) = [
        d
        for d in docs
        if d["kind"] == "ClusterRoleBinding"
        and d["subjects"] == [{"kind": "ServiceAccount", "name": scraper, "namespace": NS}]
    ]
    readers = [
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == "ClusterRole" and "metrics-reader" in d["metadata"]["name"]
    ]
    assert binding["roleRef"]["name"] in readers

    given = template(
        {
            "metrics": {
                "certSecret": "mine",
                "serviceMonitor": {
                    "enabled": True,
                    "tlsConfig": {"ca": {"secret": {"name": "mine", "key": "ca.crt"}}},
                },
            }
        }
    )
    assert not [d for d in given if d["kind"] == "Secret" and d["type"] == "kubernetes.io/tls"]
    (endpoint,) = one(given, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["tlsConfig"] == {"ca": {"secret": {"name": "mine", "key": "ca.crt"}}}


def _verifies(secret: dict[str, Any], server_name: str) -> None:
    """The chart's certificate is signed by its CA and names `server_name`."""
    import base64

    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    key = ca.public_key()
    assert isinstance(key, rsa.RSAPublicKey)
    assert cert.signature_hash_algorithm is not None
    key.verify(
        cert.signature,
        cert.tbs_certificate_bytes,
        padding.PKCS1v15(),
        cert.signature_hash_algorithm,
    )
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert server_name in names.get_values_for_type(x509.DNSName)


def test_restricted_render() -> None:
    docs = template(restricted_values("team-a"))
    cfg = rendered_configuration(docs)
    assert cfg.namespace.restricted == "team-a"
    # The operator may write only in team-a, so its Lease lives there.
    assert cfg.leader_election.namespace == "team-a"
    roles = {(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")) for d in docs}
    assert ("Role", "dynamo-pool-operator", "team-a") in roles
    assert ("RoleBinding", "dynamo-pool-operator", "team-a") in roles
    assert ("Role", "dynamo-pool-operator-leader-election", "team-a") in roles
    assert ("ClusterRole", "dynamo-pool-operator-clusterproperty-reader.dpo-system", None) in roles
    # Cluster-wide only what no Role can grant: ClusterProperties (cluster-scoped), the
    # token and access reviews of secure metrics, the unbound reader for Prometheus, the
    # CRD upgrade hook's own identity (a hook: gone after the upgrade), and the unbound
    # relay editor and viewer roles Kubernetes aggregates into admin, edit and view.
    assert sorted(n for k, n, _ in roles if k == "ClusterRole") == [
        "dynamo-pool-operator-clusterproperty-reader.dpo-system",
        "dynamo-pool-operator-crd-upgrade.dpo-system",
        "dynamo-pool-operator-dynamopoolrelay-editor.dpo-system",
        "dynamo-pool-operator-dynamopoolrelay-viewer.dpo-system",
        "dynamo-pool-operator-metrics-auth.dpo-system",
        "dynamo-pool-operator-metrics-reader.dpo-system",
    ]
    # The admission policy is bound where the operator acts, and nowhere else.
    binding = one(docs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["matchResources"] == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}
    }
    binding = one(docs, "RoleBinding", "dynamo-pool-operator")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "dynamo-pool-operator", "namespace": "dpo-system"}
    ]


async def test_two_restricted_releases_of_one_name_install_in_two_namespaces(
    control_plane: ControlPlane,
) -> None:
    """`helm install`, for real: one release name in two namespaces, each operator
    restricted to its own namespace (one per team). Helm refuses to adopt an object of
    another release, so every cluster-scoped object must carry the release namespace;
    each team's ServiceAccount then reads ClusterProperties through its own binding."""
    cp = control_plane
    name = f"ops-{uuid.uuid4().hex[:6]}"
    teams = [f"team-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    kubeconfig = str(cp.kubeconfig)
    try:
        for ns in teams:
            cp.create_namespace(ns)
            # --no-hooks: the CRD upgrade hook's Job needs a node (test_crd_upgrade.py
            # plays the kubelet for it).
            proc = helm(
                "install", name, str(CHART), "--namespace", ns, "--kubeconfig", kubeconfig,
                "--no-hooks",
                values={"multiCluster": {"mcsImplementation": "mcs"}} | restricted_values(ns),
            )  # fmt: skip
            assert proc.returncode == 0, f"helm install {name} -n {ns}:\n{proc.stderr}"
        async with Client(load_kubeconfig(cp.kubeconfig), user_agent="dpo-tests") as admin:
            bindings = await admin.list(
                CLUSTER_ROLE_BINDINGS, label_selector=f"app.kubernetes.io/instance={name}"
            )
            # Each team's cluster-wide bindings (ClusterProperty reader, metrics auth)
            # are its own.
            for role in ("clusterproperty-reader", "metrics-auth"):
                subjects = sorted(
                    s["namespace"]
                    for b in bindings.items
                    if f"-{role}." in b["metadata"]["name"]
                    for s in b["subjects"]
                )
                assert subjects == sorted(teams), [b["metadata"]["name"] for b in bindings.items]
        for ns in teams:
            sa = one(
                template(restricted_values(ns), release=name, namespace=ns, hooks=False),
                "ServiceAccount",
            )
            token = mint_token(cp, ns, sa["metadata"]["name"])
            kc = cp.token_kubeconfig(token, user=f"{name}-{ns}")
            async with Client(load_kubeconfig(kc), user_agent="chart-e2e-probe") as team:
                await team.list(CLUSTER_PROPERTIES)
    finally:
        for ns in teams:
            helm("uninstall", name, "--namespace", ns, "--kubeconfig", kubeconfig)
            cp.delete_namespace(ns)


def test_config_checksum_rolls_pods_only_on_configuration_changes() -> None:
    def checksum(values: dict[str, Any]) -> str:
        dep = one(template(values), "Deployment")
        return str(dep["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    base = checksum({})
    assert checksum({"logging": {"level": "debug"}}) != base
    assert checksum({"replicaCount": 3}) == base


def test_image_tag_and_digest() -> None:
    def image(values: dict[str, Any]) -> str:
        dep = one(template(values), "Deployment")
        return str(dep["spec"]["template"]["spec"]["containers"][0]["image"])

    assert image({"image": {"tag": "1.2.3"}}).endswith(":1.2.3")
    digest = "sha256:" + "a" * 64
    assert image({"image": {"digest": digest}}).endswith("@" + digest)


def test_service_monitor_is_optional() -> None:
    assert not [d for d in template() if d["kind"] == "ServiceMonitor"]
    docs = template({"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "p"}}}})
    sm = one(docs, "ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "p"
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    svc = one(docs, "Service")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()


def test_pod_disruption_budget_is_optional_and_selects_the_operator_pods() -> None:
    assert not [d for d in template() if d["kind"] == "PodDisruptionBudget"]
    docs = template({"podDisruptionBudget": {"enabled": True}})
    pdb = one(docs, "PodDisruptionBudget")
    deployment = one(docs, "Deployment")
    assert pdb["spec"]["selector"] == deployment["spec"]["selector"]
    assert pdb["metadata"]["namespace"] == "dpo-system"
    assert pdb["spec"]["minAvailable"] == 1
    assert "maxUnavailable" not in pdb["spec"]
    spec = one(
        template({"podDisruptionBudget": {"enabled": True, "maxUnavailable": "50%"}}),
        "PodDisruptionBudget",
    )["spec"]
    assert (spec.get("minAvailable"), spec["maxUnavailable"]) == (None, "50%")


async def test_the_api_server_accepts_the_pod_disruption_budget(
    control_plane: ControlPlane, client: Client, namespace: str
) -> None:
    """Rendered into a test namespace and applied for real: policy/v1 validation."""
    values = {"podDisruptionBudget": {"enabled": True, "maxUnavailable": 1}}
    pdb = one(template(values, namespace=namespace), "PodDisruptionBudget")
    control_plane.apply(pdb)
    stored = await client.get(PDBS, pdb["metadata"]["name"], namespace)
    assert stored["spec"]["maxUnavailable"] == 1
    assert stored["spec"]["selector"] == pdb["spec"]["selector"]


MONITORING = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}


def ingress_by_port(policy: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """The policy's ingress rules as {port: peers}; each rule names one TCP port."""
    out: dict[int, list[dict[str, Any]]] = {}
    for rule in policy["spec"]["ingress"]:
        (port,) = rule["ports"]
        assert port["protocol"] == "TCP"
        out[port["port"]] = rule["from"]
    return out


def test_network_policy_is_optional_and_admits_only_the_metrics_and_health_ports() -> None:
    assert not [d for d in template() if d["kind"] == "NetworkPolicy"]
    docs = template({"networkPolicy": {"enabled": True}})
    policy = one(docs, "NetworkPolicy")
    assert policy["metadata"]["namespace"] == "dpo-system"
    # Exactly the operator's pods: the Deployment's, not the CRD upgrade hook's (which
    # carries the same selector labels).
    selector = policy["spec"]["podSelector"]["matchLabels"]
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    hook_labels = one(docs, "Job")["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= pod_labels.items()
    assert not selector.items() <= hook_labels.items()
    assert "matchExpressions" not in policy["spec"]["podSelector"]
    # Ingress only: the operator's own connections (the API server) stay as they are.
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    # Metrics from the monitoring namespace; health from no pod (the kubelet, on the
    # node, is not subject to the policy).
    assert ingress_by_port(policy) == {8080: [MONITORING]}


def test_network_policy_ports_and_peers_come_from_the_values() -> None:
    scraper = {
        "namespaceSelector": {"matchLabels": {"team": "observability"}},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
    }
    checker = {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}
    values = {
        "metrics": {"port": 9443},
        "health": {"port": 9444},
        "networkPolicy": {
            "enabled": True,
            "metrics": {"from": [scraper]},
            "health": {"from": [checker, MONITORING]},
        },
    }
    docs = template(values)
    assert ingress_by_port(one(docs, "NetworkPolicy")) == {
        9443: [scraper],
        9444: [checker, MONITORING],
    }
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "metrics": 9443,
        "health": 9444,
    }
    # An empty list admits no pod on that port (never `from: []`, which admits all).
    closed = {"networkPolicy": {"enabled": True, "metrics": {"from": []}}}
    assert one(template(closed), "NetworkPolicy")["spec"]["ingress"] == []
    only_health = {
        "networkPolicy": {"enabled": True, "metrics": {"from": []}, "health": {"from": [checker]}}
    }
    assert ingress_by_port(one(template(only_health), "NetworkPolicy")) == {8081: [checker]}


async def test_the_api_server_accepts_the_network_policy(
    control_plane: ControlPlane, client: Client, namespace: str
) -> None:
    """Rendered into a test namespace and applied for real: networking/v1 validation."""
    values = {
        "networkPolicy": {
            "enabled": True,
            "health": {"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]},
        }
    }
    policy = one(template(values, namespace=namespace), "NetworkPolicy")
    control_plane.apply(policy)
    stored = await client.get(NETWORK_POLICIES, policy["metadata"]["name"], namespace)
    assert stored["spec"]["podSelector"] == policy["spec"]["podSelector"]
    assert stored["spec"]["policyTypes"] == ["Ingress"]
    assert stored["spec"]["ingress"] == policy["spec"]["ingress"]
    closed = {"networkPolicy": {"enabled": True, "metrics": {"from": []}}}
    policy = one(template(closed, namespace=namespace), "NetworkPolicy")
    control_plane.apply(policy)
    stored = await client.get(NETWORK_POLICIES, policy["metadata"]["name"], namespace)
    assert stored["spec"]["policyTypes"] == ["Ingress"]
    assert not stored["spec"].get("ingress")


def test_leader_election_off_drops_the_lease_role() -> None:
    docs = template({"leaderElection": {"enabled": False}, "replicaCount": 1})
    assert not [d for d in docs if "leader-election" in d["metadata"]["name"]]
    assert rendered_configuration(docs).leader_election.enabled is False


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"namespaceRestriction": {"enabled": True}},
            "namespaceRestriction.targetNamespace is required",
        ),
        ({"leaderElection": {"enabled": False}}, "several replicas would write at once"),
        ({"multiCluster": {"mcsImplemention": "mcs"}}, "mcsImplemention"),
        ({"multiCluster": {"mcsImplementation": "istio"}}, "mcsImplementation"),
        ({"serviceAccount": {"create": False}}, "serviceAccount.name is required"),
        ({"clientConnection": {"qps": -1}}, "/clientConnection/qps"),
        (
            {"podDisruptionBudget": {"enabled": True, "minAvailable": 2}},
            "podDisruptionBudget.minAvailable=2 with replicaCount=2",
        ),
        (
            {"podDisruptionBudget": {"enabled": True, "maxUnavailable": 0}},
            "podDisruptionBudget.maxUnavailable=0",
        ),
        ({"podDisruptionBudget": {"minAvailable": "half"}}, "/podDisruptionBudget/minAvailable"),
        ({"networkPolicy": {"metrics": {"from": "monitoring"}}}, "/networkPolicy/metrics/from"),
        ({"networkPolicy": {"health": {"from": [{}]}}}, "/networkPolicy/health/from/0"),
        (
            {"networkPolicy": {"metrics": {"from": [{"namespaceSelector": {}, "ports": [80]}]}}},
            "/networkPolicy/metrics/from/0",
        ),
    ],
    ids=[
        "restricted-without-target",
        "replicas-without-leader",
        "typo",
        "unknown-mcs",
        "no-sa",
        "negative-qps",
        "pdb-blocks-every-eviction",
        "pdb-max-unavailable-zero",
        "pdb-not-a-count",
        "network-peers-not-a-list",
        "network-peer-empty",
        "network-peer-unknown-field",
    ],
)
def test_bad_values_are_refused(values: dict[str, Any], message: str) -> None:
    assert message in template_error(values)


# ====================================================================== the chart's identity
@pytest.fixture
def release(control_plane: ControlPlane) -> Iterator[Release]:
    with new_release(control_plane, "e2e") as rel:
        yield rel


async def forbidden(call: Awaitable[Any]) -> bool:
    try:
        await call
    except errors.Forbidden:
        return True
    return False


@MODES
async def test_the_charts_service_account_can_run_the_operator_and_nothing_more(
    control_plane: ControlPlane, client: Client, namespace: str, release: Release, restricted: bool
) -> None:
    cp = control_plane
    values: dict[str, Any] = {"multiCluster": {"mcsImplementation": "mcs"}}
    if restricted:
        values |= restricted_values(namespace)
    installed = install_as_service_account(cp, release, values)
    assert any(d["kind"] == "CustomResourceDefinition" for d in installed.docs)
    user, kubeconfig = installed.user, installed.kubeconfig

    cfg = installed.configuration()
    lease_ns = namespace if restricted else release.namespace
    assert cfg.leader_election.enabled
    assert cfg.leader_election.namespace == lease_ns
    assert cfg.namespace.restricted == (namespace if restricted else "")

    since = cp.audit.offset()
    what = "the pool published and exported"
    async with exporting(cp, installed, cfg, client, namespace, what) as (run, cluster, status):
        published = next(c for c in status["conditions"] if c["type"] == "Published")
        assert (published["status"], published["reason"]) == ("True", "Published")
        assert status["clusterId"] == cluster
        exports = {
            e["metadata"]["name"] for e in (await client.list(SERVICEEXPORTS, namespace)).items
        }
        assert exports == {RELAY_SVC, FRONTEND_SVC}
        await client.get(DEPLOYMENTS, RELAY_SVC, namespace)
        await client.get(SERVICES, RELAY_SVC, namespace)

        # `status` reads as the same identity: what a platform team would see.
        out = io.StringIO()
        code = await status_command.run(kubeconfig=str(kubeconfig), namespace=namespace, out=out)
        assert code == 0
        row = out.getvalue().splitlines()[1].split()
        # This control plane runs no Deployment controller: the relay pods never run,
        # so Ready stays False (RelayAvailable); the decision and exports are shown.
        assert row[:2] + row[-2:] == [namespace, POOL, "2/2", "exported"], out.getvalue()
        assert "  RelayAvailable False Progressing: " in out.getvalue()

        lease = await client.get(LEASES, cfg.leader_election.name, lease_ns)
        assert lease["spec"]["holderIdentity"], "the operator should hold the Lease"

        await _refused_what_it_must_not_do(kubeconfig, namespace, release, restricted)

        # Every write the operator made was as the chart's ServiceAccount, and allowed.
        async def events_written() -> bool:
            writes = cp.audit.writes(since, user=user)
            return any(w.resource == "events" and w.code < 300 for w in writes)

        await run.until(events_written, "an Event written by the ServiceAccount")
        writes = cp.audit.writes(since, user=user)
        written = {(w.resource, w.subresource, w.verb) for w in writes if w.code < 300}
        for want in [
            ("leases", "", "create"),
            ("deployments", "", "create"),
            ("services", "", "create"),
            ("serviceexports", "", "create"),
            ("dynamopoolrelays", "status", "patch"),
            ("events", "", "create"),
        ]:
            assert want in written, f"{want} not written by {user}; wrote {sorted(written)}"
        # An unreadable ClusterProperty (its reader role missing) does not stop
        # exports; the operator reports it as an ExportFailed event, which must not be
        # there.
        events = (await client.list(EVENTS, namespace)).items
        failed = [e.get("note") for e in events if e.get("reason") == "ExportFailed"]
        assert not failed, f"the operator reported export failures: {failed}"
        operator_denied = [
            (w.verb, w.resource, w.namespace, w.name, w.code)
            for w in writes
            if w.code == 403 and w.user_agent.startswith("dynamo-pool-operator/")
        ]
        assert not operator_denied, f"the operator was denied writes: {operator_denied}"


async def _refused_what_it_must_not_do(
    kubeconfig: Any, namespace: str, release: Release, restricted: bool
) -> None:
    """The chart's identity is refused (403) what the operator must never do."""
    async with Client(load_kubeconfig(kubeconfig), user_agent="chart-e2e-probe") as sa:
        # It can read what it needs, cluster-wide where it is cluster-scoped...
        await sa.list(CLUSTER_PROPERTIES)
        await sa.list(RELAYS, namespace)
        # ... but no Secrets, anywhere.
        assert await forbidden(sa.list(SECRETS, namespace))
        assert await forbidden(sa.get(SECRETS, "anything", release.namespace))
        assert await forbidden(sa.list(SECRETS))
        # DynamoGraphDeployments are Dynamo's: read, never written.
        assert await forbidden(sa.create(DGDS, dgd("intruder", namespace)))
        patch = {"metadata": {"labels": {"touched": "yes"}}}
        assert await forbidden(sa.merge_patch(DGDS, POOL, patch, namespace))
        assert await forbidden(sa.delete(DGDS, POOL, namespace))
        # A relay's spec is the user's; only its status is the operator's.
        assert await forbidden(sa.merge_patch(RELAYS, POOL, {"spec": {"replicas": 5}}, namespace))
        assert await forbidden(sa.delete(RELAYS, POOL, namespace))
        # No way to widen its own permissions.
        role = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"{release.name}-escalate"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
        }
        assert await forbidden(sa.create(CLUSTER_ROLES, role))
        if restricted:
            # Nothing outside its namespace, not even reading relays.
            assert await forbidden(sa.list(RELAYS))
            assert await forbidden(sa.list(DEPLOYMENTS, release.namespace))
            svc = {"metadata": {"name": "x-pool-relay"}, "spec": {"ports": [{"port": 80}]}}
            assert await forbidden(sa.create(SERVICES, svc, release.namespace))
        else:
            # Leases only in the Lease's namespace.
            lease = {"metadata": {"name": "foreign"}, "spec": {}}
            assert await forbidden(sa.create(LEASES, lease, namespace))


def test_rendered_manifests_are_yaml_kubectl_accepts() -> None:
    """Every document has apiVersion, kind and a DNS-1123 name (a cheap kubectl-side check
    that catches template slips such as an empty name)."""
    name = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    every_option = {
        "podDisruptionBudget": {"enabled": True},
        "networkPolicy": {"enabled": True},
        "metrics": {"serviceMonitor": {"enabled": True}},
    }
    for values in ({}, restricted_values("team-a"), every_option):
        for doc in template(values, include_crds=True):
            assert doc.get("apiVersion"), yaml.safe_dump(doc)
            assert doc.get("kind"), yaml.safe_dump(doc)
            assert name.match(doc["metadata"]["name"]), doc["metadata"]["name"]
