"""The admission policy on relays: a relay gives nobody a power they do not hold.

A relay's pod fields reach the relay Deployment the operator writes with its own
permissions: `spec.image` runs, `serviceAccountName` is the identity it runs as,
`podLabels` decide which Services select it, `podAnnotations`, `nodeSelector`,
`tolerations` and `resources` where and how it runs. Whoever may write a relay but not
a Deployment would get, through the operator, what RBAC refuses her. So a
ValidatingAdmissionPolicy admits a relay that sets or changes one of those fields only
from a requester the API server's authorizer allows to create Deployments in the
relay's namespace; everything else in a relay (its cluster ID, replicas, port, Service
shape) stays open to every relay author.

A relay is also bound to the DGD of its name: creating it publishes that DGD (its pool,
its frontends' exports to every cluster, a relay running as its discovery
ServiceAccount). That is an action on the DGD, so the policy admits a relay's CREATE
only from a requester allowed to `update` the DynamoGraphDeployment of that name in that
namespace. Only the create: it is what publishes; an update changes a publication its
DGD's writer made, and refusing updates would also refuse a controller removing its
finalizer from a relay being deleted (the pod fields keep their own rule on updates).

Why a policy, not the operator: the operator never learns who wrote a field, and would
act after the write; the API server knows the requester and refuses before anything
is stored. Why "set or changed": a field an admin set stays when someone else edits
another one (an update that leaves it as it was passes), and an absent or empty field
(`""`, `{}`, `[]`) counts as not set, as the operator reads it (`set_fields`).

Why in code: as for the RBAC (rbac.py) and the CRD (api/crd.py), this is the one
source. `dynamo-pool-operator manifests admission` renders it,
tools/generate_manifests.py writes deploy/admission/ and the chart's
`files/admission-policy.yaml` (which the chart's template renders), the integration
tests install it from here, `check`'s `relay-pod-fields` reads its fields from here, and
a test fails when any copy drifts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dynamo_pool_operator.api import crd, dgd

API_VERSION = "admissionregistration.k8s.io/v1"
#: Stable object names (the chart appends `.<release namespace>`).
POLICY_NAME = "dynamo-pool-operator-relay-pod-fields"

#: The permission that allows setting the guarded fields.
PERMISSION = "create deployments (apps)"
#: The permission on the DGD of the relay's name that allows creating the relay.
PUBLISH_PERMISSION = f"update {dgd.PLURAL} ({dgd.GROUP})"

_LABELS = {
    "app.kubernetes.io/name": "dynamo-pool-operator",
    "app.kubernetes.io/part-of": "dynamo-pool-operator",
}

#: The guarded fields: the path under `spec` and what counts as not set (the operator
#: reads an empty value as absent). `resources` is compared part by part: it is an
#: object in the schema, and CEL has no empty literal of its type.
_EMPTY_STRING, _EMPTY_MAP, _EMPTY_LIST = "''", "{}", "[]"
GUARDED: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("image", (("image", _EMPTY_STRING),)),
    ("serviceAccountName", (("serviceAccountName", _EMPTY_STRING),)),
    ("podLabels", (("podLabels", _EMPTY_MAP),)),
    ("podAnnotations", (("podAnnotations", _EMPTY_MAP),)),
    ("nodeSelector", (("nodeSelector", _EMPTY_MAP),)),
    ("tolerations", (("tolerations", _EMPTY_LIST),)),
    (
        "resources",
        (
            ("resources.?limits", _EMPTY_MAP),
            ("resources.?requests", _EMPTY_MAP),
            ("resources.?claims", _EMPTY_LIST),
        ),
    ),
)
#: The fields, as docs/crd.md lists them.
GUARDED_FIELDS = tuple(f"spec.{name}" for name, _ in GUARDED)


#: The CEL empty literals as the values they stand for.
_EMPTY_VALUES: dict[str, Any] = {_EMPTY_STRING: "", _EMPTY_MAP: {}, _EMPTY_LIST: []}


def set_fields(spec: object) -> tuple[str, ...]:
    """The guarded fields a relay's `spec` sets, as the policy counts them: present and
    not empty (for `resources`, any of its parts). For reading stored relays (`check`)."""
    out = []
    for name, parts in GUARDED:
        for path, empty in parts:
            value: object = spec
            for key in path.split(".?"):
                value = value.get(key) if isinstance(value, Mapping) else None
            if value is not None and value != _EMPTY_VALUES[empty]:
                out.append(name)
                break
    return tuple(out)


def _value(root: str, path: str, empty: str) -> str:
    return f"{root}.?spec.?{path}.orValue({empty})"


def changed(field: str) -> str:
    """CEL: the request sets or changes `spec.<field>` (on CREATE: sets it non-empty)."""
    parts = dict(GUARDED)[field]
    return " || ".join(
        f"{_value('object', path, empty)} != "
        f"(oldObject == null ? {empty} : {_value('oldObject', path, empty)})"
        for path, empty in parts
    )


def _changed_variable(field: str) -> str:
    return f"{field}Changed"


def _message(field: str) -> str:
    return (
        f"'spec.{field}: only a user who may {PERMISSION} in namespace ' + "
        "object.metadata.namespace + ' may set or change it; ' + "
        "request.userInfo.username + ' may not'"
    )


MAY_CREATE_DEPLOYMENTS = (
    "authorizer.group('apps').resource('deployments')"
    ".namespace(object.metadata.namespace).check('create').allowed()"
)
#: The requester may update the DGD the relay publishes: the one of its name, there.
MAY_UPDATE_THE_DGD = (
    f"authorizer.group('{dgd.GROUP}').resource('{dgd.PLURAL}')"
    ".namespace(object.metadata.namespace).name(object.metadata.name)"
    ".check('update').allowed()"
)
IS_CREATE = "request.operation == 'CREATE'"
PUBLISH_MESSAGE = (
    "'creating relay ' + object.metadata.name + ' publishes DynamoGraphDeployment ' + "
    "object.metadata.namespace + '/' + object.metadata.name + ': only a user who may "
    f"{PUBLISH_PERMISSION} ' + object.metadata.name + ' in namespace ' + "
    "object.metadata.namespace + ' may create it; ' + request.userInfo.username + "
    "' may not'"
)


def policy_spec() -> dict[str, Any]:
    """The ValidatingAdmissionPolicy's spec (what the chart ships as a file)."""
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [crd.GROUP],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": [crd.PLURAL],
                }
            ]
        },
        "matchConditions": [
            {
                "name": "creates-or-sets-or-changes-a-pod-field",
                "expression": " || ".join(
                    [IS_CREATE, *(f"({changed(name)})" for name, _ in GUARDED)]
                ),
            }
        ],
        "variables": [
            *(
                {"name": _changed_variable(name), "expression": changed(name)}
                for name, _ in GUARDED
            ),
            {"name": "mayCreateDeployments", "expression": MAY_CREATE_DEPLOYMENTS},
        ],
        "validations": [
            {
                # Asked only of a create: `authorizer` is evaluated when the rule is.
                "expression": f"!({IS_CREATE}) || {MAY_UPDATE_THE_DGD}",
                "messageExpression": PUBLISH_MESSAGE,
                "reason": "Forbidden",
            },
            *(
                {
                    "expression": f"!variables.{_changed_variable(name)} || "
                    "variables.mayCreateDeployments",
                    "messageExpression": _message(name),
                    "reason": "Forbidden",
                }
                for name, _ in GUARDED
            ),
        ],
    }


