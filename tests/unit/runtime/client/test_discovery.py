"""Unit tests for runtime.client.discovery: aggregated and legacy discovery, and the
group versions that cannot be read named instead of failing the walk."""

from __future__ import annotations

from typing import Any

from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.discovery import (
    AGGREGATED_DISCOVERY,
    ServedResource,
    discover,
    served_versions,
)
from dynamo_pool_operator.runtime.client.rest import JSON
from tests.unit.runtime.client.fake import FakeClient
from tests.unit.served import DGD_ALPHA, DGD_BETA


class Documents(FakeClient):
    """Answers GETs from a table of paths; an exception in the table is raised."""

    def __init__(self, docs: dict[str, Any]) -> None:
        super().__init__()
        self.docs = docs
        self.accepts: dict[str, str] = {}

    async def request(self, method: str, path: str, *, accept: str = JSON, **_: Any) -> Any:
        assert method == "GET"
        self.accepts[path] = accept
        doc = self.docs[path]
        if isinstance(doc, Exception):
            raise doc
        return doc


def _aggregated(*groups: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "APIGroupDiscoveryList", "items": list(groups)}


def _resource(plural: str, kind: str, scope: str = "Namespaced") -> dict[str, Any]:
    return {"resource": plural, "responseKind": {"kind": kind}, "scope": scope}


AGGREGATED = Documents(
    {
        "/api": _aggregated(
            {
                "metadata": {},
                "versions": [{"version": "v1", "resources": [_resource("pods", "Pod")]}],
            }
        ),
        "/apis": _aggregated(
            {
                "metadata": {"name": "nvidia.com"},
                "versions": [
                    {
                        "version": "v1beta1",
                        "resources": [_resource("dynamographdeployments", "DynamoGraphDeployment")],
                    },
                    {
                        "version": "v1alpha1",
                        "resources": [_resource("dynamographdeployments", "DynamoGraphDeployment")],
                    },
                ],
            },
            {
                "metadata": {"name": "metrics.k8s.io"},
                "versions": [{"version": "v1beta1", "freshness": "Stale"}],
            },
        ),
    }
)


async def test_aggregated_discovery_is_asked_for_and_read() -> None:
    found = await discover(AGGREGATED)
    assert AGGREGATED.accepts["/apis"] == AGGREGATED_DISCOVERY
    assert found.resources == [
        ServedResource("", "v1", "pods", "Pod", True),
        DGD_BETA,
        DGD_ALPHA,
    ]


async def test_a_stale_group_version_is_named_not_listed() -> None:
    found = await discover(AGGREGATED)
    assert set(found.unavailable) == {"metrics.k8s.io/v1beta1"}
    assert "stale" in found.unavailable["metrics.k8s.io/v1beta1"]


async def test_served_versions_are_in_discovery_order() -> None:
    assert await served_versions(AGGREGATED, "nvidia.com", "dynamographdeployments") == [
        "v1beta1",
        "v1alpha1",
    ]
    assert await served_versions(AGGREGATED, "nvidia.com", "nothing") == []


async def test_legacy_discovery_skips_subresources_gone_and_names_unreadable() -> None:
    client = Documents(
        {
            "/api": {"kind": "APIVersions", "versions": ["v1"]},
            "/apis": {
                "kind": "APIGroupList",
                "groups": [
                    {"name": "nvidia.com", "versions": [{"version": "v1beta1"}]},
                    {"name": "gone.example", "versions": [{"version": "v1"}]},
                    {"name": "metrics.k8s.io", "versions": [{"version": "v1beta1"}]},
                ],
            },
            "/api/v1": {
                "resources": [
                    {"name": "pods", "kind": "Pod", "namespaced": True},
                    {"name": "pods/status", "kind": "Pod", "namespaced": True},
                    {"name": "nodes", "kind": "Node", "namespaced": False},
                ]
            },
            "/apis/nvidia.com/v1beta1": {
                "resources": [
                    {"name": "dynamopoolrelays", "kind": "DynamoPoolRelay", "namespaced": True}
                ]
            },
            "/apis/gone.example/v1": errors.NotFound("gone", status=404),
            "/apis/metrics.k8s.io/v1beta1": errors.ApiError("unavailable", status=503),
        }
    )
    found = await discover(client)
    assert found.resources == [
        ServedResource("", "v1", "pods", "Pod", True),
        ServedResource("", "v1", "nodes", "Node", False),
        ServedResource("nvidia.com", "v1beta1", "dynamopoolrelays", "DynamoPoolRelay", True),
    ]
    assert found.unavailable == {"metrics.k8s.io/v1beta1": "503: unavailable"}
