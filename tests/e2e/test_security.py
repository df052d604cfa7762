"""Security: the chart's identity may do what the operator needs and nothing more, the operator
never touches a Secret, and its container never runs as root.

Permissions are checked from the API server's side, not from the manifests: the chart's
RBAC is installed on the real control plane (everything but the Deployment, as in
test_chart.py), and the chart's ServiceAccount asks the API server what it may do
(`SelfSubjectRulesReview`) in the operator's namespaces and in others. The answer is
compared with ALLOWED below, a table written from the documented behaviour (docs/crd.md,
docs/exports.md, docs/operations.md, docs/events.md) and the code paths that need each
verb, deliberately *not* imported from rbac.py: it is the second source the generated
RBAC is checked against. Anything granted beyond it fails the test, as does a
table row the chart does not grant (so the review is known to show the chart's rules).

"No Secrets": the audit policy logs every request on Secrets, reads included
(localcluster/audit.py). The operator runs as the chart's ServiceAccount until it has
published and exported a pool, and the audit log must hold no request on Secrets by
that identity; a probe then shows that such a request (even a refused one) is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from dynamo_pool_operator.localcluster import kwok
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import DEPLOYMENTS, SECRETS
from tests.e2e.chart_helpers import ROOT, one, restricted_values, template
from tests.e2e.chart_operator import (
    Release,
    exporting,
    install_as_service_account,
    new_release,
)
from tests.harness import eventually

pytestmark = pytest.mark.e2e

MODES = pytest.mark.parametrize("restricted", [False, True], ids=["cluster-wide", "restricted"])

# ====================================================================== the permission table
# (API group, resource) -> verbs, with where the rule applies:
#   MANAGED  - every namespace the operator manages (all of them cluster-wide; only the
#              target namespace when namespace-restricted: docs/operations.md,
#              'Namespace-restricted mode')
#   LEASE    - the Lease's namespace only (the release namespace cluster-wide, the target
#              namespace when restricted: the only namespace it may write in)
#   CLUSTER  - everywhere: cluster-scoped, or granted to every authenticated user
MANAGED, LEASE, CLUSTER = "managed", "lease", "cluster"
READ = frozenset({"get", "list", "watch"})
OWN = READ | {"create", "patch", "delete"}


@dataclasses.dataclass(frozen=True)
class Allowed:
    group: str
    resource: str
    verbs: frozenset[str]
    where: str
    #: Granted by Kubernetes' bootstrap policy to every authenticated user, not by the chart.
    system: bool = False


ALLOWED = [
    # The primary resource, read from watch-filled caches (docs/architecture.md,
    # 'Watches to keys').
    # Never written: a relay's spec is its user's.
    Allowed("nvidia.com", "dynamopoolrelays", READ, MANAGED),
    # docs/crd.md, 'status': observedGeneration, conditions and exports, written as a
    # server-side apply (a PATCH) of the status subresource (pool/reconciler.py).
    Allowed("nvidia.com", "dynamopoolrelays/status", frozenset({"patch"}), MANAGED),
    # OwnerReferencesPermissionEnforcement: an owner reference with blockOwnerDeletion
    # needs `update` on the owner's finalizers. The operator never sets a finalizer.
    Allowed("nvidia.com", "dynamopoolrelays/finalizers", frozenset({"update"}), MANAGED),
    # DGDs are read (from caches), never written: they belong to Dynamo's operator.
    Allowed("nvidia.com", "dynamographdeployments", READ, MANAGED),
    # docs/exports.md, 'What is exported': a frontend's Service is exported only while it
    # is the DGD's, by the DGD or by a DynamoComponentDeployment the DGD controls: DCDs
    # are read (from a cache of stubs), never written.
    Allowed("nvidia.com", "dynamocomponentdeployments", READ, MANAGED),
    # Publish = server-side apply (patch) of a Deployment `<D>-pool-relay`, created first
    # with an exclusive POST so an existing one is never adopted (create; runtime/writes/guarded.py,
    # docs/architecture.md, 'Why the writes look the way they do');
    # withdraw = delete; OwnershipConflict and the level-based reconcile read it from a cache
    # watched by our labels, or, one of the name without them, by a get after the create's
    # 409 (decision 0006).
    Allowed("apps", "deployments", OWN, MANAGED),
    # The same for the relay Service.
    Allowed("", "services", OWN, MANAGED),
    # And for the relay's PodDisruptionBudget (docs/crd.md, `replicas`: 2 or more).
    Allowed("policy", "poddisruptionbudgets", OWN, MANAGED),
    # docs/exports.md, 'RBAC': create, delete, get, list, patch, watch.
    Allowed("multicluster.x-k8s.io", "serviceexports", OWN, MANAGED),
    # docs/events.md: events.k8s.io/v1 Events on the relay; repeats form a series, which
    # is a PATCH of the series' Event (runtime/events.py). Events are never read back.
    Allowed("events.k8s.io", "events", frozenset({"create", "patch"}), MANAGED),
    # docs/operations.md, 'HA': leader election with a coordination.k8s.io Lease: read,
    # created once, renewed by update (a PUT with the resourceVersion read;
    # runtime/leader.py).
    Allowed("coordination.k8s.io", "leases", frozenset({"get", "create", "update"}), LEASE),
    # docs/exports.md, 'RBAC': ClusterProperties get, list, watch - cluster-scoped, so a
    # separate ClusterRole, also when namespace-restricted.
    Allowed("about.k8s.io", "clusterproperties", READ, CLUSTER),
    # Secure metrics (the chart's default, `metrics.secure`): the operator asks the API
    # server whose a scraper's bearer token is and whether it may `get /metrics`, as
    # kubebuilder's metrics filters do (runtime/serving/auth.py). Cluster-scoped creates.
    Allowed("authentication.k8s.io", "tokenreviews", frozenset({"create"}), CLUSTER),
    Allowed("authorization.k8s.io", "subjectaccessreviews", frozenset({"create"}), CLUSTER),
    # Kubernetes' bootstrap ClusterRole system:basic-user, bound to system:authenticated:
    # every identity may ask what it may do (this very review) and who it is.
    Allowed(
        "authorization.k8s.io", "selfsubjectaccessreviews", frozenset({"create"}), CLUSTER, True
    ),
    Allowed(
        "authorization.k8s.io", "selfsubjectrulesreviews", frozenset({"create"}), CLUSTER, True
    ),
    Allowed("authentication.k8s.io", "selfsubjectreviews", frozenset({"create"}), CLUSTER, True),
    # Bootstrap system:cluster-trust-bundle-discovery, bound to system:serviceaccounts
    # (Kubernetes >= 1.33): every ServiceAccount may read the public CA bundles.
    Allowed("certificates.k8s.io", "clustertrustbundles", READ, CLUSTER, True),
]  # fmt: skip

# Non-resource URLs: only `get` of the discovery, health and version endpoints
# (bootstrap roles system:discovery, system:public-info-viewer, and
# system:service-account-issuer-discovery for system:serviceaccounts).
ALLOWED_URLS = {
    "/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/",
    "/healthz", "/livez", "/readyz",
    "/.well-known/openid-configuration", "/.well-known/openid-configuration/",
    "/openid/v1/jwks", "/openid/v1/jwks/",
}  # fmt: skip

# What the operator must never be able to do, whatever the table says (a guard on the
# table itself: widening it to one of these fails test_the_table_grants_nothing_forbidden).
WRITE = frozenset({"create", "update", "patch", "delete", "deletecollection"})
NEVER: list[tuple[str, str, frozenset[str], str]] = [
    ("", "secrets", READ | WRITE, "Secrets are not the operator's business"),
    ("", "configmaps", WRITE, "the configuration is mounted, never written"),
    ("", "pods", READ | WRITE | {"exec"}, "the relay pods are the Deployment's"),
    ("", "pods/exec", READ | WRITE, "no exec"),
    ("", "serviceaccounts/token", WRITE, "no minting tokens for others"),
    ("", "serviceaccounts", WRITE | {"impersonate"}, "no identities"),
    ("nvidia.com", "dynamographdeployments", WRITE, "DGDs belong to Dynamo's operator"),
    ("nvidia.com", "dynamocomponentdeployments", WRITE, "DCDs belong to Dynamo's operator"),
    ("nvidia.com", "dynamopoolrelays", WRITE, "a relay's spec is its user's"),
    ("apps", "deployments", frozenset({"update", "deletecollection"}), "SSA and single deletes"),
    ("", "services", frozenset({"update", "deletecollection"}), "SSA and single deletes"),
    ("multicluster.x-k8s.io", "serviceexports", frozenset({"update", "deletecollection"}),
     "exports are applied and deleted one by one with preconditions (docs/exports.md)"),
    ("about.k8s.io", "clusterproperties", WRITE, "the cluster ID is the platform's"),
    ("coordination.k8s.io", "leases", frozenset({"delete", "deletecollection"}), "no Lease theft"),
]  # fmt: skip
NEVER_VERBS = {"*", "escalate", "bind", "impersonate", "approve", "sign"}
NEVER_GROUPS = {"*", "rbac.authorization.k8s.io", "admissionregistration.k8s.io",
                "certificates.k8s.io", "apiextensions.k8s.io"}  # fmt: skip


def allowed_in(where: set[str]) -> dict[tuple[str, str], frozenset[str]]:
    return {(a.group, a.resource): a.verbs for a in ALLOWED if a.where in where}


def test_the_table_grants_nothing_forbidden() -> None:
    table = allowed_in({MANAGED, LEASE, CLUSTER})
    for group, resource, verbs, why in NEVER:
        granted = table.get((group, resource), frozenset()) & verbs
        assert not granted, f"{group}/{resource} {sorted(granted)}: {why}"
    for a in ALLOWED:
        assert a.system or a.group not in NEVER_GROUPS, a
        assert "*" not in a.resource, a
        assert not a.verbs & NEVER_VERBS, a


# ====================================================================== asking the API server
Triple = tuple[str, str, str]


def triples(rules: list[dict[str, Any]]) -> set[Triple]:
    """(group, resource, verb) of every resource rule; resourceNames only narrow a rule."""
    return {
        (g, r, v)
        for rule in rules
        for g in rule.get("apiGroups") or [""]
        for r in rule.get("resources") or []
        for v in rule.get("verbs") or []
    }


async def rules_review(sa: Client, namespace: str) -> dict[str, Any]:
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": namespace},
    }
    path = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
    review: dict[str, Any] = await sa.request("POST", path, body=body)
    status: dict[str, Any] = review["status"]
    assert not status.get("incomplete"), f"the review is incomplete: {status}"
    return status


def check_review(status: dict[str, Any], where: set[str], namespace: str) -> None:
    granted = triples(status.get("resourceRules") or [])
    allowed = allowed_in(where)
    broader = sorted((g, r, v) for g, r, v in granted if v not in allowed.get((g, r), ()))
    assert not broader, f"granted in {namespace} beyond the permission table: {broader}"
    needed = {
        (a.group, a.resource, v) for a in ALLOWED if a.where in where and not a.system
        for v in a.verbs
    }  # fmt: skip
    missing = sorted(needed - granted)
    assert not missing, f"the chart does not grant in {namespace}: {missing}"
    for rule in status.get("nonResourceRules") or []:
        assert set(rule.get("verbs") or []) <= {"get"}, f"non-resource rule {rule}"
        urls = set(rule.get("nonResourceURLs") or [])
        assert urls <= ALLOWED_URLS, f"non-resource URLs beyond discovery: {urls - ALLOWED_URLS}"


@pytest.fixture
def release(control_plane: ControlPlane) -> Iterator[Release]:
    with new_release(control_plane, "sec") as rel:
        yield rel


@pytest.fixture
def bystander(control_plane: ControlPlane) -> Iterator[str]:
    """A namespace that is neither the release's nor the operator's target."""
    name = f"b-{uuid.uuid4().hex[:10]}"
    control_plane.create_namespace(name)
    try:
        yield name
    finally:
        control_plane.delete_namespace(name)


@MODES
async def test_the_charts_service_account_is_granted_no_more_than_the_spec_needs(
    control_plane: ControlPlane,
    namespace: str,
    bystander: str,
    release: Release,
    restricted: bool,
) -> None:
    values: dict[str, Any] = {"multiCluster": {"mcsImplementation": "mcs"}}
    if restricted:
        values |= restricted_values(namespace)
    kubeconfig = install_as_service_account(control_plane, release, values).kubeconfig
    if restricted:  # manages `namespace` only, and keeps its Lease there
        expected = {
            namespace: {MANAGED, LEASE, CLUSTER},
            release.namespace: {CLUSTER},
            bystander: {CLUSTER},
        }
    else:  # manages every namespace; the Lease is in its own
        expected = {
            release.namespace: {MANAGED, LEASE, CLUSTER},
            namespace: {MANAGED, CLUSTER},
            bystander: {MANAGED, CLUSTER},
        }
    async with Client(load_kubeconfig(kubeconfig), user_agent="security-probe/1") as sa:
        for ns, where in expected.items():
            check_review(await rules_review(sa, ns), where, ns)


async def may(sa: Client, verb: str, namespace: str, name: str) -> bool:
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "group": "coordination.k8s.io",
                "resource": "leases",
                "verb": verb,
                "namespace": namespace,
                "name": name,
            }
        },
    }
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    review: dict[str, Any] = await sa.request("POST", path, body=body)
    return bool(review["status"].get("allowed"))


async def test_the_service_account_reads_and_renews_its_own_lease_only(
    control_plane: ControlPlane, release: Release
) -> None:
    """A Lease is how replicas of another operator in the same namespace elect their
    leader: renewing (or reading) one of theirs is not ours to do."""
    installed = install_as_service_account(control_plane, release, {})
    lease = installed.configuration().leader_election.name
    async with Client(load_kubeconfig(installed.kubeconfig), user_agent="security-probe/1") as sa:
        for verb in ("get", "update"):
            assert await may(sa, verb, release.namespace, lease), f"{verb} its own Lease"
            assert not await may(sa, verb, release.namespace, "someone-elses-leader"), verb
        assert await may(sa, "create", release.namespace, lease)


# ====================================================================== no Secrets
async def test_the_operator_makes_no_request_on_secrets_while_publishing_and_exporting(
    control_plane: ControlPlane, client: Client, namespace: str, release: Release
) -> None:
    cp = control_plane
    installed = install_as_service_account(
        cp, release, {"multiCluster": {"mcsImplementation": "mcs"}}
    )
    kubeconfig, user = installed.kubeconfig, installed.user
    since = cp.audit.offset()
    cfg = installed.configuration()
    what = "the pool published and exported"
    async with exporting(cp, installed, cfg, client, namespace, what):
        pass  # the operator has done its work as this identity

    # The operator did work as this identity (so the filter below is not vacuous)...
    written = {w.resource for w in await asyncio.to_thread(cp.audit.writes, since, user=user)}
    assert {"serviceexports", "deployments", "services", "leases"} <= written, written
    # ...and made no request on Secrets: no get, list or watch, allowed or refused.
    touched = await asyncio.to_thread(cp.audit.requests, since, "secrets", user=user)
    assert not touched, [(e.verb, e.namespace, e.name, e.code, e.user_agent) for e in touched]

    # The check can fail: the same identity's refused read of a Secret is in the log.
    probe_since = cp.audit.offset()
    async with Client(load_kubeconfig(kubeconfig), user_agent="security-probe/1") as sa:
        with pytest.raises(errors.Forbidden):
            await sa.list(SECRETS, namespace)
    probed = await asyncio.to_thread(cp.audit.requests, probe_since, "secrets", user=user)
    assert [(e.verb, e.namespace, e.code, e.user_agent) for e in probed] == [
        ("list", namespace, 403, "security-probe/1")
    ]


# ====================================================================== the container
@pytest.mark.parametrize(
    "values", [{}, restricted_values("team-a")], ids=["cluster-wide", "restricted"]
)
def test_the_operator_container_never_runs_as_root(values: dict[str, Any]) -> None:
    """The effective security context (a container's settings override the pod's) names
    a non-root uid and gid, and nothing adds privileges back. test_chart.py's
    test_default_render pins the rest of the hardening (read-only root filesystem, no
    privilege escalation, capabilities drop ALL, seccomp RuntimeDefault)."""
    pod = one(template(values), "Deployment")["spec"]["template"]["spec"]
    for container in pod["containers"] + pod.get("initContainers", []):
        name = container["name"]
        sc = container.get("securityContext", {})
        effective = {**pod.get("securityContext", {}), **sc}
        assert effective.get("runAsNonRoot") is True, f"{name}: runAsNonRoot is not true"
        assert isinstance(effective.get("runAsUser"), int), f"{name}: no numeric runAsUser"
        assert effective["runAsUser"] != 0, f"{name}: runAsUser 0 is root"
        assert effective.get("runAsGroup") != 0, f"{name}: runAsGroup 0 is root"
        assert sc.get("privileged", False) is False, name
        assert not sc.get("capabilities", {}).get("add"), name
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        assert pod.get(host, False) is False, host


@MODES
async def test_the_charts_deployment_is_admitted_under_restricted_and_its_pods_run(
    node_plane: ControlPlane, restricted: bool
) -> None:
    """The whole chart, Deployment included, applied to a control plane with nodes
    (kwok) into a release namespace enforcing Pod Security `restricted`: the pods are
    admitted (a template that is not compliant is refused at pod creation, as a
    hardened cluster refuses it) and run. kwok runs no container: this proves
    admission and scheduling, not the image."""
    target = f"team-{uuid.uuid4().hex[:8]}"
    values = restricted_values(target) if restricted else {}
    with new_release(node_plane, "kwok") as rel, target_namespace(node_plane, target):
        docs = template(values, release=rel.name, namespace=rel.namespace, include_crds=True)
        for doc in docs:
            if doc["kind"] == "CustomResourceDefinition":
                node_plane.install_crd(doc)
            elif doc["kind"] != "ServiceMonitor":
                node_plane.apply(doc)
        deployment = one(docs, "Deployment")
        want = deployment["spec"].get("replicas", 1)
        selector = ",".join(
            f"{k}={v}" for k, v in deployment["spec"]["selector"]["matchLabels"].items()
        )
        async with Client(load_kubeconfig(node_plane.kubeconfig), user_agent="dpo-tests") as c:

            async def all_running() -> bool:
                return len(await kwok.running_pods(c, rel.namespace, selector)) == want

            try:
                await eventually(all_running, timeout=60)
            except AssertionError:
                got = await c.get(DEPLOYMENTS, deployment["metadata"]["name"], rel.namespace)
                pytest.fail(f"the operator's pods do not run: {got.get('status')}")


@contextlib.contextmanager
def target_namespace(cp: ControlPlane, name: str) -> Iterator[None]:
    cp.create_namespace(name)
    try:
        yield
    finally:
        cp.delete_namespace(name)


def final_user(dockerfile: str) -> str:
    """The USER in effect in the Dockerfile's last stage (the image that ships)."""
    last_stage = re.split(r"(?im)^FROM\s", dockerfile)[-1]
    users = re.findall(r"(?im)^USER\s+(\S+)\s*$", last_stage)
    assert users, "the runtime stage sets no USER: the image would run as root"
    return str(users[-1])


def test_the_image_runs_as_a_non_root_numeric_user() -> None:
    user = final_user((ROOT / "Dockerfile").read_text())
    uid, _, gid = user.partition(":")
    # Numeric, so the kubelet can enforce runAsNonRoot without the image's /etc/passwd.
    assert uid.isdigit(), f"USER {user}: not a numeric uid"
    assert int(uid) != 0, f"USER {user}: root"
    assert not gid or (gid.isdigit() and int(gid) != 0), f"USER {user}: root group"
    # The chart's pod runs as the same uid, so files the image owns stay readable.
    pod = one(template(), "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == int(uid)
