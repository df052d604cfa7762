"""What NVIDIA Dynamo's own operator would add next to a DGD, in a world without it: a
Deployment per component and a frontend's Service `<dgd>-<component>`, owned by the
DGD, so that with kwok the frontend Service has ready endpoints as on a real cluster.
The pod template meets Pod Security `restricted`, as the namespaces here enforce.
"""

from __future__ import annotations

from typing import Any

from dynamo_pool_operator.api import names

#: The label Dynamo's frontend pods carry here (the Service selects on it).
COMPONENT_LABEL = "nvidia.com/dynamo-component"
FRONTEND_PORT = 8000

RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _owned_by(dgd: dict[str, Any]) -> list[dict[str, Any]]:
    meta = dgd["metadata"]
    return [
        {
            "apiVersion": dgd["apiVersion"],
            "kind": dgd["kind"],
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
        }
    ]


def frontend(dgd: dict[str, Any], component: str = "Frontend") -> list[dict[str, Any]]:
    """The frontend's Deployment and Service for the DGD as the API server returned it
    (its uid makes them the DGD's, so the garbage collector removes them with it)."""
    meta = dgd["metadata"]
    name = names.component_service_name(meta["name"], component)
    selector = {COMPONENT_LABEL: name}
    common = {"name": name, "namespace": meta["namespace"], "ownerReferences": _owned_by(dgd)}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": common,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {
                    "containers": [
                        {
                            "name": "frontend",
                            "image": "nvcr.io/nvidia/ai-dynamo/dynamo-frontend:stand-in",
                            "ports": [{"name": "http", "containerPort": FRONTEND_PORT}],
                            "securityContext": RESTRICTED_CONTAINER,
                        }
                    ]
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": common,
        "spec": {
            "selector": selector,
            "ports": [{"name": "http", "port": FRONTEND_PORT, "protocol": "TCP"}],
        },
    }
    return [deployment, service]
