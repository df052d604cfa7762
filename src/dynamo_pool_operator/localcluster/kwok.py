"""Nodes and pods for the local control plane: kwok, its stages, and a scheduler stand-in.

kwok (`sigs.k8s.io/kwok`) plays the kubelet for Nodes annotated `kwok.x-k8s.io/node:
fake`: it fills their status, renews their Leases, and moves their Pods through the
lifecycle that its *stages* describe. v0.8.0 embeds no stages, so the ones here are
ours: the smallest set under which a Deployment behaves as on a real cluster.

- node-initialize: a new Node becomes Ready with addresses, capacity and node info;
- node-heartbeat: a Ready Node's conditions are refreshed now and then (kwok renews
  the Node's Lease itself, so the status can be refreshed rarely, as a kubelet with
  leases does);
- pod-ready: a scheduled, pending Pod gets an IP from the pod CIDR, every container
  running and every condition True, so its EndpointSlice endpoint is ready;
- pod-complete: a running Pod owned by a Job finishes with exit code 0;
- pod-delete: a Pod being deleted is removed at once (no kubelet grace period), which
  is what lets a Deployment scale down and a namespace finish terminating.

What this world does *not* do (docs/testing.md): readiness and liveness probes are
never run, so a Pod is Ready as soon as it is scheduled; no container runs, so an
image that does not exist or a command that crashes goes unnoticed.

There is no kube-scheduler either: a MutatingAdmissionPolicy sets `spec.nodeName` on
every Pod created without one. That is instant and needs no process, at the price of
ignoring node selectors, affinity, taints and resources (nothing here is short of
capacity, and the operator never reads where a pod runs).
"""

from __future__ import annotations

from typing import Any

import yaml

from dynamo_pool_operator.runtime import Client
from dynamo_pool_operator.runtime.objects import Resource

#: kwok manages the Nodes with this annotation, and only those.
NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
#: kwok's pod IPs come from here; outside the Service range (10.96.0.0/16).
POD_CIDR = "10.244.0.0/16"
NODE_IP = "127.0.0.1"
NODE_PREFIX = "kwok-node-"

