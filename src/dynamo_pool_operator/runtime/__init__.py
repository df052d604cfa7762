"""A small generic controller runtime, modelled on client-go and controller-runtime; it
knows nothing about Dynamo. This face is what the rest of the operator may use of it
(`make lint` holds every other module to it); the layering of its rooms is in
docs/architecture.md."""

from dynamo_pool_operator.runtime.auth.config import (
    IN_CLUSTER,
    ClusterConfig,
    ConfigError,
    load_config,
    load_kubeconfig,
)
from dynamo_pool_operator.runtime.auth.impersonation import impersonating
from dynamo_pool_operator.runtime.cache.followed import (
    SYNC_TIMEOUT,
    Candidate,
    FollowedCache,
    MaybeServed,
    poke_on_not_found,
)
from dynamo_pool_operator.runtime.cache.informer import EventType, Informer
from dynamo_pool_operator.runtime.cache.optional import DegradedChecks
from dynamo_pool_operator.runtime.cache.rediscovery import Rediscovery
from dynamo_pool_operator.runtime.cache.shared import SharedInformers
from dynamo_pool_operator.runtime.cache.sharing import Alike, VocabularyPath
from dynamo_pool_operator.runtime.cache.store import (
    CONTROLLER_UID_INDEX,
    Obj,
    index_by_controller_uid,
)
from dynamo_pool_operator.runtime.cache.transform import Transform, for_cache
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.background import BackgroundWrites, ChangesFirst
from dynamo_pool_operator.runtime.client.discovery import Discovery, ServedResource, discover
from dynamo_pool_operator.runtime.client.rest import DEFAULT_USER_AGENT, Client
from dynamo_pool_operator.runtime.clock import Clock, SystemClock
from dynamo_pool_operator.runtime.control.controller import (
    Controller,
    MapFunc,
    Request,
    Result,
    by_namespace,
    spec_or_metadata_changed,
)
from dynamo_pool_operator.runtime.control.queue import LOW
from dynamo_pool_operator.runtime.events import EventRecorder
from dynamo_pool_operator.runtime.leader import LeaderElector, LeadershipLost, default_identity
from dynamo_pool_operator.runtime.ratelimit import ExponentialBackoff
from dynamo_pool_operator.runtime.registry import REGISTRY, per_registry
from dynamo_pool_operator.runtime.serving.auth import DelegatedAuth
from dynamo_pool_operator.runtime.serving.server import Probes, ProbeServer
from dynamo_pool_operator.runtime.serving.tls import CertificateError, ServingCertificate
from dynamo_pool_operator.runtime.writes.guarded import (
    GuardedWrites,
    LostRace,
    NamespaceGoing,
    NameTaken,
)

__all__ = [
    "CONTROLLER_UID_INDEX",
    "DEFAULT_USER_AGENT",
    "IN_CLUSTER",
    "LOW",
    "REGISTRY",
    "SYNC_TIMEOUT",
    "Alike",
    "BackgroundWrites",
    "Candidate",
    "CertificateError",
    "ChangesFirst",
    "Client",
    "Clock",
    "ClusterConfig",
    "ConfigError",
    "Controller",
    "DegradedChecks",
    "DelegatedAuth",
    "Discovery",
    "EventRecorder",
    "EventType",
    "ExponentialBackoff",
    "FollowedCache",
    "GuardedWrites",
    "Informer",
    "LeaderElector",
    "LeadershipLost",
    "LostRace",
    "MapFunc",
    "MaybeServed",
    "NameTaken",
    "NamespaceGoing",
    "Obj",
    "ProbeServer",
    "Probes",
    "Rediscovery",
    "Request",
    "Result",
    "ServedResource",
    "ServingCertificate",
    "SharedInformers",
    "SystemClock",
    "Transform",
    "VocabularyPath",
    "by_namespace",
    "default_identity",
    "discover",
    "errors",
    "for_cache",
    "impersonating",
    "index_by_controller_uid",
    "load_config",
    "load_kubeconfig",
    "per_registry",
    "poke_on_not_found",
    "spec_or_metadata_changed",
]
