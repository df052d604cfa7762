"""The `DynamoPoolRelay` CustomResourceDefinition, built from code.

Code is the one source: `dynamo-pool-operator manifests` renders it, the Helm
chart ships a copy, and a test fails when that copy drifts.
"""

from __future__ import annotations

from typing import Any

from dynamo_pool_operator import __version__
from dynamo_pool_operator.api import names
from dynamo_pool_operator.api.conditions import ConditionType, Status
from dynamo_pool_operator.api.mcs import ExportCondition
from dynamo_pool_operator.api.podfields import QUANTITY_PATTERN, TAINT_EFFECTS, TOLERATION_OPERATORS
from dynamo_pool_operator.runtime.objects import Resource

READY, EXPORTED, PUBLISHED = ConditionType.READY, ConditionType.EXPORTED, ConditionType.PUBLISHED

GROUP = "nvidia.com"
VERSION = "v1alpha1"
#: The operator version that made the CRD: `manifests crds --apply` refuses to replace a
#: newer operator's with an older one.
VERSION_ANNOTATION = "nvidia.com/dynamo-pool-operator-version"
KIND = "DynamoPoolRelay"
PLURAL = "dynamopoolrelays"
SINGULAR = "dynamopoolrelay"
SHORT_NAMES = ["dpr", "poolrelay"]
#: The DynamoPoolRelay resource, as every reader and writer addresses it.
RELAYS = Resource(GROUP, VERSION, PLURAL, KIND)

_DNS_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def _cel(pattern: str) -> str:
    """`pattern` (`api/names.py`), anchored, as a CEL string literal."""
    return "'^" + pattern.replace("\\", "\\\\") + "$'"


def _is_key(k: str) -> str:
    """CEL: `k` is a valid label or annotation key (`names.qualified_name_errors`)."""
    return (
        f"{k}.matches({_cel(names.LABEL_KEY_PATTERN)}) && ({k}.contains('/') ? "
        f"{k}.indexOf('/') <= {names.KEY_PREFIX_MAX} && "
        f"size({k}) - {k}.indexOf('/') - 1 <= {names.DNS1035_MAX} : "
        f"size({k}) <= {names.DNS1035_MAX})"
    )


#: What a key must be, as the API server's refusal says it.
_KEY_RULE = (
    "must be a valid label key: [prefix/]name, the name 1-63 characters of alphanumerics, "
    "'-', '_' or '.', starting and ending with an alphanumeric character, the prefix a DNS "
    "subdomain (e.g. example.com)"
)
#: Keys a relay's label, annotation and node selector maps may hold, at most: bounds the
#: cost of the rules over their keys.
MAX_MAP_KEYS = 64


def _keys_valid() -> dict[str, Any]:
    return {
        "rule": f"self.all(k, {_is_key('k')})",
        # A double-quoted CEL literal: the rule's words hold single quotes.
        "messageExpression": f"'key ' + self.filter(k, !({_is_key('k')}))[0] + \" {_KEY_RULE}\"",
        "reason": "FieldValueInvalid",
    }


def _string_map(description: str, *, label_values: bool) -> dict[str, Any]:
    """A map of strings whose keys are label keys; `label_values`: so are its values
    label values (labels, a node selector), not free text (annotations)."""
    value: dict[str, Any] = {"type": "string"}
    if label_values:
        value |= {"maxLength": names.DNS1035_MAX, "pattern": f"^{names.LABEL_VALUE_PATTERN}$"}
    return {
        "type": "object",
        "description": description,
        "maxProperties": MAX_MAP_KEYS,
        "additionalProperties": value,
        "x-kubernetes-validations": [_keys_valid()],
    }


