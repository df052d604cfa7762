"""THE naming and name-validity rules. Every other module asks here.

The relay's objects are `<dgd>-pool-relay`; a component's Service is Dynamo's
`NormalizeKubeResourceName` of `<dgd>-<component>`; a frontend's, as the Global Router
finds it in another cluster, `<dgd>-frontend`. Karmada labels a collected slice
`derived-<service>` (a 63-character label value), so its exported names are at most 55.
"""

from __future__ import annotations

import re

RELAY_SUFFIX = "-pool-relay"
#: The Global Router finds a pool's frontends by this suffix (a name rule works with
#: every MCS implementation; copied labels do not).
FRONTEND_SUFFIX = "-frontend"
DNS1035_MAX = 63
KARMADA_DERIVED_PREFIX = "derived-"
KARMADA_MAX_SERVICE_NAME = DNS1035_MAX - len(KARMADA_DERIVED_PREFIX)  # 55

#: Kubernetes' own syntax rules, the one source of the checks below and of the CRD's
#: schema and CEL rules (`api/crd.py`), so the API server refuses at `kubectl apply` what
#: the operator would call invalid. Each matches a whole string.
DNS1123_SUBDOMAIN_PATTERN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
QUALIFIED_NAME_PATTERN = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_PATTERN = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
#: A label or annotation key: `[prefix/]name`, the prefix a DNS subdomain of at most
#: `KEY_PREFIX_MAX` characters, the name a qualified name of at most `DNS1035_MAX`.
LABEL_KEY_PATTERN = f"({DNS1123_SUBDOMAIN_PATTERN}/)?{QUALIFIED_NAME_PATTERN}"
KEY_PREFIX_MAX = 253

# Matched with fullmatch: `$` would also accept a trailing newline.
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN_PATTERN)
_QUALIFIED_NAME = re.compile(QUALIFIED_NAME_PATTERN)
_LABEL_VALUE = re.compile(LABEL_VALUE_PATTERN)


def relay_name(dgd: str) -> str:
    """Name of the relay Deployment and Service of the pool `dgd`."""
    return f"{dgd}{RELAY_SUFFIX}"


def pool_of(relay_object: str) -> str | None:
    """The pool (DGD) a `<dgd>-pool-relay` name belongs to, or None."""
    if relay_object.endswith(RELAY_SUFFIX) and len(relay_object) > len(RELAY_SUFFIX):
        return relay_object[: -len(RELAY_SUFFIX)]
    return None


def frontend_service_name(dgd: str) -> str:
    """The frontend Service the Global Router looks for beside the pool `dgd`'s relay."""
    return f"{dgd}{FRONTEND_SUFFIX}"


def pool_of_frontend(service: str) -> str | None:
    """The pool a `<dgd>-frontend` name belongs to, or None."""
    if service.endswith(FRONTEND_SUFFIX) and len(service) > len(FRONTEND_SUFFIX):
        return service[: -len(FRONTEND_SUFFIX)]
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
    if len(name) > KEY_PREFIX_MAX:
        problems.append(f"must be no more than {KEY_PREFIX_MAX} characters (has {len(name)})")
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


# Label and annotation keys the operator writes or reads, in one place.

#: On every object a pool's relay owns (Deployment, Service, ServiceExports).
DGD_NAME = "nvidia.com/dynamo-graph-deployment-name"

APP_NAME = "app.kubernetes.io/name"
APP_INSTANCE = "app.kubernetes.io/instance"
APP_COMPONENT = "app.kubernetes.io/component"
APP_MANAGED_BY = "app.kubernetes.io/managed-by"

RELAY_APP = "dynamo-pool-relay"
#: `app.kubernetes.io/component` of the relay Deployment and Service.
RELAY_COMPONENT = "pool-relay"
MANAGED_BY = "dynamo-pool-operator"
#: The server-side apply field manager of every write the operator makes.
FIELD_MANAGER = "dynamo-pool-operator"

#: Hash of the rendered intent, so a removed field is applied too.
RENDER_HASH = "nvidia.com/pool-relay-render-hash"

#: Pod labels the operator sets to select the relay pods; a relay may not override them.
RESERVED_POD_LABELS = frozenset({APP_NAME, APP_INSTANCE, DGD_NAME})
#: Label domains no relay pod may carry a key in (and their subdomains): ours, where
#: Dynamo's Services select pods, and Kubernetes'. `app.kubernetes.io` stays open but
#: for the selector's keys.
RESERVED_POD_LABEL_DOMAINS = ("nvidia.com", "kubernetes.io", "k8s.io")
OPEN_POD_LABEL_DOMAINS = frozenset({"app.kubernetes.io"})


def reserved_domain(key: str) -> str | None:
    """The reserved domain the label `key` is in (`RESERVED_POD_LABEL_DOMAINS`), or None."""
    prefix, slash, _ = key.rpartition("/")
    if not slash or prefix in OPEN_POD_LABEL_DOMAINS:
        return None
    for domain in RESERVED_POD_LABEL_DOMAINS:
        if prefix == domain or prefix.endswith("." + domain):
            return domain
    return None


def selector(dgd: str) -> dict[str, str]:
    """The relay pods' selector: stable for the life of the Deployment (immutable)."""
    return {APP_NAME: RELAY_APP, APP_INSTANCE: dgd}


def owned_object_labels(dgd: str) -> dict[str, str]:
    """Labels on the relay Deployment and Service."""
    return {
        **selector(dgd),
        APP_COMPONENT: RELAY_COMPONENT,
        APP_MANAGED_BY: MANAGED_BY,
        DGD_NAME: dgd,
    }


# The keys an imported EndpointSlice carries, by who imports it (read by `discover`, as
# the Global Router reads them).

#: Standard MCS (KEP-1645): the imported Service's name, and the exporting cluster's ID.
MCS_SERVICE_NAME = "multicluster.kubernetes.io/service-name"
MCS_SOURCE_CLUSTER = "multicluster.kubernetes.io/source-cluster"
#: Kubernetes' own: the Service a slice belongs to, and who manages the slice.
SLICE_SERVICE_NAME = "kubernetes.io/service-name"
SLICE_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
#: Karmada: the manager of the slices it collects onto its control plane, and the Work
#: each came from, in `karmada-es-<member>`.
KARMADA_SLICE_MANAGER = "endpointslice-controller.karmada.io"
KARMADA_WORK_NAMESPACE = "work.karmada.io/namespace"
KARMADA_WORK_NAME = "work.karmada.io/name"
KARMADA_EXECUTION_SPACE_PREFIX = "karmada-es-"
#: Karmada: the label on every object it applies to a member from a Work; the Work's
#: namespace and name are annotations of it.
KARMADA_MANAGED = "karmada.io/managed"


def karmada_derived_service(label: str) -> str | None:
    """The Service a Karmada `derived-<service>` label value names, or None."""
    if label.startswith(KARMADA_DERIVED_PREFIX) and len(label) > len(KARMADA_DERIVED_PREFIX):
        return label[len(KARMADA_DERIVED_PREFIX) :]
    return None


def karmada_member(execution_space: str) -> str | None:
    """The member cluster a Karmada execution namespace `karmada-es-<member>` is for."""
    prefix = KARMADA_EXECUTION_SPACE_PREFIX
    if execution_space.startswith(prefix) and len(execution_space) > len(prefix):
        return execution_space[len(prefix) :]
    return None
