"""The operator's RBAC: the one place its permissions are written down.

Why in code: the operator's needs change with its code (a new watch, a new write), and
a ClusterRole kept by hand in three places (deploy/, the Helm chart, docs) drifts. Here
the rules are data; `dynamo-pool-operator manifests rbac` renders them, and
tools/generate_manifests.py writes deploy/rbac/ and the chart's `files/rbac-rules.yaml`
(which the chart's templates render), and a test fails when any of those copies drift.

Why these roles:
- the manager rules are everything the reconcilers read and write. They are namespaced
  resources only, so the same rules serve as a ClusterRole (cluster-wide) or as a Role
  in the one namespace the operator is restricted to;
- leader election needs one Lease in one namespace, by name, and nothing else there
  (only its first `create` cannot be limited to the name);
- the About API's ClusterProperty `cluster.clusterset.k8s.io` is cluster-scoped, so a
  Role cannot grant reading it. It always gets its own read-only ClusterRole, which keeps
  a namespace-restricted install restricted in everything else;
- secure metrics (`server.metricsSecure`) ask the API server who a scraper is
  (TokenReview) and whether it may `get /metrics` (SubjectAccessReview), as kubebuilder's
  metrics filters do. Both reviews are cluster-scoped creates, so they get a ClusterRole
  of their own too. Beside it, an unbound ClusterRole a Prometheus is bound to: `get` on
  the non-resource URL /metrics.

The Helm chart's CRD upgrade hook runs as its own ServiceAccount with only
`CRD_UPGRADE_RULES` (our CRD, by name where Kubernetes allows it); the operator itself
never writes a CRD.

For the people who write relays, two ClusterRoles bound to nobody, after kubebuilder's
editor and viewer roles: `dynamopoolrelay-editor` (everything with relays) aggregated to
Kubernetes' `admin` and `edit` roles, `dynamopoolrelay-viewer` (reading them) to `view`.
So whoever holds `edit` in a namespace may write relays there, as she may write
Deployments; a relay's pod fields still need `create deployments` there (the admission
policy, admission.py).

What is deliberately absent: any write to DynamoGraphDeployments (they belong to
Dynamo's operator; we only read them), Secrets, Pods, and RBAC objects.

Whether an identity holds these rules is asked here too (`needs`, `lacking`), once for
both who ask it: `run` at its start (a missing rule exits at once, naming it, rather than
retrying Forbidden lists until the caches' sync times out) and `check`'s rbac check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dynamo_pool_operator.api import crd
from dynamo_pool_operator.api import dgd as dgd_api
from dynamo_pool_operator.api.mcs import ABOUT_GROUP, CLUSTERPROPERTIES, MCS_GROUP, SERVICEEXPORTS
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.pool.relay.kinds import RELAY_KINDS
from dynamo_pool_operator.runtime import Client, errors
from dynamo_pool_operator.runtime.objects import Resource

RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"

#: Stable object names: upgrades replace these objects instead of leaving old ones behind.
MANAGER_NAME = "dynamo-pool-operator"
LEADER_ELECTION_NAME = "dynamo-pool-operator-leader-election"
CLUSTER_PROPERTY_READER_NAME = "dynamo-pool-operator-clusterproperty-reader"
METRICS_AUTH_NAME = "dynamo-pool-operator-metrics-auth"
METRICS_READER_NAME = "dynamo-pool-operator-metrics-reader"
RELAY_EDITOR_NAME = "dynamo-pool-operator-dynamopoolrelay-editor"
RELAY_VIEWER_NAME = "dynamo-pool-operator-dynamopoolrelay-viewer"

#: The labels that aggregate a ClusterRole into Kubernetes' user-facing roles.
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-{}"
RELAY_EDITOR_AGGREGATES_TO = ("admin", "edit")
RELAY_VIEWER_AGGREGATES_TO = ("view",)

DEFAULT_NAMESPACE = "dynamo-pool-operator"
DEFAULT_SERVICE_ACCOUNT = "dynamo-pool-operator"

_LABELS = {
    "app.kubernetes.io/name": "dynamo-pool-operator",
    "app.kubernetes.io/part-of": "dynamo-pool-operator",
}

_READ = ("get", "list", "watch")
_OWN = ("get", "list", "watch", "create", "patch", "delete")


@dataclass(frozen=True, slots=True)
class Rule:
    """One PolicyRule. Each rule names one API group: that keeps rules easy to compare and
    review, and is how the chart's copy is checked against this one."""

    api_group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    #: Why the operator needs it; shown in reviews, not rendered.
    why: str = ""
    #: Only these objects (empty: any). Kubernetes cannot restrict `create` by name.
    resource_names: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "apiGroups": [self.api_group],
            "resources": list(self.resources),
        }
        if self.resource_names:
            out["resourceNames"] = list(self.resource_names)
        out["verbs"] = list(self.verbs)
        return out


