"""THE naming and name-validity rules. Every other module asks here.

- The relay's Deployment and Service: `<dgd>-pool-relay`.
- A component's Service, as Dynamo's operator names it: `<dgd>-<component>`,
  lower-cased, with `.` replaced by `-` (Dynamo's `NormalizeKubeResourceName`
  over `<dgd name>-<lower(component name)>`).
- A Service name must be a DNS-1035 label: at most 63 characters of `a-z`,
  `0-9`, `-`, starting with a letter and ending with a letter or digit.
- Karmada labels a collected EndpointSlice `derived-<service>` and a label value
  holds at most 63 characters, so with Karmada an exported name may be at most
  55 characters.
"""

from __future__ import annotations

import re

RELAY_SUFFIX = "-pool-relay"
DNS1035_MAX = 63
KARMADA_DERIVED_PREFIX = "derived-"
KARMADA_MAX_SERVICE_NAME = DNS1035_MAX - len(KARMADA_DERIVED_PREFIX)  # 55

# Matched with fullmatch: `$` would also accept a trailing newline.
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def relay_name(dgd: str) -> str:
    """Name of the relay Deployment and Service of the pool `dgd`."""
    return f"{dgd}{RELAY_SUFFIX}"


def pool_of(relay_object: str) -> str | None:
    """The inverse of `relay_name`: the pool (DGD) a `<dgd>-pool-relay` name belongs to,
    or None for any other name."""
    if relay_object.endswith(RELAY_SUFFIX) and len(relay_object) > len(RELAY_SUFFIX):
        return relay_object[: -len(RELAY_SUFFIX)]
    return None


def component_service_name(dgd: str, component: str) -> str:
    """Name of the Service Dynamo's operator creates for `component` of `dgd`."""
    return f"{dgd}-{component}".lower().replace(".", "-")


def dns1035_label_errors(name: str) -> list[str]:
    """Why `name` is not a valid Service name (empty when it is)."""
    problems: list[str] = []
    if len(name) > DNS1035_MAX:
        problems.append(f"must be no more than {DNS1035_MAX} characters (has {len(name)})")
    if not _DNS1035.fullmatch(name):
        problems.append(
            "must consist of lower case alphanumeric characters or '-', start with an "
            "alphabetic character, and end with an alphanumeric character"
        )
    return problems


def is_valid_service_name(name: str) -> bool:
    return not dns1035_label_errors(name)


def fits_karmada(name: str) -> bool:
    """True when Karmada can label the derived EndpointSlice of Service `name`."""
    return len(name) <= KARMADA_MAX_SERVICE_NAME


def dynamo_namespace(k8s_namespace: str, dgd: str) -> str:
    """The Dynamo namespace of a DGD's components (unless they use the global one)."""
    return f"{k8s_namespace}-{dgd.replace('.', '-')}"


GLOBAL_DYNAMO_NAMESPACE = "dynamo"


def discovery_service_account(dgd: str) -> str:
    """The ServiceAccount Dynamo's operator creates for a DGD's Kubernetes discovery."""
    return f"{dgd}-k8s-service-discovery"


def dns1123_subdomain_errors(name: str) -> list[str]:
    """Why `name` is not a valid object name (most kinds, e.g. a ServiceAccount)."""
    problems: list[str] = []
    if len(name) > 253:
        problems.append(f"must be no more than 253 characters (has {len(name)})")
    if not _DNS1123_SUBDOMAIN.fullmatch(name):
        problems.append(
            "must consist of lower case alphanumeric characters, '-' or '.', and must start "
            "and end with an alphanumeric character"
        )
    return problems


def qualified_name_errors(key: str) -> list[str]:
    """Why `key` is not a valid label or annotation key (`[prefix/]name`)."""
    prefix, _, name = key.rpartition("/")
    problems: list[str] = []
    if "/" in key and (not prefix or dns1123_subdomain_errors(prefix)):
        problems.append(f"prefix {prefix!r} must be a DNS subdomain (e.g. example.com)")
    if not name or len(name) > DNS1035_MAX or not _QUALIFIED_NAME.fullmatch(name):
        problems.append(
            "name part must be 1-63 characters of alphanumerics, '-', '_' or '.', starting "
            "and ending with an alphanumeric character"
        )
    return problems


def label_value_errors(value: str) -> list[str]:
    """Why `value` is not a valid label value."""
    if len(value) > DNS1035_MAX:
        return [f"must be no more than 63 characters (has {len(value)})"]
    if not _LABEL_VALUE.fullmatch(value):
        return [
            "must be empty or consist of alphanumerics, '-', '_' or '.', starting and "
            "ending with an alphanumeric character"
        ]
    return []
