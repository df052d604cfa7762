"""Fuzzing the DGD read-model (api/dgd.py) and the export plan (pool/exports/plan.py).

`tests/unit/pool/exports/test_plan.py` already drives `plan` with hypothesis, over pools
built from a 7-letter alphabet, a handful of DGD names, v1beta1 only, and checks that
the plan never touches a foreign or terminating export, creates only valid names once,
covers every wanted name and that a second pass writes nothing. This file does not
repeat those; it widens the input to what a cluster can really hold and adds the
properties those tests cannot state:

- raw DGD objects of both served shapes (v1beta1 `components[]`, v1alpha1
  `services{}`), with missing fields, junk entries, unicode, huge, empty, upper-case,
  dotted and digit-first component names, DGD names up to and past the 63/55-character
  limits, and `decide`'s real decision as well as arbitrary ones;
- an oracle written from docs/exports.md and docs/crd.md (not from the code): which components are
  frontends, what their Services are called, which names are valid Service names
  (DNS-1035, at most 63; at most 55 with Karmada), when ClusterIDMismatch is due;
- every invalid or too-long name is skipped with its documented warning, never exported;
- the plan is deterministic and does not depend on the order of the cache;
- carried out, then planned again on the new state, it writes nothing (over the wider
  inputs, including v1alpha1 pools and Karmada skips);
- `relevant_exports` never reaches into another namespace;
- a frontend whose Service is someone else's (not controlled by the DGD, nor by a
  DynamoComponentDeployment the DGD controls) is never exported nor kept: skipped with
  `ForeignService`, and an export of ours of its name withdrawn.

Budget: modest example counts keep the unit tier fast; DPO_FUZZ_EXAMPLES=N runs N
examples per property instead.
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dynamo_pool_operator.api.dgd import Pool, pool_from_object
from dynamo_pool_operator.api.mcs import ClusterID, Implementation, serviceexports
from dynamo_pool_operator.api.relay import Relay, RelayDefaults, relay_from_object
from dynamo_pool_operator.pool.exports.feature import relevant_exports
from dynamo_pool_operator.pool.exports.plan import Warn, plan
from dynamo_pool_operator.pool.model import Contribution as Plan
from dynamo_pool_operator.pool.model import Verb
from dynamo_pool_operator.pool.plan import Reason, decide
from dynamo_pool_operator.pool.plan import decision as make_decision
from tests.unit.fuzzing import budget
from tests.unit.pool.exports.test_plan import run_scenario as run

SE = serviceexports("v1alpha1")

# ------------------------------------------------------------------- the oracle (the docs)
NS = "team"
OTHER_NS = "elsewhere"
RELAY_UID = "relay-uid"
DGD_LABEL = "nvidia.com/dynamo-graph-deployment-name"  # docs/exports.md, 'What is exported'
WORKER_TYPES = {"worker", "prefill", "decode"}  # docs/crd.md, `NoWorkers`
V1BETA1, V1ALPHA1 = "nvidia.com/v1beta1", "nvidia.com/v1alpha1"
SERVICE_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")  # DNS-1035 label, a Service name
SERVICE_NAME_MAX = 63
KARMADA_MAX = 55  # "derived-" + name is a label value of at most 63 (docs/exports.md)
WRITES = {Verb.CREATE, Verb.APPLY, Verb.WITHDRAW}
DEFAULTS = RelayDefaults(image="relay:1", port=7000)


def valid_service_name(name: str) -> bool:
    return len(name) <= SERVICE_NAME_MAX and SERVICE_NAME.fullmatch(name) is not None


def service_of(dgd: str, component: str) -> str:
    """`<DGD name>-<component name>`, lowercased, with `.` replaced by `-`
    (docs/exports.md, 'What is exported')."""
    return f"{dgd}-{component}".lower().replace(".", "-")


def frontend_names(obj: Mapping[str, Any]) -> list[str] | None:
    """The frontend component names of a DGD in the order written, or None
    for an apiVersion the oracle does not speak."""
    api = obj.get("apiVersion", V1BETA1)
    raw_spec = obj.get("spec")
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    out: list[str] = []
    if api == V1ALPHA1:
        services = spec.get("services")
        for name, entry in services.items() if isinstance(services, Mapping) else ():
            if not (isinstance(name, str) and name and isinstance(entry, Mapping)):
                continue
            ctype, sub = entry.get("componentType"), entry.get("subComponentType")
            if ctype == "frontend" and sub not in WORKER_TYPES:
                out.append(name)
        return out
    if api != V1BETA1:
        return None
    components = spec.get("components")
    for entry in components if isinstance(components, list) else ():
        if not isinstance(entry, Mapping):
            continue
        name = entry.get("name")
        if isinstance(name, str) and name and entry.get("type") == "frontend":
            out.append(name)
    return out


def is_ours(export: Mapping[str, Any]) -> bool:
    """The relay is the export's controller (controller: true, our UID): docs/exports.md,
    'What is exported'."""
    refs = (export.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("controller") is True and r.get("uid") == RELAY_UID for r in refs)


def being_deleted(export: Mapping[str, Any]) -> bool:
    return bool((export.get("metadata") or {}).get("deletionTimestamp"))


# --------------------------------------------------------------------------- strategies
def one_in(n: int) -> st.SearchStrategy[bool]:
    """True about once in `n` draws (st.integers favours its bounds, so `== 0` would not)."""
    return st.sampled_from([False] * (n - 1) + [True])


def pick(*choices: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """One of `choices`, each equally likely (`st.one_of` flattens nested unions, so a
    union of five junk types would outweigh the one realistic choice)."""
    return st.sampled_from(choices).flatmap(lambda chosen: chosen)


UNICODE = st.text(st.characters(codec="utf-8"), max_size=8)
# Component names: mostly what people write, then everything Dynamo's CRD would admit.
ODD_NAMES = [
    "", "Frontend", "FRONTEND", "fe.a", "fe-a", "fe..a", "1st", "9", "-x", "x-", ".x",
    "pool-relay", "Pool.Relay", "K", "\u212a", "\u0130", "\u00df", "fe\n", "f_e", "fe a",
]  # fmt: skip
PLAIN_NAMES = st.text("abcdefghij0123456789-", min_size=1, max_size=10)
COMPONENT_NAMES = pick(
    PLAIN_NAMES,
    PLAIN_NAMES,
    st.sampled_from(ODD_NAMES),
    st.text("abcXYZ019.-_ ", max_size=12),
    UNICODE,
    st.builds(lambda c, n: c * n, st.sampled_from("fF.-9"), st.integers(40, 300)),
    st.builds(lambda n: "f" * n, st.integers(30, 60)),  # around the 55/63 limits
)
JUNK = st.none() | st.booleans() | st.integers() | UNICODE | st.lists(st.integers(), max_size=2)
TYPES = st.sampled_from(
    ["frontend", "frontend", "worker", "prefill", "decode", "planner", "epp", "Frontend", ""]
)
GLOBAL = st.sampled_from([False, False, False, True, "true", 1, None])


def spec_of(
    field: str, value: st.SearchStrategy[Any], other: str, others: st.SearchStrategy[Any]
) -> st.SearchStrategy[Any]:
    """A spec whose components sit in `field` (its version's shape), now and then with
    `other` (the other version's shape, which is ignored) beside them or instead."""
    return pick(
        st.fixed_dictionaries({field: value}),
        st.fixed_dictionaries({field: value}),
        st.fixed_dictionaries({}, optional={field: value | JUNK, other: others}),
    )


def v1beta1_spec() -> st.SearchStrategy[Any]:
    usual = st.fixed_dictionaries(
        {"name": COMPONENT_NAMES, "type": TYPES},
        optional={"replicas": st.integers(0, 3), "globalDynamoNamespace": GLOBAL},
    )
    odd = st.fixed_dictionaries(
        {},
        optional={
            "name": COMPONENT_NAMES | JUNK,
            "type": TYPES | JUNK,
            "globalDynamoNamespace": JUNK,
        },
    )
    components = st.lists(pick(usual, usual, usual, odd, JUNK), max_size=6)
    services = st.dictionaries(UNICODE, st.just({"componentType": "frontend"}))
    return spec_of("components", components, "services", services)


def v1alpha1_spec() -> st.SearchStrategy[Any]:
    usual = st.fixed_dictionaries(
        {"componentType": TYPES},
        optional={
            "subComponentType": st.sampled_from(["prefill", "decode", "worker", "x"]),
            "globalDynamoNamespace": GLOBAL,
        },
    )
    odd = st.fixed_dictionaries(
        {},
        optional={"componentType": JUNK, "subComponentType": JUNK, "globalDynamoNamespace": JUNK},
    )
    services = st.dictionaries(COMPONENT_NAMES, pick(usual, usual, usual, odd, JUNK), max_size=6)
    components = st.lists(st.just({"name": "x", "type": "frontend"}), max_size=1)
    return spec_of("services", services, "components", components)


# DGD (= relay) names: object names the API server accepts (DNS-1123 subdomains, so dots
# are allowed) around the 44/52-character limits, and names it never would.
SUBDOMAIN_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-."
PLAIN_DGD_NAMES = st.builds(
    lambda head, tail: head + tail.rstrip("-"),
    st.sampled_from("abcdefghij"),
    st.text("abcdefghij0123456789-", max_size=11),
)
DGD_NAMES = pick(
    PLAIN_DGD_NAMES,
    PLAIN_DGD_NAMES,
    PLAIN_DGD_NAMES,
    st.text(SUBDOMAIN_CHARS, min_size=1, max_size=20).map(lambda s: s.strip("-.") or "d"),
    st.builds(lambda c, n: c * n, st.sampled_from("ab9"), st.integers(40, 60)),
    st.sampled_from(["pool", "llama", "a.b", "1pool", "pool-", "Pool"]),
    UNICODE,
)


@st.composite
def dgd_objects(draw: st.DrawFn, name: str) -> dict[str, Any]:
    api = draw(st.sampled_from([V1BETA1, V1ALPHA1, None]))
    obj: dict[str, Any] = {"kind": "DynamoGraphDeployment"}
    if api is not None:
        obj["apiVersion"] = api
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": "dgd-uid"}
    meta["resourceVersion"] = str(draw(st.integers(1, 10**6)))
    if draw(one_in(10)):
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    backend = draw(st.sampled_from([None, None, None, "kubernetes", "etcd", ""]))
    if backend is not None:
        meta["annotations"] = {"nvidia.com/dynamo-discovery-backend": backend}
    obj["metadata"] = meta
    if not draw(one_in(20)):  # sometimes no spec at all
        obj["spec"] = draw(v1alpha1_spec() if api == V1ALPHA1 else v1beta1_spec())
    return obj


OWNERS: st.SearchStrategy[tuple[str, tuple[dict[str, Any], ...]]] = st.sampled_from(
    [
        ("ours", ({"controller": True, "blockOwnerDeletion": True},)),
        ("ours-changed-ref", ({"controller": True, "name": "renamed"},)),
        ("ours-beside-another-owner", ({"kind": "ConfigMap", "uid": "cm"}, {"controller": True})),
        ("no-owner", ()),
        ("refers-to-us-not-controller", ({"controller": False},)),
        ("controller-as-string", ({"controller": "true"},)),
        ("another-relay", ({"controller": True, "uid": "other-relay", "name": "other"},)),
        ("another-kind", ({"controller": True, "uid": "d", "kind": "Deployment"},)),
        ("previous-incarnation", ({"controller": True, "uid": "old-relay-uid"},)),
    ]
)


@st.composite
def existing_exports(draw: st.DrawFn, dgd: str, candidates: list[str]) -> dict[str, dict[str, Any]]:
    wanted = st.sampled_from(candidates)  # most often an export the pool should have
    others = st.sampled_from([f"{dgd}-old", "unrelated", "a.b"])
    names = pick(wanted, wanted, wanted, others, DGD_NAMES)
    out: dict[str, dict[str, Any]] = {}
    for name in draw(st.lists(names, min_size=1, max_size=6, unique=True)):
        _, owners = draw(OWNERS)
        base = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoPoolRelay", "name": dgd}
        refs = [{**base, "uid": RELAY_UID, **o} for o in owners]
        meta: dict[str, Any] = {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{len(out)}",
            "resourceVersion": str(draw(st.integers(1, 99))),
        }
        if refs:
            meta["ownerReferences"] = refs
        label = draw(st.sampled_from([dgd, dgd, None, "other", ""]))
        if label is not None:
            meta["labels"] = {DGD_LABEL: label, "team": "x"}
        if draw(one_in(4)):
            meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
            meta["finalizers"] = ["multicluster.example/cleanup"]
        out[name] = {"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport"}
        out[name]["metadata"] = meta
    return out


CLUSTER_IDS = st.sampled_from(["east", "west", ""]) | UNICODE
CLUSTER_PROPERTIES = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "metadata": st.fixed_dictionaries(
                {}, optional={"uid": st.just("p-uid"), "resourceVersion": st.just("7")}
            )
        },
        optional={
            "spec": st.fixed_dictionaries({}, optional={"value": pick(CLUSTER_IDS, JUNK)}) | JUNK
        },
    ),
)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    dgd = draw(DGD_NAMES)
    raw = draw(dgd_objects(dgd))
    relay = relay_from_object(
        {
            "metadata": {"name": dgd, "namespace": NS, "uid": RELAY_UID, "generation": 1},
            "spec": draw(
                st.fixed_dictionaries(
                    {}, optional={"clusterId": pick(CLUSTER_IDS, CLUSTER_IDS, JUNK)}
                )
            ),
        },
        DEFAULTS,
    )
    pool = None if draw(one_in(10)) else pool_from_object(raw)
    decision = draw(
        pick(  # what the controller decides for this state, or any decision, so that
            # pools with names the controller would refuse are planned as published too
            st.just(decide(relay, pool, {}, default_discovery_backend="kubernetes")),
            st.just(make_decision(Reason.PUBLISHED, "fuzz")),
            st.just(make_decision(Reason.PUBLISHED, "fuzz")),
            st.sampled_from(list(Reason)).map(lambda r: make_decision(r, "fuzz")),
        )
    )
    fronts = frontend_names(raw) or []
    candidates = [f"{dgd}-pool-relay", *(service_of(dgd, n) for n in fronts)]
    return {
        "raw": raw,
        "relay": relay,
        "pool": pool,
        "decision": decision,
        "exports": draw(existing_exports(dgd, candidates)),
        "implementation": draw(st.sampled_from(["mcs", "karmada"])),
        "cluster_id": ClusterID(draw(st.booleans()), draw(CLUSTER_PROPERTIES), "about.k8s.io/v1"),
    }


