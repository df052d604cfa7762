"""Where a kind of object lives (runtime/objects/resources.py): the URL of a collection,
an object and a subresource, the words RBAC and objects use, an Event's reference."""

from __future__ import annotations

from dynamo_pool_operator.runtime.objects.resources import (
    CRDS,
    DEPLOYMENTS,
    SERVICES,
    Resource,
)


def test_core_and_group_paths_for_collections_objects_and_subresources() -> None:
    assert SERVICES.path() == "/api/v1/services"
    assert SERVICES.path("team") == "/api/v1/namespaces/team/services"
    assert SERVICES.path("team", "web") == "/api/v1/namespaces/team/services/web"
    assert DEPLOYMENTS.path("team", "web", "status") == (
        "/apis/apps/v1/namespaces/team/deployments/web/status"
    )
    assert (
        DEPLOYMENTS.path("team", subresource="status")
        == "/apis/apps/v1/namespaces/team/deployments"
    )
    # A cluster-scoped resource ignores a namespace.
    assert CRDS.path("team", "x") == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x"


def test_api_version_and_group_resource_as_objects_and_rbac_say_them() -> None:
    assert (SERVICES.api_version, SERVICES.group_resource) == ("v1", "services")
    assert (DEPLOYMENTS.api_version, DEPLOYMENTS.group_resource) == ("apps/v1", "deployments.apps")
    moved = DEPLOYMENTS.at_version("v2")
    assert (moved.api_version, moved.kind, moved.namespaced) == ("apps/v2", "Deployment", True)


def test_a_reference_names_the_object_at_the_version_read() -> None:
    widgets = Resource("example.com", "v1", "widgets", "Widget")
    obj = {"metadata": {"name": "w", "namespace": "team", "uid": "u", "resourceVersion": "7"}}
    assert widgets.reference(obj) == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "name": "w",
        "namespace": "team",
        "uid": "u",
        "resourceVersion": "7",
    }
    assert widgets.reference({"metadata": {"name": "w"}}) == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "name": "w",
    }