@dataclass(frozen=True, slots=True)
class UrlRule:
    """A PolicyRule on non-resource URLs (paths served outside the API's resources)."""

    urls: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"nonResourceURLs": list(self.urls), "verbs": list(self.verbs)}


MANAGER_RULES: tuple[Rule, ...] = (
    Rule(crd.GROUP, (crd.PLURAL,), _READ, "the primary resource: read, never written"),
    Rule(
        crd.GROUP,
        (f"{crd.PLURAL}/status",),
        ("patch",),
        "status is written only by server-side apply (a PATCH) on the status subresource",
    ),
    Rule(
        crd.GROUP,
        (f"{crd.PLURAL}/finalizers",),
        ("update",),
        "OwnerReferencesPermissionEnforcement (OpenShift's default) refuses an owner "
        "reference with blockOwnerDeletion unless the writer may update the owner's "
        "finalizers; every object a relay owns carries one. No finalizer is ever set",
    ),
    Rule(
        dgd_api.GROUP,
        (dgd_api.PLURAL,),
        _READ,
        "the pool's DynamoGraphDeployment is read only: Dynamo's operator owns it",
    ),
    Rule(
        dgd_api.GROUP,
        (dgd_api.DCD_PLURAL,),
        _READ,
        "whose a frontend's Service is: Dynamo's operator controls it by the DGD's "
        "DynamoComponentDeployment (read only) off the Grove path",
    ),
    # Every kind a relay owns (pool/relay/kinds.py): one rule each.
    *(Rule(k.resource.group, (k.resource.plural,), _OWN, k.why) for k in RELAY_KINDS),
    Rule(
        MCS_GROUP,
        (SERVICEEXPORTS,),
        ("create", "delete", "get", "list", "patch", "watch"),
        "the pool's ServiceExports: created, repaired by apply, withdrawn, read from a watch",
    ),
    Rule("events.k8s.io", ("events",), ("create", "patch"), "events, folded into series"),
)

#: The Lease's name unless configured (`leaderElection.name`'s default).
DEFAULT_LEASE_NAME = "dynamo-pool-operator-leader"
#: Where the chart's copy of the rules names the Lease: its templates put the release's
#: Lease name there.
CHART_LEASE_NAME = "<lease name>"


def leader_election_rule_set(lease_name: str = DEFAULT_LEASE_NAME) -> tuple[Rule, ...]:
    """The Lease Role's rules: its one Lease by name; only `create` cannot be named."""
    return (
        Rule(
            "coordination.k8s.io",
            ("leases",),
            ("create",),
            "the leader's Lease, created once (Kubernetes cannot limit create by name)",
        ),
        Rule(
            "coordination.k8s.io",
            ("leases",),
            ("get", "update"),
            "the leader's Lease: read, and renewed by update; no other Lease",
            resource_names=(lease_name,),
        ),
    )


CLUSTER_PROPERTY_RULES: tuple[Rule, ...] = (
    Rule(
        ABOUT_GROUP,
        (CLUSTERPROPERTIES,),
        _READ,
        "the cluster ID (cluster.clusterset.k8s.io), checked against each relay's clusterId",
    ),
)


METRICS_AUTH_RULES: tuple[Rule, ...] = (
    Rule(
        "authentication.k8s.io",
        ("tokenreviews",),
        ("create",),
        "secure metrics: who is the scraper behind this bearer token",
    ),
    Rule(
        "authorization.k8s.io",
        ("subjectaccessreviews",),
        ("create",),
        "secure metrics: may that user `get` the non-resource URL /metrics",
    ),
)

#: For whoever scrapes the secure /metrics (bind it to your Prometheus' ServiceAccount).
METRICS_READER_RULES: tuple[UrlRule, ...] = (
    UrlRule(("/metrics",), ("get",), "scrape the operator's secure /metrics"),
)