# --------------------------------------------------------------------------- the read-model
@budget(60)
@given(DGD_NAMES.flatmap(dgd_objects))
def test_any_dgd_of_either_version_reads_to_exactly_its_frontends(raw: dict[str, Any]) -> None:
    pool = pool_from_object(raw)
    assert pool == pool_from_object(copy.deepcopy(raw)), "reading is deterministic"
    expected = frontend_names(raw)
    assert expected is not None
    assert [c.name for c in pool.frontends] == expected
    dgd = raw["metadata"]["name"]
    services = list(dict.fromkeys(service_of(dgd, n) for n in expected))
    assert list(pool.frontend_services) == services


# --------------------------------------------------------------------------- the plan
@budget(80)
@given(scenarios())
def test_any_plan_exports_only_valid_names_and_skips_the_rest_with_their_warning(
    s: dict[str, Any],
) -> None:
    p = run(s)
    relay, pool, exports = s["relay"], s["pool"], s["exports"]
    karmada = s["implementation"] == "karmada"
    limit = KARMADA_MAX if karmada else SERVICE_NAME_MAX
    publishing = s["decision"].keeps_pool and pool is not None  # held: as published

    for a in p.actions:
        if a.wanted:  # every export the pool should have: a valid Service name, in limit
            assert valid_service_name(a.name), a
            assert len(a.name) <= limit, a
        else:  # withdrawals: only an existing export this relay controls
            assert a.verb in {Verb.WITHDRAW, Verb.WAIT}, a
            assert a.name in exports, a
            assert is_ours(exports[a.name]), a
        if a.verb is Verb.CREATE:
            assert a.name not in exports, a
        else:
            assert a.live is exports[a.name], a
        if a.verb in {Verb.WITHDRAW, Verb.APPLY}:  # never a foreign one (never adopted)
            assert is_ours(exports[a.name]), a
            assert not being_deleted(exports[a.name]), a

    warned = {w.reason: w.message for w in p.advisories}
    skipped = {line.name: line.reason for line in p.lines}
    wanted = {a.name for a in p.actions if a.wanted}
    if not publishing:
        assert not wanted
        assert not p.advisories
        assert not p.lines
        return
    fronts = [service_of(relay.name, n) for n in frontend_names(s["raw"]) or []]
    for name in dict.fromkeys([f"{relay.name}-pool-relay", *fronts]):
        if not valid_service_name(name):
            assert skipped.get(name) == Warn.INVALID_SERVICE_NAME, name
            assert name in warned[Warn.INVALID_SERVICE_NAME]
            assert name not in wanted
        elif karmada and len(name) > KARMADA_MAX:
            assert skipped.get(name) == Warn.SERVICE_NAME_TOO_LONG, name
            assert name in warned[Warn.SERVICE_NAME_TOO_LONG]
            assert name not in wanted
        else:
            assert name in wanted, name
            assert name not in skipped
    assert (Warn.NO_FRONTEND in warned) == (not fronts)

    prop = s["cluster_id"].obj
    spec = prop.get("spec") if isinstance(prop, Mapping) else None
    value = spec.get("value") if isinstance(spec, Mapping) else None
    mismatch = (
        not karmada
        and s["cluster_id"].checked
        and isinstance(value, str)
        and value != ""
        and relay.cluster_id != ""  # an empty spec.clusterId takes the cluster's
        and value != relay.cluster_id
    )
    assert (Warn.CLUSTER_ID_MISMATCH in warned) == mismatch


