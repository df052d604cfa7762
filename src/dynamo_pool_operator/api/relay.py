"""A read-model of `DynamoPoolRelay`: the spec with the operator's defaults applied.

The CRD's schema already rejects wrong types and ranges; what it cannot know
(labels we reserve, the operator's default image and port) is checked here, and
every problem names the field, so `Ready=False InvalidConfiguration` says what
to change.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from dynamo_pool_operator.api import crd, names, podfields
from dynamo_pool_operator.runtime.objects import is_map, record

API_VERSION = f"{crd.GROUP}/{crd.VERSION}"
#: `spec.clusterIP` of a headless Service.
HEADLESS_CLUSTER_IP = "None"


def is_headless(service: Mapping[str, Any]) -> bool:
    """Whether a live Service is headless (its `clusterIP` is immutable once set)."""
    return (service.get("spec") or {}).get("clusterIP") == HEADLESS_CLUSTER_IP


@record
class RelayDefaults:
    """What a relay gets when its spec leaves a field out (from OperatorConfiguration)."""

    image: str
    port: int
    replicas: int = 2
    image_pull_policy: str = "IfNotPresent"
    headless: bool = True


@record
class Relay:
    """A DynamoPoolRelay with defaults applied; `problems` lists invalid spec fields."""

    namespace: str
    name: str
    uid: str
    generation: int
    resource_version: str
    terminating: bool
    cluster_id: str
    replicas: int
    image: str
    image_pull_policy: str
    port: int
    service_account_name: str | None
    resources: Mapping[str, Any] = field(default_factory=dict)
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    #: The relay Service is headless: the pool is imported as the relay pods' IPs.
    headless: bool = True
    problems: tuple[str, ...] = ()
    #: The relay as Events name it: at the version read, with its generation, so the
    #: recorder folds the passes between our status writes.
    reference: Mapping[str, Any] = field(init=False)
    #: The name of each object the relay owns, `<dgd>-pool-relay` (every part of a pass
    #: asks it).
    object_name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "object_name", names.relay_name(self.name))
        ref = {
            "apiVersion": API_VERSION,
            "kind": crd.KIND,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "resourceVersion": self.resource_version,
            "generation": self.generation,
        }
        object.__setattr__(self, "reference", ref)

    def reshaped(self, service: Mapping[str, Any]) -> bool:
        """The live relay Service has the other shape than this relay wants: it can only
        be replaced (deleted and created again), never changed in place."""
        return is_headless(service) != self.headless

    def owner_reference(self) -> dict[str, Any]:
        """The controller reference every object this relay owns carries."""
        return {
            "apiVersion": API_VERSION,
            "kind": crd.KIND,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def _string_map(spec: Mapping[str, Any], key: str, problems: list[str]) -> dict[str, str]:
    raw = spec.get(key)
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        problems.append(f"spec.{key}: must be a map of strings")
        return {}
    return dict(raw)


def _int(
    spec: Mapping[str, Any], key: str, default: int, lo: int, hi: int, problems: list[str]
) -> int:
    raw = spec.get(key, default)
    if isinstance(raw, bool) or not isinstance(raw, int) or not lo <= raw <= hi:
        problems.append(f"spec.{key}: must be an integer from {lo} to {hi}, got {raw!r}")
        return default
    return raw


def _check_labels(
    values: Mapping[str, str], field: str, problems: list[str], *, check_values: bool
) -> None:
    for key, value in sorted(values.items()):
        for why in names.qualified_name_errors(key):
            problems.append(f"spec.{field}[{key}]: invalid key: {why}")
        for why in names.label_value_errors(value) if check_values else ():
            problems.append(f"spec.{field}[{key}]: invalid value {value!r}: {why}")


def _string(spec: Mapping[str, Any], key: str, problems: list[str]) -> str | None:
    raw = spec.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str):
        problems.append(f"spec.{key}: must be a string, got {type(raw).__name__}")
        return None
    return raw or None


def _headless(spec: Mapping[str, Any], default: bool, problems: list[str]) -> bool:
    service = spec.get("service")
    if service is None:
        return default
    if not isinstance(service, Mapping):
        problems.append(f"spec.service: must be an object, got {type(service).__name__}")
        return default
    raw = service.get("headless")
    if raw is None:
        return default
    if not isinstance(raw, bool):
        problems.append(f"spec.service.headless: must be true or false, got {raw!r}")
        return default
    return raw


def _generation(meta: Mapping[str, Any]) -> int:
    raw = meta.get("generation")
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else 0


def relay_from_object(obj: Mapping[str, Any], defaults: RelayDefaults) -> Relay:
    """Read a DynamoPoolRelay; never raises, collects spec problems instead: what the
    API server would only refuse when we write the Deployment (label syntax, ServiceAccount
    names), so the relay says which field to change."""
    meta_raw = obj.get("metadata")
    meta: Mapping[str, Any] = meta_raw if is_map(meta_raw) else {}
    spec_raw = obj.get("spec")
    spec: Mapping[str, Any] = spec_raw if is_map(spec_raw) else {}
    problems: list[str] = []

    pod_labels = _string_map(spec, "podLabels", problems)
    for key in sorted(pod_labels):
        if key in names.RESERVED_POD_LABELS:
            problems.append(
                f"spec.podLabels[{key}]: is set by the operator to select the relay pods; "
                "remove it from podLabels"
            )
        elif domain := names.reserved_domain(key):
            problems.append(
                f"spec.podLabels[{key}]: the {domain} label domain is reserved (its labels "
                "select other workloads' pods); remove it from podLabels"
            )
    _check_labels(pod_labels, "podLabels", problems, check_values=True)
    pod_annotations = _string_map(spec, "podAnnotations", problems)
    _check_labels(pod_annotations, "podAnnotations", problems, check_values=False)
    node_selector = _string_map(spec, "nodeSelector", problems)
    _check_labels(node_selector, "nodeSelector", problems, check_values=True)
    own_image = _string(spec, "image", problems)
    if own_image is not None:
        problems.extend(podfields.image_errors(own_image))
    image = own_image or defaults.image
    cluster_id = _string(spec, "clusterId", problems) or ""
    sa = _string(spec, "serviceAccountName", problems)
    for why in names.dns1123_subdomain_errors(sa) if sa else ():
        problems.append(f"spec.serviceAccountName: {sa!r} {why}")
    resources = spec.get("resources")
    problems.extend(podfields.resources_errors(resources))
    tolerations_raw = spec.get("tolerations")
    problems.extend(podfields.tolerations_errors(tolerations_raw))
    tolerations = tuple(
        copy.deepcopy(dict(t))
        for t in (tolerations_raw if isinstance(tolerations_raw, list) else ())
        if isinstance(t, Mapping)
    )
    return Relay(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        generation=_generation(meta),
        resource_version=str(meta.get("resourceVersion") or ""),
        terminating=bool(meta.get("deletionTimestamp")),
        cluster_id=cluster_id,
        replicas=_int(spec, "replicas", defaults.replicas, 0, crd.MAX_REPLICAS, problems),
        image=image,
        image_pull_policy=defaults.image_pull_policy,
        port=_int(spec, "port", defaults.port, 1, 65535, problems),
        service_account_name=sa,
        resources=copy.deepcopy(dict(resources)) if is_map(resources) else {},
        pod_labels={
            k: v
            for k, v in pod_labels.items()
            if k not in names.RESERVED_POD_LABELS and not names.reserved_domain(k)
        },
        pod_annotations=pod_annotations,
        node_selector=node_selector,
        tolerations=tolerations,
        headless=_headless(spec, defaults.headless, problems),
        problems=tuple(problems),
    )
