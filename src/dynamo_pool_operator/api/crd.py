"""The `DynamoPoolRelay` CustomResourceDefinition, built from code.

Code is the one source: `dynamo-pool-operator manifests` renders it, the Helm
chart ships a copy, and a test fails when that copy drifts.
"""

from __future__ import annotations

from typing import Any

GROUP = "nvidia.com"
VERSION = "v1alpha1"
KIND = "DynamoPoolRelay"
PLURAL = "dynamopoolrelays"
SINGULAR = "dynamopoolrelay"
SHORT_NAMES = ["dpr", "poolrelay"]

_DNS_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def _string_map(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "additionalProperties": {"type": "string"},
    }


def _condition() -> dict[str, Any]:
    """metav1.Condition, as every Kubernetes API spells it."""
    return {
        "type": "object",
        "required": ["type", "status", "lastTransitionTime", "reason", "message"],
        "properties": {
            "type": {"type": "string", "maxLength": 316},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "reason": {"type": "string", "maxLength": 1024, "minLength": 1},
            "message": {"type": "string", "maxLength": 32768},
        },
    }


def spec_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "What the pool relay should look like. The relay's name is the "
        "DynamoGraphDeployment's name; the pool is that DGD.",
        "properties": {
            "clusterId": {
                "type": "string",
                "maxLength": 63,
                "pattern": _DNS_LABEL,
                "description": "The name the multi-cluster implementation gives this cluster: "
                "the About API ClusterProperty cluster.clusterset.k8s.io with standard MCS, "
                "the member cluster name with Karmada. Passed to the relay pods.",
            },
            "replicas": {
                "type": "integer",
                "format": "int32",
                "minimum": 0,
                "description": "Relay pods (active-active); defaults to the operator's "
                "poolRelay.replicas.",
            },
            "image": {
                "type": "string",
                "minLength": 1,
                "description": "Relay image; defaults to the operator's poolRelay.image.",
            },
            "port": {
                "type": "integer",
                "format": "int32",
                "minimum": 1,
                "maximum": 65535,
                "description": "Relay port; defaults to the operator's poolRelay.port.",
            },
            "serviceAccountName": {
                "type": "string",
                "maxLength": 253,
                "description": "ServiceAccount for the relay pods; defaults to the DGD's "
                "discovery ServiceAccount <dgd>-k8s-service-discovery.",
            },
            "resources": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "description": "Compute resources of the relay container "
                "(core/v1 ResourceRequirements).",
            },
            "podLabels": _string_map("Extra labels on the relay pods."),
            "podAnnotations": _string_map("Extra annotations on the relay pods."),
            "nodeSelector": _string_map("Node selector of the relay pods."),
            "tolerations": {
                "type": "array",
                "description": "Tolerations of the relay pods (core/v1 Toleration).",
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
    }


def status_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "observedGeneration": {"type": "integer", "format": "int64"},
            "conditions": {
                "type": "array",
                "items": _condition(),
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            },
            "serviceName": {"type": "string", "description": "The relay Service."},
            "clusterId": {"type": "string", "description": "The effective cluster ID."},
            "exports": {
                "type": "array",
                "description": "One entry per Service the pool exports or skips.",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {
                    "type": "object",
                    "required": ["name", "state"],
                    "properties": {
                        "name": {"type": "string"},
                        "state": {"type": "string"},
                        "reason": {"type": "string"},
                        "message": {"type": "string"},
                    },
                },
            },
        },
    }


def printer_columns() -> list[dict[str, Any]]:
    ready = '.status.conditions[?(@.type=="Ready")]'
    return [
        {"name": "Ready", "type": "string", "jsonPath": f"{ready}.status"},
        {"name": "Reason", "type": "string", "jsonPath": f"{ready}.reason"},
        {"name": "Service", "type": "string", "jsonPath": ".status.serviceName"},
        {"name": "Cluster", "type": "string", "jsonPath": ".status.clusterId"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def crd() -> dict[str, Any]:
    """The whole CustomResourceDefinition object."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{PLURAL}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "dynamo-pool-operator"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": SHORT_NAMES,
                "categories": ["dynamo"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": printer_columns(),
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "Publishes the DynamoGraphDeployment of the same "
                            "name as a Global Router pool: runs its relay and keeps its "
                            "Multi-Cluster Services exports.",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema(),
                                "status": status_schema(),
                            },
                        }
                    },
                }
            ],
        },
    }
