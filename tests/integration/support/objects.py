"""Bodies of plain Kubernetes objects the integration tests create, and the controller
reference one object holds to another."""

from __future__ import annotations

from typing import Any


def config_map(
    name: str, ns: str, labels: dict[str, str] | None = None, **data: str
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def deployment(name: str, ns: str, app: str, container: dict[str, Any]) -> dict[str, Any]:
    """One replica of `container`, its pods labelled `app`."""
    labels = {"app": app}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def controller_ref(obj: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The ownerReference that makes `obj` the controller (plus `extra` fields)."""
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        **extra,
    }