def _pod_labels() -> dict[str, Any]:
    """Extra labels on the relay pods; the keys that select pods are not theirs to set."""
    schema = _string_map("Extra labels on the relay pods.", label_values=True)
    reserved = ", ".join(f"'{k}'" for k in sorted(names.RESERVED_POD_LABELS))
    domains = "|".join(d.replace(".", "\\\\.") for d in names.RESERVED_POD_LABEL_DOMAINS)
    open_ = " || ".join(f"k.startsWith('{d}/')" for d in sorted(names.OPEN_POD_LABEL_DOMAINS))
    schema["x-kubernetes-validations"] += [
        {
            "rule": f"self.all(k, !(k in [{reserved}]))",
            "message": f"{', '.join(sorted(names.RESERVED_POD_LABELS))} are set by the "
            "operator to select the relay pods; remove them from podLabels",
            "reason": "FieldValueForbidden",
        },
        {
            "rule": f"self.all(k, {open_} || !k.matches('^([^/]*\\\\.)?({domains})/'))",
            "message": f"the label domains {', '.join(names.RESERVED_POD_LABEL_DOMAINS)} are "
            "reserved (their labels select other workloads' pods); remove such keys from "
            "podLabels",
            "reason": "FieldValueForbidden",
        },
    ]
    return schema


#: Bounds that keep the CEL rules' estimated cost within the API server's budget.
MAX_RESOURCES = 16
MAX_TOLERATIONS = 64
#: Relay pods per pool, at most: a few serve a pool, and no relay author may ask the
#: cluster for 2^31-1 pods.
MAX_REPLICAS = 100


def _quantities(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "maxProperties": MAX_RESOURCES,
        "additionalProperties": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "maxLength": 64,
            "x-kubernetes-int-or-string": True,
        },
    }


def _resources() -> dict[str, Any]:
    """core/v1 ResourceRequirements; the rules the schema cannot say (resource names,
    extended resources) are checked by the read model (api/podfields.py)."""
    return {
        "type": "object",
        "description": "Compute resources of the relay container (core/v1 ResourceRequirements).",
        "properties": {
            "limits": _quantities("Maximum compute resources, e.g. {cpu: 500m, memory: 128Mi}."),
            "requests": _quantities("Requested compute resources; each at most its limit."),
            "claims": {
                "type": "array",
                "maxItems": 16,
                "description": "Names of the pod's resource claims this container uses.",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "request": {"type": "string"},
                    },
                },
            },
        },
        "x-kubernetes-validations": [
            {
                "rule": "!has(self.requests) || !has(self.limits) || self.requests.all(k, "
                "!(k in self.limits) || quantity(string(self.requests[k]))"
                ".compareTo(quantity(string(self.limits[k]))) <= 0)",
                "message": "each request must be less than or equal to its limit",
                "fieldPath": ".requests",
                "reason": "FieldValueInvalid",
            }
        ],
    }


def _toleration() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "key": {"type": "string", "maxLength": 316},
            "operator": {"type": "string", "enum": list(TOLERATION_OPERATORS)},
            "value": {
                "type": "string",
                "maxLength": names.DNS1035_MAX,
                "pattern": f"^{names.LABEL_VALUE_PATTERN}$",
            },
            "effect": {"type": "string", "enum": ["", *TAINT_EFFECTS]},
            "tolerationSeconds": {"type": "integer", "format": "int64"},
        },
        "x-kubernetes-validations": [
            {
                "rule": f"!has(self.key) || self.key == '' || ({_is_key('self.key')})",
                "message": f"key {_KEY_RULE}",
                "fieldPath": ".key",
                "reason": "FieldValueInvalid",
            },
            {
                "rule": "!has(self.operator) || self.operator != 'Exists' || "
                "!has(self.value) || self.value == ''",
                "message": "value must be empty when operator is Exists",
                "fieldPath": ".value",
            },
            {
                "rule": "(has(self.key) && self.key != '') || "
                "(has(self.operator) && self.operator == 'Exists')",
                "message": "operator must be Exists when key is empty",
                "fieldPath": ".operator",
            },
            {
                "rule": "!has(self.tolerationSeconds) || "
                "(has(self.effect) && self.effect == 'NoExecute')",
                "message": "tolerationSeconds is only valid with effect NoExecute",
                "fieldPath": ".tolerationSeconds",
            },
        ],
    }