def carry_out(p: Plan, exports: dict[str, Any], relay: Relay) -> dict[str, Any]:
    """What the API server holds after the executor wrote `p` (docs/exports.md: the
    export's label and controller reference, repaired in place)."""
    out = copy.deepcopy(exports)
    for a in p.actions:
        if a.verb is Verb.CREATE:
            out[a.name] = {
                "metadata": {
                    "name": a.name,
                    "namespace": NS,
                    "uid": f"new-{a.name}",
                    "resourceVersion": "1",
                    "labels": {DGD_LABEL: relay.name},
                    "ownerReferences": [relay.owner_reference()],
                }
            }
        elif a.verb is Verb.APPLY:
            meta = out[a.name]["metadata"]
            meta.setdefault("labels", {})[DGD_LABEL] = relay.name
            others = [r for r in meta.get("ownerReferences", []) if r.get("controller") is not True]
            meta["ownerReferences"] = [*others, relay.owner_reference()]
        elif a.verb is Verb.WITHDRAW:
            del out[a.name]
    return out


@budget(60)
@given(scenarios(), st.randoms(use_true_random=False))
def test_plan_is_deterministic_and_carried_out_then_planned_again_writes_nothing(
    s: dict[str, Any], rnd: random.Random
) -> None:
    first = run(s)
    assert run(s) == first, "the same input gives the same plan"
    # The cache's order (an informer's dict) must not matter either.
    shuffled = list(copy.deepcopy(s["exports"]).items())
    rnd.shuffle(shuffled)
    again = run(s, dict(shuffled))
    assert [(a.verb, a.name, a.fields, a.wanted) for a in again.actions] == [
        (a.verb, a.name, a.fields, a.wanted) for a in first.actions
    ]
    assert (again.advisories, again.lines) == (first.advisories, first.lines)
    # Idempotent: carried out, then planned on the new state, nothing is left to write.
    after = carry_out(first, s["exports"], s["relay"])
    second = run(s, after)
    assert [a for a in second.actions if a.verb in WRITES] == [], second.actions
    assert (second.advisories, second.lines) == (first.advisories, first.lines)