#: The chart's CRD upgrade hook (`manifests crds --apply`, crd_install.py): a forced
#: server-side apply of our CRD, which creates it when missing (and then needs `create`),
#: and reading it until it is Established. All by name.
CRD_UPGRADE_RULES: tuple[Rule, ...] = (
    Rule(
        "apiextensions.k8s.io",
        ("customresourcedefinitions",),
        ("get", "create", "patch"),
        "apply our CRD (a PATCH; one that creates it needs create), read it until Established",
        resource_names=(f"{crd.PLURAL}.{crd.GROUP}",),
    ),
)


#: For relay authors (aggregated to `admin` and `edit`): everything with relays; their
#: status is the operator's, so only read.
RELAY_EDITOR_RULES: tuple[Rule, ...] = (
    Rule(
        crd.GROUP,
        (crd.PLURAL,),
        ("create", "delete", "get", "list", "patch", "update", "watch"),
        "write the relays of a namespace (pod fields need create deployments too)",
    ),
    Rule(crd.GROUP, (f"{crd.PLURAL}/status",), ("get",), "read a relay's status"),
)

#: For readers (aggregated to `view`).
RELAY_VIEWER_RULES: tuple[Rule, ...] = (
    Rule(crd.GROUP, (crd.PLURAL,), _READ, "read the relays of a namespace"),
    Rule(crd.GROUP, (f"{crd.PLURAL}/status",), ("get",), "read a relay's status"),
)


# ---------------------------------------------------------------- held or not
#: What each set of rules is for, as a missing one is named; and whether the operator
#: runs without it (degraded, and saying so: a relay's `ClusterPropertyUnreadable`, a
#: scrape answered 500) or cannot do its work at all.
MANAGER, LEADER_ELECTION, CLUSTER_ID, SECURE_METRICS = (
    "manager",
    "leader election",
    "cluster ID",
    "secure metrics",
)
OPTIONAL = frozenset({CLUSTER_ID, SECURE_METRICS})

SELF_SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False
)
SELF_SUBJECT_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False
)


@dataclass(frozen=True, slots=True)
class Need:
    """One verb on one resource the operator needs, where (`namespace` "" is
    cluster-wide), and what for (`what`, one of MANAGER ... SECURE_METRICS)."""

    what: str
    rule: Rule
    verb: str
    resource: str
    namespace: str

    @property
    def optional(self) -> bool:
        return self.what in OPTIONAL

    @property
    def api_resource(self) -> str:
        """`plural.group/subresource`, as kubectl names it."""
        plural, _, sub = self.resource.partition("/")
        group = self.rule.api_group
        return f"{plural}{'.' + group if group else ''}{'/' + sub if sub else ''}"


def needs(config: OperatorConfiguration, lease_namespace: str | None) -> list[Need]:
    """Every permission the operator runs with under `config`, its Lease in
    `lease_namespace` (None: not known, the Lease's rules are not asked)."""
    scope = config.namespace.restricted or ""
    sets: list[tuple[str, Iterable[Rule], str]] = [(MANAGER, MANAGER_RULES, scope)]
    le = config.leader_election
    if le.enabled and lease_namespace is not None:
        sets.append((LEADER_ELECTION, leader_election_rule_set(le.name), lease_namespace))
    if config.multi_cluster.mcs_implementation == "mcs":
        sets.append((CLUSTER_ID, CLUSTER_PROPERTY_RULES, ""))
    if config.server.metrics_secure and config.server.metrics_address != "0":
        sets.append((SECURE_METRICS, METRICS_AUTH_RULES, ""))
    return [
        Need(what, rule, verb, resource, ns)
        for what, rules, ns in sets
        for rule in rules
        for resource in rule.resources
        for verb in rule.verbs
    ]


async def allowed(client: Client, need: Need) -> bool:
    """Whether `client`'s identity holds `need`: a SelfSubjectAccessReview, which every
    authenticated user may create (Kubernetes' `system:basic-user`)."""
    plural, _, sub = need.resource.partition("/")
    attrs = {
        "verb": need.verb,
        "group": need.rule.api_group,
        "resource": plural,
        "namespace": need.namespace,
    }
    if sub:
        attrs["subresource"] = sub
    if need.rule.resource_names:  # a rule for named objects answers only for those names
        attrs["name"] = need.rule.resource_names[0]
    body = {
        "apiVersion": SELF_SUBJECT_ACCESS_REVIEWS.api_version,
        "kind": SELF_SUBJECT_ACCESS_REVIEWS.kind,
        "spec": {"resourceAttributes": attrs},
    }
    review = await client.create(SELF_SUBJECT_ACCESS_REVIEWS, body)
    return bool((review.get("status") or {}).get("allowed"))


