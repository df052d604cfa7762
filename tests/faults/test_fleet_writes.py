"""The faults tier's reading of the audit log (`Fleet.foreign_writes`), on records
alone: what counts as a write to something the operator does not own."""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.localcluster.audit import AuditEvent
from tests.faults.fleet import Fleet

NS = "f-1"


def _write(verb: str, resource: str, name: str, code: int, namespace: str = NS) -> AuditEvent:
    return AuditEvent(verb, "dpo-fault-a", "ua", resource, namespace, name, "", code, raw={})


def _fleet() -> Fleet:
    client: Any = None  # the reading needs no server
    return Fleet(client, NS, 2)


@pytest.mark.parametrize("code", [403, 429, 503])
def test_an_unnamed_export_create_refused_before_its_body_is_no_write(code: int) -> None:
    assert _fleet().foreign_writes([_write("create", "serviceexports", "", code)], "lease") == []


@pytest.mark.parametrize("resource", ["selfsubjectaccessreviews", "selfsubjectreviews"])
def test_a_replicas_review_of_its_own_rbac_is_no_write(resource: str) -> None:
    """`run` asks at start who it is and whether it holds its RBAC: creates of reviews,
    cluster-scoped, which store nothing."""
    review = _write("create", resource, "", 201, namespace="")
    assert _fleet().foreign_writes([review], "lease") == []


@pytest.mark.parametrize(
    "write",
    [
        _write("create", "secrets", "", 503),  # not a kind the operator creates
        _write("create", "serviceexports", "", 201),  # answered: something was made
        _write("create", "serviceexports", "", 500),  # refused after its body was read
        _write("create", "serviceexports", "", 503, namespace="other"),
        _write("create", "subjectaccessreviews", "", 201, namespace=""),  # not its own
        _write("create", "serviceexports", "users-export", 503),  # named: not ours
    ],
    ids=repr,
)
def test_every_other_write_outside_what_the_operator_owns_is_foreign(write: AuditEvent) -> None:
    assert _fleet().foreign_writes([write], "lease") != []
