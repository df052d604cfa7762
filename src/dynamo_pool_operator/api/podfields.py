"""Validity of the pod fields a relay passes through: resources, tolerations, image.

The API server refuses a Deployment whose pod template breaks these rules only when we
write it, and the relay would retry forever; so Kubernetes' own rules for
`ResourceRequirements` and `Toleration` are checked here first (and in the CRD where a
schema can say them), each message starting with the relay field's path, so
`Ready=False InvalidConfiguration` says what to change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from enum import StrEnum

from dynamo_pool_operator.api import names
from dynamo_pool_operator.runtime.objects import parse_quantity


class PullPolicy(StrEnum):
    """A container's `imagePullPolicy`."""

    ALWAYS = "Always"
    IF_NOT_PRESENT = "IfNotPresent"
    NEVER = "Never"


#: Kubernetes' published quantity pattern, for the CRD's schema. It admits a fractional
#: exponent (`1e1.5`), which the server's parser and ours refuse.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
STANDARD_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
TOLERATION_OPERATORS = ("Exists", "Equal")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
RESOURCE_KEYS = ("limits", "requests", "claims")


def _extended(name: str) -> bool:
    """An extended resource: `<domain>/<name>` outside the kubernetes.io domains."""
    prefix, _, _ = name.partition("/")
    return "/" in name and not (prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"))


def resource_name_errors(name: str) -> list[str]:
    if name in STANDARD_RESOURCES or name.startswith("hugepages-"):
        return []
    if "/" in name and not names.qualified_name_errors(name) and _extended(name):
        return []
    return [
        "must be cpu, memory, ephemeral-storage, hugepages-<size>, or an extended "
        "resource <domain>/<name> (e.g. nvidia.com/gpu)"
    ]


def _quantities(section: object, where: str, problems: list[str]) -> dict[str, Decimal]:
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        problems.append(f"{where}: must be a map of resource name to quantity")
        return {}
    out: dict[str, Decimal] = {}
    for name, raw in sorted(section.items(), key=lambda kv: str(kv[0])):
        field = f"{where}[{name}]"
        for why in resource_name_errors(str(name)):
            problems.append(f"{field}: invalid resource name: {why}")
        value = parse_quantity(raw)
        if value is None:
            problems.append(f"{field}: {raw!r} is not a quantity (e.g. 500m, 2, 128Mi, 1Gi)")
        elif value < 0:
            problems.append(f"{field}: must be greater than or equal to 0, got {raw!r}")
        else:
            out[str(name)] = value
    return out


def resources_errors(resources: object, field: str = "spec.resources") -> list[str]:
    """Why `resources` (a core/v1 ResourceRequirements) would be refused."""
    if resources is None:
        return []
    if not isinstance(resources, Mapping):
        return [f"{field}: must be an object with limits, requests or claims"]
    problems: list[str] = []
    for key in sorted(set(map(str, resources)) - set(RESOURCE_KEYS)):
        problems.append(f"{field}.{key}: unknown field (allowed: {', '.join(RESOURCE_KEYS)})")
    limits = _quantities(resources.get("limits"), f"{field}.limits", problems)
    requests = _quantities(resources.get("requests"), f"{field}.requests", problems)
    for name, request in sorted(requests.items()):
        limit = limits.get(name)
        if limit is not None and request > limit:
            problems.append(
                f"{field}.requests[{name}]: must be less than or equal to the limit "
                f"{resources['limits'][name]!r}"
            )
    for name in sorted({*limits, *requests}):
        if not _extended(name):
            continue
        for section, values in (("limits", limits), ("requests", requests)):
            value = values.get(name)
            if value is not None and value != value.to_integral_value():
                problems.append(
                    f"{field}.{section}[{name}]: an extended resource must be a whole number"
                )
        if name not in limits:
            problems.append(f"{field}.limits[{name}]: an extended resource needs a limit")
        elif name in requests and requests[name] != limits[name]:
            problems.append(
                f"{field}.requests[{name}]: an extended resource cannot be overcommitted: "
                "the request must equal the limit"
            )
    claims = resources.get("claims")
    if claims is not None and (
        not isinstance(claims, list)
        or not all(isinstance(c, Mapping) and isinstance(c.get("name"), str) for c in claims)
    ):
        problems.append(f"{field}.claims: must be a list of {{name: <claim>}}")
    return problems


def toleration_errors(toleration: object, field: str) -> list[str]:
    """Why one core/v1 Toleration would be refused."""
    if not isinstance(toleration, Mapping):
        return [f"{field}: must be an object (key, operator, value, effect, tolerationSeconds)"]
    problems: list[str] = []
    known = {"key", "operator", "value", "effect", "tolerationSeconds"}
    for extra in sorted(set(map(str, toleration)) - known):
        problems.append(f"{field}.{extra}: unknown field")
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    value = toleration.get("value") or ""
    effect = toleration.get("effect") or ""
    if not isinstance(key, str) or not isinstance(value, str) or not isinstance(effect, str):
        return [*problems, f"{field}: key, value and effect must be strings"]
    if key:
        for why in names.qualified_name_errors(key):
            problems.append(f"{field}.key: {key!r} {why}")
    if operator not in TOLERATION_OPERATORS:
        problems.append(f"{field}.operator: must be Exists or Equal, got {operator!r}")
    elif operator == "Exists" and value:
        problems.append(f"{field}.value: must be empty when operator is Exists")
    elif operator == "Equal":
        if not key:
            problems.append(f"{field}.operator: must be Exists when key is empty")
        for why in names.label_value_errors(value):
            problems.append(f"{field}.value: {value!r} {why}")
    if effect and effect not in TAINT_EFFECTS:
        problems.append(f"{field}.effect: must be one of {', '.join(TAINT_EFFECTS)} or empty")
    seconds = toleration.get("tolerationSeconds")
    if seconds is not None:
        if isinstance(seconds, bool) or not isinstance(seconds, int):
            problems.append(f"{field}.tolerationSeconds: must be an integer")
        elif effect != "NoExecute":
            problems.append(f"{field}.tolerationSeconds: only valid with effect NoExecute")
    return problems


def tolerations_errors(tolerations: object, field: str = "spec.tolerations") -> list[str]:
    if tolerations is None:
        return []
    if not isinstance(tolerations, list):
        return [f"{field}: must be a list of tolerations"]
    return [p for i, t in enumerate(tolerations) for p in toleration_errors(t, f"{field}[{i}]")]


def image_errors(image: str, field: str = "spec.image") -> list[str]:
    """An image reference holds no whitespace (the API server refuses leading or
    trailing whitespace, and no registry serves a name with inner whitespace)."""
    if not image.strip():
        return [f"{field}: must not be empty or whitespace"]
    if re.search(r"\s", image):
        return [f"{field}: {image!r} must not contain whitespace"]
    return []