def _condition() -> dict[str, Any]:
    """metav1.Condition, as every Kubernetes API spells it."""
    return {
        "type": "object",
        "required": ["type", "status", "lastTransitionTime", "reason", "message"],
        "properties": {
            "type": {"type": "string", "maxLength": 316},
            "status": {"type": "string", "enum": [str(s) for s in Status]},
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
                "maximum": MAX_REPLICAS,
                "description": "Relay pods (active-active), at most "
                f"{MAX_REPLICAS}; defaults to the operator's poolRelay.replicas.",
            },
            "image": {
                "type": "string",
                "minLength": 1,
                "pattern": r"^\S+$",
                "description": "Relay image; defaults to the operator's poolRelay.image.",
            },
            "port": {
                "type": "integer",
                "format": "int32",
                "minimum": 1,
                "maximum": 65535,
                "description": "Relay port; defaults to the operator's poolRelay.port.",
            },
            "service": {
                "type": "object",
                "description": "The relay Service <dgd>-pool-relay.",
                "properties": {
                    "headless": {
                        "type": "boolean",
                        "description": "A headless Service (clusterIP: None), imported by "
                        "the MCS implementation as the relay pods' IPs; false: a ClusterIP "
                        "Service, imported as its ClusterIP. Changing it replaces the "
                        "Service. Defaults to the operator's poolRelay.headless.",
                    }
                },
            },
            "serviceAccountName": {
                "type": "string",
                "maxLength": names.KEY_PREFIX_MAX,
                # Empty is no value: the relay's default.
                "pattern": f"^({names.DNS1123_SUBDOMAIN_PATTERN})?$",
                "description": "ServiceAccount for the relay pods; defaults to the DGD's "
                "discovery ServiceAccount <dgd>-k8s-service-discovery.",
            },
            "resources": _resources(),
            "podLabels": _pod_labels(),
            "podAnnotations": _string_map(
                "Extra annotations on the relay pods.", label_values=False
            ),
            "nodeSelector": _string_map("Node selector of the relay pods.", label_values=True),
            "tolerations": {
                "type": "array",
                "maxItems": MAX_TOLERATIONS,
                "description": "Tolerations of the relay pods (core/v1 Toleration).",
                "items": _toleration(),
            },
        },
    }


def _implementation_view(type_: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": f"The export's {type_} condition as the MCS implementation wrote it.",
        "properties": {
            key: {"type": "string"} for key in ("status", "reason", "message", "lastTransitionTime")
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
            "clusterId": {
                "type": "string",
                "description": "The effective cluster ID: spec.clusterId, else (mcs with the "
                "About API) the cluster's own, cluster.clusterset.k8s.io; what the relay pods "
                "get as DYN_CLUSTER_ID.",
            },
            "relayPods": {
                "type": "string",
                "description": "Available/desired relay pods, e.g. 2/2 (see RelayAvailable).",
            },
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
                        "finalizers": {
                            "type": "array",
                            "description": "Withdrawing: the finalizers that hold the "
                            "export (someone else's; it goes once they are removed).",
                            "items": {"type": "string"},
                        },
                        **{
                            key: _implementation_view(type_)
                            for key, type_ in ((str(c).lower(), str(c)) for c in ExportCondition)
                        },
                    },
                },
            },
        },
    }


def printer_columns() -> list[dict[str, Any]]:
    def condition(type_: str) -> str:
        return f'.status.conditions[?(@.type=="{type_}")]'

    return [
        {"name": "Ready", "type": "string", "jsonPath": f"{condition(READY)}.status"},
        {"name": "Reason", "type": "string", "jsonPath": f"{condition(READY)}.reason"},
        {"name": "Available", "type": "string", "jsonPath": ".status.relayPods"},
        {"name": "Exported", "type": "string", "jsonPath": f"{condition(EXPORTED)}.status"},
        {"name": "Cluster", "type": "string", "jsonPath": ".status.clusterId"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Service", "type": "string", "jsonPath": ".status.serviceName", "priority": 1},
        {
            "name": "Published",
            "type": "string",
            "jsonPath": f"{condition(PUBLISHED)}.reason",
            "priority": 1,
        },
    ]


def crd() -> dict[str, Any]:
    """The whole CustomResourceDefinition object."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{PLURAL}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "dynamo-pool-operator"},
            "annotations": {VERSION_ANNOTATION: __version__},
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
