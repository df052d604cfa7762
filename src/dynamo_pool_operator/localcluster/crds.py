"""CRDs the local control plane installs: mcs-api's own ServiceExport and ServiceImport
(fetched by build.sh; narrowed to chosen versions for the version-gate tests), and
stand-ins for the APIs whose owners ship no module we can fetch: the DGD (typing only
what the operator reads, in both shapes Dynamo serves), the DCD and the About API's
ClusterProperty (KEP-2149).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from dynamo_pool_operator.api import crd as relay_crd
from dynamo_pool_operator.api import dgd as dgd_api

_PRESERVE = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def mcs_crds(
    crd_dir: Path, served: tuple[str, ...] = ("v1alpha1", "v1beta1")
) -> list[dict[str, Any]]:
    """ServiceExport and ServiceImport CRDs serving only the versions in `served`: the
    others removed and the storage version moved, as an older or newer release installs."""
    out = []
    for name in ("serviceexports", "serviceimports"):
        doc = yaml.safe_load((crd_dir / f"multicluster.x-k8s.io_{name}.yaml").read_text())
        versions = [v for v in doc["spec"]["versions"] if v["name"] in served]
        if not versions:
            raise ValueError(f"{name}: none of {served} is in the upstream CRD")
        if not any(v.get("storage") for v in versions):
            versions[-1]["storage"] = True
        for v in versions:
            v["served"] = True
        doc["spec"]["versions"] = versions
        out.append(doc)
    return out


def _component_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["name"],
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": 63,
                "pattern": "^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?$",
            },
            "type": {
                "type": "string",
                "enum": ["frontend", "worker", "prefill", "decode", "planner", "epp"],
            },
            "replicas": {"type": "integer", "format": "int32", "minimum": 0},
            "globalDynamoNamespace": {"type": "boolean"},
            "podTemplate": _PRESERVE,
        },
    }


def _alpha_service_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "componentType": {"type": "string"},
            "subComponentType": {"type": "string"},
            "globalDynamoNamespace": {"type": "boolean"},
            "replicas": {"type": "integer", "format": "int32", "minimum": 0},
        },
    }


def dgd_crd(version: str = "v1beta1") -> dict[str, Any]:
    """A DynamoGraphDeployment CRD serving one version: v1beta1's `spec.components[]`
    or v1alpha1's `spec.services{}` (Dynamo converts between them; the stand-in does not)."""
    if version == "v1beta1":
        spec = {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {
                "backendFramework": {"type": "string", "enum": ["sglang", "vllm", "trtllm"]},
                "components": {
                    "type": "array",
                    "maxItems": 25,
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": _component_schema(),
                },
            },
        }
    elif version == "v1alpha1":
        spec = {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {
                "backendFramework": {"type": "string"},
                "services": {
                    "type": "object",
                    "maxProperties": 25,
                    "additionalProperties": _alpha_service_schema(),
                },
            },
        }
    else:
        raise ValueError(f"unknown DGD version {version!r}")
    versions = [_served_version(version, spec)]
    return _crd(dgd_api.GROUP, "DynamoGraphDeployment", dgd_api.PLURAL, versions, short="dgd")


def _crd(
    group: str,
    kind: str,
    plural: str,
    versions: list[dict[str, Any]],
    *,
    short: str = "",
    scope: str = "Namespaced",
) -> dict[str, Any]:
    names = {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": names | ({"shortNames": [short]} if short else {}),
            "versions": versions,
        },
    }


def _served_version(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The one served and stored version of a Dynamo test CRD, with a status
    subresource, a `spec` of schema `spec` and a free-form status."""
    return {
        "name": name,
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    "spec": spec,
                    "status": _PRESERVE,
                },
            }
        },
    }


def dcd_crd(versions: tuple[str, ...] = ("v1alpha1",)) -> dict[str, Any]:
    """A DynamoComponentDeployment CRD (served at `versions`, the last one stored): what
    controls a component's Service off the Grove path; the spec is free-form here."""
    served = [_served_version(v, _PRESERVE) for v in versions]
    for version in served[:-1]:
        version["storage"] = False
    return _crd(dgd_api.GROUP, dgd_api.DCD_KIND, dgd_api.DCD_PLURAL, served, short="dcd")


def free_form_crd(group: str, version: str, kind: str, plural: str) -> dict[str, Any]:
    """A namespaced CRD whose objects are kept as written: the stand-in for another
    project's API that a test only needs served (another group's ServiceExport,
    Karmada's Work)."""
    served = {"name": version, "served": True, "storage": True}
    return _crd(group, kind, plural, [served | {"schema": {"openAPIV3Schema": _PRESERVE}}])


def cluster_property_crd(versions: tuple[str, ...] = ("v1alpha1", "v1beta1")) -> dict[str, Any]:
    """The About API ClusterProperty: cluster-scoped, `spec.value` required (min 1 char)."""
    schema = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "required": ["value"],
                "properties": {"value": {"type": "string", "minLength": 1}},
            },
            "status": {"type": "object"},
        },
    }
    storage = "v1beta1" if "v1beta1" in versions else versions[-1]
    columns = [
        {"name": "value", "type": "string", "jsonPath": ".spec.value"},
        {"name": "age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    served = [
        {
            "name": v,
            "served": True,
            "storage": v == storage,
            "subresources": {"status": {}},
            "additionalPrinterColumns": copy.deepcopy(columns),
            "schema": {"openAPIV3Schema": copy.deepcopy(schema)},
        }
        for v in versions
    ]
    crd = _crd("about.k8s.io", "ClusterProperty", "clusterproperties", served, scope="Cluster")
    crd["spec"]["names"]["categories"] = ["multicluster"]
    # *.k8s.io groups are protected: the API server wants the approving KEP.
    crd["metadata"]["annotations"] = {
        "api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/"
        "tree/master/keps/sig-multicluster/2149-clusterid"
    }
    return crd


def default_crds(mcs_crd_dir: Path) -> list[dict[str, Any]]:
    """What a test (or dev) cluster gets by default: every API the operator can use."""
    return [
        relay_crd.crd(),
        dgd_crd("v1beta1"),
        dcd_crd(),
        cluster_property_crd(),
        *mcs_crds(mcs_crd_dir),
    ]