def binding_spec(policy_name: str, restricted_namespace: str | None) -> dict[str, Any]:
    """The binding's spec: Deny, in every namespace or only in the one the operator is
    restricted to (the only one whose relays it renders)."""
    spec: dict[str, Any] = {"policyName": policy_name, "validationActions": ["Deny"]}
    if restricted_namespace is not None:
        spec["matchResources"] = {
            "namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": restricted_namespace}
            }
        }
    return spec


def render(restricted_namespace: str | None = None, *, suffix: str = "") -> list[dict[str, Any]]:
    """The policy and its binding. `suffix` is appended to both names (the chart's
    cluster-scoped names end in `.<release namespace>`; a test may use its own)."""
    name = POLICY_NAME + suffix
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name, "labels": dict(_LABELS)},
            "spec": policy_spec(),
        },
        {
            "apiVersion": API_VERSION,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name, "labels": dict(_LABELS)},
            "spec": binding_spec(name, restricted_namespace),
        },
    ]


def chart_policy() -> dict[str, Any]:
    """What the chart reads (`files/admission-policy.yaml`): the policy's spec, and the
    binding's validation actions; the template adds the names and the namespace."""
    return {
        "policy": policy_spec(),
        "binding": {"validationActions": binding_spec("", None)["validationActions"]},
    }