# --------------------------------------------------------------------------- relevant_exports
@budget(30)
@given(scenarios(), st.data())
def test_relevant_exports_never_reach_into_another_namespace(
    s: dict[str, Any], data: st.DataObject
) -> None:
    relay: Relay = s["relay"]
    pool: Pool | None = s["pool"]
    store: dict[tuple[str, str], dict[str, Any]] = {}
    both = st.sampled_from([(NS,), (OTHER_NS,), (NS, OTHER_NS)])
    for name, e in s["exports"].items():
        for ns in data.draw(both, label=f"namespaces holding {name}"):
            copied = copy.deepcopy(e)
            copied["metadata"]["namespace"] = ns
            store[ns, name] = copied
    controlled = [e for e in store.values() if is_ours(e)]  # the index spans namespaces
    got = relevant_exports(relay, pool, lambda n: store.get((NS, n)), controlled)
    for name, e in got.items():
        assert e is store[NS, name], name
    for (ns, name), e in store.items():
        if ns == NS and is_ours(e):
            assert name in got, name
    p = plan(
        relay,
        s["decision"],
        pool,
        got,
        implementation=Implementation(s["implementation"]),
        resource=SE,
        cluster_id=s["cluster_id"],
    )
    for a in p.actions:
        assert a.live is None or a.live["metadata"]["namespace"] == NS, a


