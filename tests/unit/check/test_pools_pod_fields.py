"""`check`'s relay-pod-fields (check/pools.py `guarded_pod_fields`): the relays that set
a pod field the admission policy guards, each with the field managers that set it, read
from `metadata.managedFields` as the API server records them. The fields are the policy's
own (`admission.GUARDED`); what the server records is tested against a real one in
tests/integration/operations/test_check.py."""

from __future__ import annotations

from typing import Any

from dynamo_pool_operator import admission
from dynamo_pool_operator.check.framework import Status
from dynamo_pool_operator.check.pools import guarded_pod_fields

T1, T2 = "2026-12-01T10:00:00Z", "2026-12-02T09:30:00Z"


def entry(manager: str, *fields: str, operation: str = "Update", **more: Any) -> dict[str, Any]:
    spec = {f"f:{f}": {} for f in fields}
    return {
        "manager": manager,
        "operation": operation,
        "time": T1,
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": spec},
        **more,
    }


def relay(name: str, spec: dict[str, Any], *managed: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "team"}
    if managed:
        meta["managedFields"] = list(managed)
    return {"metadata": meta, "spec": spec}


def test_no_relay_setting_a_guarded_field_is_ok() -> None:
    plain = relay("a", {"clusterId": "east", "replicas": 3, "image": "", "podLabels": {}})
    got = guarded_pod_fields([plain])
    assert (got.status, got.details) == (Status.OK, ())
    assert guarded_pod_fields([]).status is Status.OK


def test_each_guarded_field_is_named_with_the_manager_that_set_it() -> None:
    spec = {"image": "x.example/r:1", "podLabels": {"app": "db"}, "replicas": 2}
    r = relay(
        "a",
        spec,
        entry("kubectl-client-side-apply", "image", "replicas"),
        entry("argocd-controller", "podLabels", operation="Apply", time=T2),
        # The operator's status writes own no spec field.
        {
            "manager": "dynamo-pool-operator",
            "operation": "Apply",
            "subresource": "status",
            "fieldsV1": {"f:status": {"f:conditions": {}}},
        },
    )
    got = guarded_pod_fields([r, relay("b", {"replicas": 1})])
    assert got.status is Status.WARN
    assert got.message == (
        "1 relay(s) set pod fields the admission policy guards: review who set each"
    )
    assert got.details == (
        f"team/a: spec.image by kubectl-client-side-apply (Update {T1}); "
        f"spec.podLabels by argocd-controller (Apply {T2})",
    )
    assert "/spec/FIELD" in got.fix


def test_every_field_the_policy_guards_is_listed_and_no_other() -> None:
    spec = {
        "image": "x",
        "serviceAccountName": "sa",
        "podLabels": {"a": "b"},
        "podAnnotations": {"a": "b"},
        "nodeSelector": {"a": "b"},
        "tolerations": [{"operator": "Exists"}],
        "resources": {"limits": {"cpu": "1"}},
        "clusterId": "east",
        "port": 9000,
    }
    (line,) = guarded_pod_fields([relay("a", spec, entry("m", *spec))]).details
    listed = [part.split(" by ")[0] for part in line.removeprefix("team/a: ").split("; ")]
    assert tuple(listed) == admission.GUARDED_FIELDS


def test_a_field_of_several_managers_names_each_and_one_of_none_says_so() -> None:
    """Server-side apply shares a field among its appliers; a `kubectl replace` with no
    managedFields leaves none recorded."""
    shared = relay(
        "a",
        {"nodeSelector": {"a": "b", "c": "d"}},
        entry("team-a", "nodeSelector", operation="Apply"),
        entry("team-b", "nodeSelector", operation="Apply", time=T2),
    )
    unrecorded = relay("b", {"tolerations": [{"operator": "Exists"}]})
    got = guarded_pod_fields([shared, unrecorded])
    assert got.details == (
        f"team/a: spec.nodeSelector by team-a (Apply {T1}), team-b (Apply {T2})",
        "team/b: spec.tolerations by no manager recorded",
    )