_STAGE = {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage"}


def _jq(*requirements: tuple[str, str, tuple[str, ...]]) -> dict[str, Any]:
    """A selector ANDing jq requirements (key, operator, values). jq, not CEL: kwok's
    CEL environment cannot resolve the element types of lists (`exists` over
    `status.conditions` fails to compile), and a missing value is well defined here
    (it matches NotIn and DoesNotExist)."""
    return {
        "matchExpressions": [
            {"jq": {"key": k, "operator": op, **({"values": list(v)} if v else {})}}
            for k, op, v in requirements
        ]
    }


_READY = ('.status.conditions[]? | select(.type == "Ready") | .status', ("True",))
_ALIVE = (".metadata.deletionTimestamp", "DoesNotExist", ())


def _status_patch(template: str) -> list[dict[str, Any]]:
    return [{"patch": {"subresource": "status", "root": "status", "template": template}}]


def _stage(
    name: str, kind: str, selector: dict[str, Any], steps: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    spec = {"resourceRef": {"apiGroup": "v1", "kind": kind}, "selector": selector, **extra}
    spec["steps"] = steps
    return {**_STAGE, "metadata": {"name": name}, "spec": spec}


# The templates are Go text/template over the object, with kwok's functions (`Now`,
# `Quote`, `NodeIP`, `NodeIPWith`, `PodIPWith`; `NodeName` is kwok's --node-name, not
# the Node's). Every condition a Node
# reports, in the shape the node-lifecycle code reads.
_NODE_CONDITIONS = """\
{{ $now := Now | Quote }}
conditions:
{{ range $c := list
   (list "Ready" "True" "KubeletReady" "kwok plays the kubelet")
   (list "MemoryPressure" "False" "KubeletHasSufficientMemory" "no memory pressure")
   (list "DiskPressure" "False" "KubeletHasNoDiskPressure" "no disk pressure")
   (list "PIDPressure" "False" "KubeletHasSufficientPID" "no PID pressure")
   (list "NetworkUnavailable" "False" "RouteCreated" "routes need no creating") }}
- type: {{ index $c 0 }}
  status: {{ index $c 1 | Quote }}
  reason: {{ index $c 2 }}
  message: {{ index $c 3 | Quote }}
  lastHeartbeatTime: {{ $now }}
  lastTransitionTime: {{ $now }}
{{ end }}
"""

_NODE_INITIALIZE = (
    _NODE_CONDITIONS
    + """\
addresses:
- type: InternalIP
  address: {{ NodeIP | Quote }}
- type: Hostname
  address: {{ .metadata.name | Quote }}
capacity: {cpu: "64", memory: 512Gi, pods: "250"}
allocatable: {cpu: "64", memory: 512Gi, pods: "250"}
nodeInfo:
  architecture: amd64
  operatingSystem: linux
  kubeletVersion: kwok
  kubeProxyVersion: kwok
  containerRuntimeVersion: kwok
  kernelVersion: kwok
  osImage: kwok
  machineID: ""
  systemUUID: ""
  bootID: ""
phase: Running
"""
)

_POD_READY = """\
{{ $now := Now | Quote }}
{{ $ip := PodIPWith .spec.nodeName (or .spec.hostNetwork false) (or .metadata.uid "")
   (or .metadata.name "") (or .metadata.namespace "") }}
phase: Running
startTime: {{ $now }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
hostIPs:
- ip: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ $ip | Quote }}
podIPs:
- ip: {{ $ip | Quote }}
conditions:
{{ range $t := list "PodScheduled" "Initialized" "ContainersReady" "Ready" }}
- type: {{ $t }}
  status: "True"
  lastTransitionTime: {{ $now }}
{{ end }}
{{ range .spec.readinessGates }}
- type: {{ .conditionType | Quote }}
  status: "True"
  lastTransitionTime: {{ $now }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  started: true
  restartCount: 0
  state: {running: {startedAt: {{ $now }}}}
{{ end }}
{{ with .spec.initContainers }}
initContainerStatuses:
{{ range . }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  restartCount: 0
  state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now }},
    finishedAt: {{ $now }}}}
{{ end }}
{{ end }}
"""

_POD_COMPLETE = """\
{{ $now := Now | Quote }}
phase: Succeeded
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: false
  started: false
  restartCount: 0
  state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now }},
    finishedAt: {{ $now }}}}
{{ end }}
"""


def stages() -> list[dict[str, Any]]:
    """The Stage objects kwok runs with (its `--config`)."""
    ready_key, true = _READY
    return [
        _stage(
            "node-initialize",
            "Node",
            _jq((ready_key, "NotIn", true)),
            _status_patch(_NODE_INITIALIZE),
        ),
        _stage(
            "node-heartbeat",
            "Node",
            _jq((ready_key, "In", true)),
            _status_patch(_NODE_CONDITIONS),
            # kwok renews the Node's Lease (`--node-lease-duration-seconds`); the
            # status only needs a refresh now and then, as with a leasing kubelet.
            delay={"durationMilliseconds": 300_000, "jitterDurationMilliseconds": 360_000},
        ),
        _stage(
            "pod-ready",
            "Pod",
            _jq(_ALIVE, (".spec.nodeName", "Exists", ()), (".status.phase", "In", ("Pending",))),
            _status_patch(_POD_READY),
        ),
        _stage(
            "pod-complete",
            "Pod",
            _jq(
                _ALIVE,
                (".status.phase", "In", ("Running",)),
                (".metadata.ownerReferences[]?.kind", "In", ("Job",)),
            ),
            _status_patch(_POD_COMPLETE),
        ),
        _stage(
            "pod-delete",
            "Pod",
            _jq((".metadata.deletionTimestamp", "Exists", ())),
            [{"delete": True}],
        ),
    ]


def stages_yaml() -> str:
    return yaml.safe_dump_all(stages(), sort_keys=False)


def node(index: int) -> dict[str, Any]:
    """A Node kwok manages; it fills the status."""
    key, value = NODE_ANNOTATION
    name = f"{NODE_PREFIX}{index}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {key: value},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "spec": {},
    }


SCHEDULER_POLICY = "dpo-test-scheduler"


def scheduler(nodes: int) -> list[dict[str, Any]]:
    """A MutatingAdmissionPolicy and its binding that put every unscheduled Pod on the
    first of the `nodes` kwok Nodes.

    Only the first: at admission a ReplicaSet's pods have no name yet (only the
    `generateName` they share), and neither CEL nor the admission request offers any
    value that differs between them (the request uid is not exposed), so nothing can
    spread them. The other Nodes exist for whatever lists Nodes; the operator never
    reads where a pod runs.
    """
    if nodes < 1:
        raise ValueError("a scheduler needs at least one node")
    pick = f"'{NODE_PREFIX}0'"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": SCHEDULER_POLICY},
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ]
            },
            "matchConditions": [
                {
                    "name": "unscheduled",
                    "expression": "!has(object.spec.nodeName) || object.spec.nodeName == ''",
                }
            ],
            "mutations": [
                {
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": {
                        "expression": f"Object{{spec: Object.spec{{nodeName: {pick}}}}}"
                    },
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": SCHEDULER_POLICY},
        "spec": {"policyName": SCHEDULER_POLICY},
    }
    return [policy, binding]


# ---------------------------------------------------------------- reading the result
PODS = Resource("", "v1", "pods", "Pod")


def running(pod: dict[str, Any]) -> bool:
    """Running, Ready and not being deleted: what kwok's pod-ready stage makes of a pod."""
    status = pod.get("status") or {}
    return (
        not pod["metadata"].get("deletionTimestamp")
        and status.get("phase") == "Running"
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
    )


async def running_pods(client: Client, namespace: str, label_selector: str) -> list[str]:
    """Names of the running pods matching `label_selector`, sorted."""
    pods = (await client.list(PODS, namespace, label_selector=label_selector)).items
    return sorted(p["metadata"]["name"] for p in pods if running(p))