async def lacking(client: Client, wanted: Sequence[Need], concurrency: int = 8) -> list[Need]:
    """The needs `client`'s identity does not hold, in `wanted`'s order. An API error
    (a refused review: `check --as` without `impersonate`) is raised."""
    gate = asyncio.Semaphore(concurrency)

    async def ask(need: Need) -> bool:
        async with gate:
            return await allowed(client, need)

    # Every review answered before returning, even when one fails: none may outlive the
    # caller's client (it would open a new connection pool that nobody closes).
    answers = await asyncio.gather(*(ask(n) for n in wanted), return_exceptions=True)
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
    return [n for n, ok in zip(wanted, answers, strict=True) if not ok]


def grouped(missing: Iterable[Need]) -> list[str]:
    """One line per resource (and the object a rule names), place and purpose, its verbs
    together: `deployments.apps in team-a: get, list, watch (manager)`."""
    verbs: dict[tuple[str, str, str, str], list[str]] = {}
    for n in missing:
        named = n.rule.resource_names[0] if n.rule.resource_names else ""
        verbs.setdefault((n.api_resource, named, n.namespace, n.what), []).append(n.verb)
    lines = []
    for (resource, named, ns, what), vs in verbs.items():
        obj = f"{resource} {named}" if named else resource
        where = f"in {ns}" if ns else "cluster-wide"
        lines.append(f"{obj} {where}: {', '.join(vs)} ({what})")
    return lines


async def username(client: Client) -> str:
    """Who `client` authenticates as (a SelfSubjectReview), "" when the server does not
    say (before Kubernetes 1.28, or refused)."""
    try:
        review = await client.create(
            SELF_SUBJECT_REVIEWS,
            {"apiVersion": SELF_SUBJECT_REVIEWS.api_version, "kind": SELF_SUBJECT_REVIEWS.kind},
        )
        name = review["status"]["userInfo"].get("username")
    except (errors.ApiError, KeyError, TypeError, AttributeError):
        return ""
    return name if isinstance(name, str) else ""


def manager_rules() -> list[dict[str, Any]]:
    """Rules of the manager ClusterRole (or of its Role when namespace-restricted)."""
    return [r.to_dict() for r in MANAGER_RULES]


def leader_election_rules(lease_name: str = DEFAULT_LEASE_NAME) -> list[dict[str, Any]]:
    """Rules of the Role in the Lease's namespace."""
    return [r.to_dict() for r in leader_election_rule_set(lease_name)]


def cluster_property_rules() -> list[dict[str, Any]]:
    """Rules of the separate ClusterRole that reads ClusterProperties."""
    return [r.to_dict() for r in CLUSTER_PROPERTY_RULES]


def metrics_auth_rules() -> list[dict[str, Any]]:
    """Rules of the ClusterRole that lets the operator review scrapers' tokens."""
    return [r.to_dict() for r in METRICS_AUTH_RULES]


def metrics_reader_rules() -> list[dict[str, Any]]:
    """Rules of the (unbound) ClusterRole a Prometheus needs to scrape secure metrics."""
    return [r.to_dict() for r in METRICS_READER_RULES]


def crd_upgrade_rules() -> list[dict[str, Any]]:
    """Rules of the chart's CRD upgrade hook."""
    return [r.to_dict() for r in CRD_UPGRADE_RULES]


def relay_editor_rules() -> list[dict[str, Any]]:
    """Rules of the relay editor ClusterRole (aggregated to `admin` and `edit`)."""
    return [r.to_dict() for r in RELAY_EDITOR_RULES]


def relay_viewer_rules() -> list[dict[str, Any]]:
    """Rules of the relay viewer ClusterRole (aggregated to `view`)."""
    return [r.to_dict() for r in RELAY_VIEWER_RULES]


def aggregation_labels(roles: tuple[str, ...]) -> dict[str, str]:
    """The labels that aggregate a ClusterRole into each of Kubernetes' `roles`."""
    return {AGGREGATE_TO.format(role): "true" for role in roles}


