"""Every API answer is classified once (runtime/client/errors.py)."""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.runtime.client import errors

TERMINATING = {
    "kind": "Status",
    "status": "Failure",
    "message": 'configmaps "new" is forbidden: unable to create new content in namespace x '
    "because it is being terminated",
    "reason": "Forbidden",
    "details": {
        "name": "new",
        "kind": "configmaps",
        "causes": [
            {
                "reason": "NamespaceTerminating",
                "message": "namespace x is being terminated",
                "field": "metadata.namespace",
            }
        ],
    },
    "code": 403,
}


def test_a_create_in_a_terminating_namespace_is_its_own_class() -> None:
    """The answer the API server gives (captured from kube-apiserver 1.37)."""
    e = errors.classify(403, TERMINATING)
    assert isinstance(e, errors.NamespaceTerminating)
    assert isinstance(e, errors.Forbidden), "still a 403 for whoever does not care"
    assert isinstance(e, errors.Reported)


@pytest.mark.parametrize(
    "details",
    [None, {}, {"causes": "x"}, {"causes": [{"reason": "FieldValueForbidden"}]}, {"causes": [1]}],
)
def test_other_forbidden_answers_are_plain_forbidden(details: Any) -> None:
    body = {"reason": "Forbidden", "message": "no", "details": details}
    e = errors.classify(403, body)
    assert type(e) is errors.Forbidden
