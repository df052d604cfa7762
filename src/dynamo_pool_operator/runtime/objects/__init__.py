"""What any object is, read without I/O: `Resource`, `Meta` (metadata, ownership, the
hand-over rules), whether an apply would change it (`needs_apply`, `Shape`) and `record`.
The pure planning imports this face and nothing else of the runtime (`make lint`)."""

from dynamo_pool_operator.runtime.objects.diff import (
    VIEW,
    Shape,
    View,
    contains,
    needs_apply,
    parse_quantity,
    with_hash,
)
from dynamo_pool_operator.runtime.objects.meta import (
    MESSAGE_LIMIT,
    Meta,
    controller_is,
    controller_of,
    describe_controller,
    find_condition,
    identity_stub,
    is_controlled_by,
    is_map,
    is_terminating,
    labels_of,
    needs_handover,
    object_version,
    rfc3339,
    seconds_since,
    summarize_managed_fields,
)
from dynamo_pool_operator.runtime.objects.record import record
from dynamo_pool_operator.runtime.objects.resources import (
    CONFIGMAPS,
    CRDS,
    DEPLOYMENTS,
    LEASES,
    SERVICES,
    Resource,
)

__all__ = [
    "CONFIGMAPS",
    "CRDS",
    "DEPLOYMENTS",
    "LEASES",
    "MESSAGE_LIMIT",
    "SERVICES",
    "VIEW",
    "Meta",
    "Resource",
    "Shape",
    "View",
    "contains",
    "controller_is",
    "controller_of",
    "describe_controller",
    "find_condition",
    "identity_stub",
    "is_controlled_by",
    "is_map",
    "is_terminating",
    "labels_of",
    "needs_apply",
    "needs_handover",
    "object_version",
    "parse_quantity",
    "record",
    "rfc3339",
    "seconds_since",
    "summarize_managed_fields",
    "with_hash",
]