def _meta(name: str, namespace: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(_LABELS)
    return meta


def _role(
    kind: str, name: str, namespace: str | None, rules: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": kind,
        "metadata": _meta(name, namespace),
        "rules": rules,
    }


def _binding(
    kind: str,
    role_kind: str,
    name: str,
    namespace: str | None,
    subject_namespace: str,
    service_account: str,
) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": kind,
        "metadata": _meta(name, namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": [
            {"kind": "ServiceAccount", "name": service_account, "namespace": subject_namespace}
        ],
    }


def render(
    namespace: str,
    service_account: str,
    restricted_namespace: str | None,
    lease_namespace: str,
    *,
    lease_name: str = DEFAULT_LEASE_NAME,
    metrics_auth: bool = True,
) -> list[dict[str, Any]]:
    """Roles and bindings for the ServiceAccount `namespace/service_account`.

    `restricted_namespace` None: the manager rules are a ClusterRole bound cluster-wide.
    Otherwise they are a Role (and RoleBinding) in that namespace only. The Lease Role
    lives in `lease_namespace` and names the Lease `lease_name`; the ClusterProperty
    reader is always cluster-wide.
    `metrics_auth`: the secure-metrics ClusterRole (bound) and the metrics reader
    ClusterRole (for Prometheus; left unbound).
    """
    out: list[dict[str, Any]] = []
    if restricted_namespace is None:
        out.append(_role("ClusterRole", MANAGER_NAME, None, manager_rules()))
        out.append(
            _binding(
                "ClusterRoleBinding", "ClusterRole", MANAGER_NAME, None, namespace, service_account
            )
        )
    else:
        out.append(_role("Role", MANAGER_NAME, restricted_namespace, manager_rules()))
        out.append(
            _binding(
                "RoleBinding",
                "Role",
                MANAGER_NAME,
                restricted_namespace,
                namespace,
                service_account,
            )
        )
    out.append(
        _role("Role", LEADER_ELECTION_NAME, lease_namespace, leader_election_rules(lease_name))
    )
    out.append(
        _binding(
            "RoleBinding", "Role", LEADER_ELECTION_NAME, lease_namespace, namespace, service_account
        )
    )
    reader = CLUSTER_PROPERTY_READER_NAME
    out.append(_role("ClusterRole", reader, None, cluster_property_rules()))
    out.append(
        _binding("ClusterRoleBinding", "ClusterRole", reader, None, namespace, service_account)
    )
    if metrics_auth:
        auth = METRICS_AUTH_NAME
        out.append(_role("ClusterRole", auth, None, metrics_auth_rules()))
        out.append(
            _binding("ClusterRoleBinding", "ClusterRole", auth, None, namespace, service_account)
        )
        out.append(_role("ClusterRole", METRICS_READER_NAME, None, metrics_reader_rules()))
    return out


def user_roles() -> list[dict[str, Any]]:
    """The relay editor and viewer ClusterRoles, bound to nobody: Kubernetes aggregates
    them into `admin`/`edit` and `view`, so whoever holds those in a namespace gets them
    there."""
    out = []
    for name, rules, roles in (
        (RELAY_EDITOR_NAME, relay_editor_rules(), RELAY_EDITOR_AGGREGATES_TO),
        (RELAY_VIEWER_NAME, relay_viewer_rules(), RELAY_VIEWER_AGGREGATES_TO),
    ):
        role = _role("ClusterRole", name, None, rules)
        role["metadata"]["labels"].update(aggregation_labels(roles))
        out.append(role)
    return out


def service_account(namespace: str, name: str) -> dict[str, Any]:
    """The ServiceAccount the bindings name, for `manifests rbac` (the chart makes its own)."""
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, namespace)}


def chart_rules() -> dict[str, list[dict[str, Any]]]:
    """The rules as the Helm chart reads them (`files/rbac-rules.yaml`): one list per role
    (and one for the CRD upgrade hook), so its templates render exactly these rules in
    either mode."""
    return {
        "manager": manager_rules(),
        "leaderElection": leader_election_rules(CHART_LEASE_NAME),
        "clusterPropertyReader": cluster_property_rules(),
        "metricsAuth": metrics_auth_rules(),
        "metricsReader": metrics_reader_rules(),
        "crdUpgrade": crd_upgrade_rules(),
        "relayEditor": relay_editor_rules(),
        "relayViewer": relay_viewer_rules(),
    }