# --------------------------------------------------------------------------- whose Service
# docs/exports.md, 'What is exported': exported only while the Service of the name exists
# and is the DGD's (controller: the DGD by uid, or a DCD whose controller is the DGD).
DGD_UID = "dgd-uid"  # dgd_objects' uid
SERVICE_OWNERS: list[tuple[str, bool]] = [
    ("dgd", True),
    ("dcd-of-the-dgd", True),
    ("none", False),
    ("dgd-not-controller", False),
    ("previous-dgd", False),
    ("deployment", False),
    ("dcd-of-another-dgd", False),
    ("dcd-unknown", False),
    ("dcd-replaced", False),
]


def owned_service(name: str, owner: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A Service `name` owned as `owner` says, and the DCD it names (if cached)."""
    dgd = {"apiVersion": V1BETA1, "kind": "DynamoGraphDeployment", "name": "x"}
    dcd_ref = {"apiVersion": V1ALPHA1, "kind": "DynamoComponentDeployment", "name": name}
    refs: dict[str, Any] = {
        "dgd": {**dgd, "uid": DGD_UID, "controller": True},
        "dgd-not-controller": {**dgd, "uid": DGD_UID},
        "previous-dgd": {**dgd, "uid": "old", "controller": True},
        "deployment": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "d"},
    }
    ref = refs.get(owner, {**dcd_ref, "uid": "dcd", "controller": True})
    if owner == "deployment":
        ref["controller"] = True
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"s-{name}"}
    if owner != "none":
        meta["ownerReferences"] = [ref]
    dcd = None
    if owner.startswith("dcd") and owner != "dcd-unknown":
        controller_uid = DGD_UID if owner != "dcd-of-another-dgd" else "another"
        dcd = {
            "metadata": {
                "name": name,
                "namespace": NS,
                "uid": "dcd" if owner != "dcd-replaced" else "dcd-2",
                "ownerReferences": [{**dgd, "uid": controller_uid, "controller": True}],
            }
        }
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta}, dcd


@budget(60)
@given(scenarios(), st.data())
def test_a_frontend_whose_service_is_someone_elses_is_never_exported(
    s: dict[str, Any], data: st.DataObject
) -> None:
    relay, pool = s["relay"], s["pool"]
    fronts = [service_of(relay.name, n) for n in frontend_names(s["raw"]) or []]
    relay_service = f"{relay.name}-pool-relay"
    services: dict[str, Any] = {}
    dcds: dict[str, Any] = {}
    theirs: set[str] = set()
    absent: set[str] = set()
    for name in dict.fromkeys(n for n in fronts if n != relay_service):
        owner, is_dgds = data.draw(st.sampled_from([*SERVICE_OWNERS, ("absent", False)]))
        if owner == "absent":
            absent.add(name)
            continue
        services[name], dcd = owned_service(name, owner)
        if dcd is not None:
            dcds[name] = dcd
        if not is_dgds:
            theirs.add(name)
    p = plan(
        relay,
        s["decision"],
        pool,
        s["exports"],
        implementation=Implementation(s["implementation"]),
        resource=SE,
        cluster_id=s["cluster_id"],
        services=services,
        component_deployments=dcds,
    )
    for a in p.actions:
        if a.name in theirs | absent:
            assert not a.wanted, a
            assert a.verb in {Verb.WITHDRAW, Verb.WAIT}, a
    if not (s["decision"].keeps_pool and pool is not None):
        assert not p.lines
        return
    lines = {line.name: line for line in p.lines}
    warned = [w.related["name"] for w in p.advisories if w.reason == Warn.FOREIGN_SERVICE]
    assert sorted(warned) == sorted(theirs)
    for name in theirs:
        assert lines[name].reason == "ForeignService", name
    for name in absent:  # an invalid or (Karmada) too long name says that instead
        if lines[name].state != "Skipped":
            assert (lines[name].state, lines[name].reason) == ("Pending", "ServiceNotFound")
    for name, export in s["exports"].items():
        if name in theirs | absent and is_ours(export) and not being_deleted(export):
            assert (Verb.WITHDRAW, name) in [(a.verb, a.name) for a in p.actions], name
