"""The relay admission policy (admission.py) as data: which fields, which permissions,
which requests. What the API server does with it is
tests/integration/relay/test_relay_admission.py."""

from __future__ import annotations

import re

from dynamo_pool_operator import admission
from dynamo_pool_operator.api import crd

#: docs/crd.md, "Who may set what": the fields that need create on Deployments.
POD_FIELDS = (
    "spec.image",
    "spec.serviceAccountName",
    "spec.podLabels",
    "spec.podAnnotations",
    "spec.nodeSelector",
    "spec.tolerations",
    "spec.resources",
)


def test_the_guarded_fields_are_the_pod_fields_of_the_schema() -> None:
    assert admission.GUARDED_FIELDS == POD_FIELDS
    spec = crd.spec_schema()["properties"]
    assert {f.removeprefix("spec.") for f in POD_FIELDS} <= set(spec)


def test_each_field_has_a_validation_naming_it_and_the_permission() -> None:
    spec = admission.policy_spec()
    _, *validations = spec["validations"]
    assert len(validations) == len(POD_FIELDS)
    for field, validation in zip(POD_FIELDS, validations, strict=True):
        name = field.removeprefix("spec.")
        assert validation["expression"] == (
            f"!variables.{name}Changed || variables.mayCreateDeployments"
        )
        assert validation["messageExpression"].startswith(
            f"'{field}: only a user who may create deployments (apps) in namespace '"
        )
        assert "request.userInfo.username" in validation["messageExpression"]
        assert validation["reason"] == "Forbidden"
    variables = {v["name"]: v["expression"] for v in spec["variables"]}
    assert variables["mayCreateDeployments"] == (
        "authorizer.group('apps').resource('deployments')"
        ".namespace(object.metadata.namespace).check('create').allowed()"
    )


def test_a_field_counts_as_set_when_it_differs_from_before_or_from_empty() -> None:
    """On CREATE oldObject is null: a field counts when not empty; on UPDATE when it
    differs from the stored one. Empty (`''`, `{}`, `[]`) is what the operator reads as
    absent."""
    assert admission.changed("image") == (
        "object.?spec.?image.orValue('') != "
        "(oldObject == null ? '' : oldObject.?spec.?image.orValue(''))"
    )
    assert admission.changed("tolerations").count("orValue([])") == 2
    resources = admission.changed("resources")
    for part, empty in (("limits", "{}"), ("requests", "{}"), ("claims", "[]")):
        assert f"object.?spec.?resources.?{part}.orValue({empty})" in resources


def test_a_create_is_admitted_only_from_a_user_who_may_update_the_dgd_of_its_name() -> None:
    """docs/crd.md, "Who may set what": creating a relay publishes the DGD of its name."""
    publish, *_ = admission.policy_spec()["validations"]
    assert publish["expression"] == (
        "!(request.operation == 'CREATE') || "
        "authorizer.group('nvidia.com').resource('dynamographdeployments')"
        ".namespace(object.metadata.namespace).name(object.metadata.name)"
        ".check('update').allowed()"
    )
    message = publish["messageExpression"]
    assert "' publishes DynamoGraphDeployment ' + object.metadata.namespace" in message
    assert "update dynamographdeployments (nvidia.com)" in message
    assert "request.userInfo.username" in message
    assert publish["reason"] == "Forbidden"


def test_set_fields_counts_what_the_policy_counts() -> None:
    """Present and not empty; `resources` by any of its parts. What `check` reads."""
    assert admission.set_fields(None) == ()
    assert admission.set_fields({"replicas": 3, "clusterId": "east"}) == ()
    empty = {
        "image": "",
        "serviceAccountName": "",
        "podLabels": {},
        "podAnnotations": {},
        "nodeSelector": {},
        "tolerations": [],
        "resources": {"limits": {}, "requests": {}, "claims": []},
    }
    assert admission.set_fields(empty) == ()
    every = {
        "image": "x",
        "serviceAccountName": "sa",
        "podLabels": {"a": "b"},
        "podAnnotations": {"a": "b"},
        "nodeSelector": {"a": "b"},
        "tolerations": [{"operator": "Exists"}],
        "resources": {"claims": [{"name": "gpu"}]},
    }
    assert admission.set_fields(every) == tuple(f.removeprefix("spec.") for f in POD_FIELDS)
    assert admission.set_fields({"resources": {"requests": {"cpu": "1"}}}) == ("resources",)


def test_only_relay_creates_and_writes_that_set_or_change_a_pod_field_are_matched() -> None:
    spec = admission.policy_spec()
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"] == {
        "resourceRules": [
            {
                "apiGroups": [crd.GROUP],
                "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"],
                # not the status subresource the operator writes
                "resources": [crd.PLURAL],
            }
        ]
    }
    (condition,) = spec["matchConditions"]
    assert condition["expression"].startswith("request.operation == 'CREATE' || ")
    for field in POD_FIELDS:
        assert admission.changed(field.removeprefix("spec.")) in condition["expression"]
    # Every variable a validation names exists.
    names = {v["name"] for v in spec["variables"]}
    for validation in spec["validations"]:
        assert set(re.findall(r"variables\.(\w+)", validation["expression"])) <= names


def test_render_cluster_wide_and_restricted() -> None:
    policy, binding = admission.render()
    assert (policy["kind"], binding["kind"]) == (
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    )
    assert policy["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert policy["metadata"]["name"] == binding["metadata"]["name"] == admission.POLICY_NAME
    assert binding["spec"] == {"policyName": admission.POLICY_NAME, "validationActions": ["Deny"]}
    _, restricted = admission.render("team-a", suffix=".ops")
    assert restricted["metadata"]["name"] == admission.POLICY_NAME + ".ops"
    assert restricted["spec"] == {
        "policyName": admission.POLICY_NAME + ".ops",
        "validationActions": ["Deny"],
        "matchResources": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}
        },
    }


def test_chart_policy_is_the_rendered_policy() -> None:
    policy, binding = admission.render()
    assert admission.chart_policy() == {
        "policy": policy["spec"],
        "binding": {"validationActions": binding["spec"]["validationActions"]},
    }
