"""Label and annotation keys the operator writes or reads, in one place."""

from __future__ import annotations

#: On every object a pool's relay owns (Deployment, Service, ServiceExports).
DGD_NAME = "nvidia.com/dynamo-graph-deployment-name"

APP_NAME = "app.kubernetes.io/name"
APP_INSTANCE = "app.kubernetes.io/instance"
APP_COMPONENT = "app.kubernetes.io/component"
APP_MANAGED_BY = "app.kubernetes.io/managed-by"

RELAY_APP = "dynamo-pool-relay"
#: `app.kubernetes.io/component` of the relay Deployment and Service.
RELAY_COMPONENT = "pool-relay"
MANAGED_BY = "dynamo-pool-operator"
#: The server-side apply field manager of every write the operator makes.
FIELD_MANAGER = "dynamo-pool-operator"

#: Hash of the rendered desired state, so a change of our intent (including a
#: removed field) is applied even when the live object still looks like a superset.
RENDER_HASH = "nvidia.com/pool-relay-render-hash"

#: Pod labels the operator sets to select the relay pods; a relay may not override them.
RESERVED_POD_LABELS = frozenset({APP_NAME, APP_INSTANCE, DGD_NAME})
#: Label domains no relay pod may carry a key in (the domain and its subdomains): our own,
#: where Dynamo's Services select their pods, and Kubernetes' own. `app.kubernetes.io`,
#: the recommended labels, stays open but for the selector's keys above.
RESERVED_POD_LABEL_DOMAINS = ("nvidia.com", "kubernetes.io", "k8s.io")
OPEN_POD_LABEL_DOMAINS = frozenset({"app.kubernetes.io"})


def reserved_domain(key: str) -> str | None:
    """The reserved domain the label `key` is in (`RESERVED_POD_LABEL_DOMAINS`), or None."""
    prefix, slash, _ = key.rpartition("/")
    if not slash or prefix in OPEN_POD_LABEL_DOMAINS:
        return None
    for domain in RESERVED_POD_LABEL_DOMAINS:
        if prefix == domain or prefix.endswith("." + domain):
            return domain
    return None


def selector(dgd: str) -> dict[str, str]:
    """The relay pods' selector: stable for the life of the Deployment (immutable)."""
    return {APP_NAME: RELAY_APP, APP_INSTANCE: dgd}


def owned_object_labels(dgd: str) -> dict[str, str]:
    """Labels on the relay Deployment and Service."""
    return {
        **selector(dgd),
        APP_COMPONENT: RELAY_COMPONENT,
        APP_MANAGED_BY: MANAGED_BY,
        DGD_NAME: dgd,
    }
