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

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def relay_name(dgd: str) -> str:
    """Name of the relay Deployment and Service of the pool `dgd`."""
    return f"{dgd}{RELAY_SUFFIX}"


def component_service_name(dgd: str, component: str) -> str:
    """Name of the Service Dynamo's operator creates for `component` of `dgd`."""
    return f"{dgd}-{component}".lower().replace(".", "-")


def dns1035_label_errors(name: str) -> list[str]:
    """Why `name` is not a valid Service name (empty when it is)."""
    problems: list[str] = []
    if len(name) > DNS1035_MAX:
        problems.append(f"must be no more than {DNS1035_MAX} characters (has {len(name)})")
    if not _DNS1035.match(name):
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
