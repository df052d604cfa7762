"""The bodies of the relay's own objects, rendered from the relay and its pool. Pure.

Apply configurations: only the fields we own (`spec.replicas` too: the relay spec is its
one source), each with its render hash (`names.RENDER_HASH`). The pods' environment
mirrors what Dynamo's operator injects into component pods, plus `DYN_CLUSTER_ID` and
`DYN_POOL_RELAY_PORT`.
"""

from __future__ import annotations

import copy
from typing import Any

from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.dgd import KUBERNETES_DISCOVERY, Pool
from dynamo_pool_operator.api.relay import HEADLESS_CLUSTER_IP, Relay
from dynamo_pool_operator.runtime.objects import with_hash

CONTAINER = "relay"
PORT_NAME = "relay"

#: Maps of Kubernetes quantities, compared by value (`1000m` is `1`, `1024Mi` is `1Gi`).
QUANTITY_PATHS = frozenset(
    {
        "spec.template.spec.containers.resources.limits",
        "spec.template.spec.containers.resources.requests",
    }
)


def _metadata(relay: Relay) -> dict[str, Any]:
    return {
        "name": relay.object_name,
        "namespace": relay.namespace,
        "labels": names.owned_object_labels(relay.name),
        "ownerReferences": [relay.owner_reference()],
    }


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


def _env(relay: Relay, pool: Pool, cluster_id: str) -> list[dict[str, Any]]:
    return [
        {"name": "DYN_NAMESPACE", "value": pool.dynamo_namespace},
        {"name": "DYN_DISCOVERY_BACKEND", "value": KUBERNETES_DISCOVERY},
        {"name": "DYN_CLUSTER_ID", "value": cluster_id},
        {"name": "DYN_PARENT_DGD_K8S_NAME", "value": pool.name},
        {"name": "DYN_PARENT_DGD_K8S_NAMESPACE", "value": pool.namespace},
        {"name": "DYN_POOL_RELAY_PORT", "value": str(relay.port)},
        _field_env("POD_NAME", "metadata.name"),
        _field_env("POD_NAMESPACE", "metadata.namespace"),
        _field_env("POD_UID", "metadata.uid"),
    ]


def _probe(period: int) -> dict[str, Any]:
    return {"tcpSocket": {"port": PORT_NAME}, "periodSeconds": period}


def deployment(relay: Relay, pool: Pool, cluster_id: str | None = None) -> dict[str, Any]:
    """The relay Deployment (apps/v1), with its render hash annotation. `cluster_id` is
    the effective cluster ID (`relay.cluster_id` when not given)."""
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": relay.image,
        "imagePullPolicy": relay.image_pull_policy,
        "ports": [{"name": PORT_NAME, "containerPort": relay.port, "protocol": "TCP"}],
        "env": _env(relay, pool, relay.cluster_id if cluster_id is None else cluster_id),
        "readinessProbe": _probe(5),
        "livenessProbe": _probe(10),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    if relay.resources:
        container["resources"] = copy.deepcopy(dict(relay.resources))
    pod_spec: dict[str, Any] = {
        "serviceAccountName": relay.service_account_name
        or names.discovery_service_account(pool.name),
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
    }
    if relay.node_selector:
        pod_spec["nodeSelector"] = dict(relay.node_selector)
    if relay.tolerations:
        pod_spec["tolerations"] = [copy.deepcopy(dict(t)) for t in relay.tolerations]
    template_meta: dict[str, Any] = {
        "labels": {**relay.pod_labels, **names.selector(relay.name), names.DGD_NAME: pool.name}
    }
    if relay.pod_annotations:
        template_meta["annotations"] = dict(relay.pod_annotations)
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(relay),
        "spec": {
            "replicas": relay.replicas,
            "selector": {"matchLabels": names.selector(relay.name)},
            "template": {"metadata": template_meta, "spec": pod_spec},
        },
    }
    return with_hash(obj, names.RENDER_HASH)


def service(relay: Relay) -> dict[str, Any]:
    """The relay Service: the name the pool is exported under. Headless unless the relay
    says otherwise: an MCS implementation imports a headless Service as its Ready pod IPs,
    one per relay, and a ClusterIP Service as its one ClusterIP."""
    spec: dict[str, Any] = {
        "selector": names.selector(relay.name),
        "ports": [
            {"name": PORT_NAME, "port": relay.port, "targetPort": PORT_NAME, "protocol": "TCP"}
        ],
    }
    if relay.headless:
        spec["clusterIP"] = HEADLESS_CLUSTER_IP
    obj = {"apiVersion": "v1", "kind": "Service", "metadata": _metadata(relay), "spec": spec}
    return with_hash(obj, names.RENDER_HASH)


def pod_disruption_budget(relay: Relay) -> dict[str, Any]:
    """The relay's PodDisruptionBudget: a drain leaves at least one relay pod running."""
    spec = {"minAvailable": 1, "selector": {"matchLabels": names.selector(relay.name)}}
    obj = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(relay),
        "spec": spec,
    }
    return with_hash(obj, names.RENDER_HASH)
