"""`discover`'s rules (discover/find.py): the pools the Global Router would find in the
imported EndpointSlices, and what it would skip, with why. One test per rule, each
failing when its guard goes."""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.api.mcs import Importer
from dynamo_pool_operator.discover.find import (
    Discovered,
    Endpoint,
    Mode,
    Skipped,
    endpoints_of,
    find,
)

NS = "dynamo"


def mcs_slice(
    service: str,
    cluster: str | None = "east",
    endpoints: list[tuple[str, bool | None]] | None = None,
    *,
    name: str | None = None,
    namespace: str = NS,
) -> dict[str, Any]:
    """An EndpointSlice as a standard MCS implementation imports it (Lighthouse's shape)."""
    labels = {
        "multicluster.kubernetes.io/service-name": service,
        "endpointslice.kubernetes.io/managed-by": "lighthouse-agent.submariner.io",
    }
    if cluster is not None:
        labels["multicluster.kubernetes.io/source-cluster"] = cluster
    eps: list[dict[str, Any]] = []
    for address, ready in endpoints if endpoints is not None else [("10.0.0.1", True)]:
        ep: dict[str, Any] = {"addresses": [address]}
        if ready is not None:
            ep["conditions"] = {"ready": ready}
        eps.append(ep)
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name or f"{service}-{cluster}",
            "namespace": namespace,
            "labels": labels,
        },
        "addressType": "IPv4",
        "endpoints": eps,
    }


def karmada_slice(
    service: str,
    member: str | None = "member1",
    endpoints: list[tuple[str, bool | None]] | None = None,
    *,
    label: str | None = None,
    work: str = "w1",
) -> dict[str, Any]:
    """An EndpointSlice as Karmada collects it onto its control plane."""
    s = mcs_slice(service, "x", endpoints, name=f"{member}-{service}")
    s["metadata"]["labels"] = {
        "kubernetes.io/service-name": label if label is not None else f"derived-{service}",
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.karmada.io",
        "work.karmada.io/permanent-id": "abc",
    }
    s["metadata"]["annotations"] = (
        {"work.karmada.io/namespace": f"karmada-es-{member}", "work.karmada.io/name": work}
        if member is not None
        else {}
    )
    return s


def work(member: str, name: str, *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": f"karmada-es-{member}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-03T00:00:00Z"
    return {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work", "metadata": meta}


def whys(found: Discovered) -> list[str]:
    return [s.why for s in found.skipped]


# ------------------------------------------------------------------ the pool key


def test_a_relay_slice_is_a_pool_keyed_by_cluster_namespace_and_dgd() -> None:
    found = find([mcs_slice("llama-pool-relay", "east", [("10.0.0.4", True)])])
    (pool,) = found.pools
    assert (pool.cluster, pool.namespace, pool.name) == ("east", NS, "llama")
    assert pool.key == "east/dynamo/llama"
    assert pool.relay.service == "llama-pool-relay"
    assert pool.relay.endpoints == (Endpoint("10.0.0.4", True),)


def test_the_same_pool_from_two_clusters_is_two_pools() -> None:
    found = find([mcs_slice("llama-pool-relay", "east"), mcs_slice("llama-pool-relay", "west")])
    assert [p.key for p in found.pools] == ["east/dynamo/llama", "west/dynamo/llama"]


def test_the_slices_of_one_service_from_one_cluster_are_merged() -> None:
    found = find(
        [
            mcs_slice("llama-pool-relay", endpoints=[("10.0.0.5", True)], name="a"),
            mcs_slice("llama-pool-relay", endpoints=[("10.0.0.4", False)], name="b"),
        ]
    )
    (pool,) = found.pools
    assert pool.relay.endpoints == (Endpoint("10.0.0.4", False), Endpoint("10.0.0.5", True))


def test_an_address_in_two_slices_is_ready_when_either_says_so() -> None:
    slices = [
        mcs_slice("llama-pool-relay", endpoints=[("10.0.0.4", False)], name="a"),
        mcs_slice("llama-pool-relay", endpoints=[("10.0.0.4", True)], name="b"),
    ]
    for order in (slices, slices[::-1]):
        assert find(order).pools[0].relay.endpoints == (Endpoint("10.0.0.4", True),)


# ------------------------------------------------------------------ live


def test_live_while_a_relay_endpoint_is_ready() -> None:
    found = find([mcs_slice("llama-pool-relay", endpoints=[("1.1.1.1", False), ("1.1.1.2", True)])])
    assert found.pools[0].live
    assert not any("not live" in p for p in found.pools[0].problems)
    assert found.skipped == ()


def test_no_ready_relay_endpoint_is_not_live_and_skipped_with_why() -> None:
    found = find([mcs_slice("llama-pool-relay", endpoints=[("1.1.1.1", False)])])
    (pool,) = found.pools
    assert not pool.live
    assert any("no ready relay endpoint" in p for p in pool.problems)
    assert found.skipped == (
        Skipped(
            NS, "llama-pool-relay", "no ready relay endpoint: pool east/dynamo/llama is not live"
        ),
    )


def test_a_relay_with_no_endpoints_is_not_live() -> None:
    found = find([mcs_slice("llama-pool-relay", endpoints=[])])
    (pool,) = found.pools
    assert not pool.live
    assert pool.problems[0] == "llama-pool-relay has no endpoints: not live"


def test_an_endpoint_without_a_ready_condition_counts_as_ready() -> None:
    # The EndpointSlice API: a nil `ready` is to be read as true.
    assert endpoints_of(mcs_slice("x", endpoints=[("1.1.1.1", None)])) == [
        Endpoint("1.1.1.1", True)
    ]


def test_each_address_of_an_endpoint_is_listed() -> None:
    s = mcs_slice("x", endpoints=[])
    s["endpoints"] = [{"addresses": ["1.1.1.1", "1.1.1.2"], "conditions": {"ready": False}}]
    assert endpoints_of(s) == [Endpoint("1.1.1.1", False), Endpoint("1.1.1.2", False)]


# ------------------------------------------------------------------ frontends


def test_the_frontend_of_the_same_cluster_and_namespace_belongs_to_the_pool() -> None:
    found = find(
        [
            mcs_slice("llama-pool-relay", "east"),
            mcs_slice("llama-frontend", "east", [("10.96.0.9", True)]),
            mcs_slice("llama-frontend", "west", [("10.97.0.9", True)]),
            mcs_slice("llama-pool-relay", "west"),
        ]
    )
    east, west = found.pools
    assert [(f.service, f.endpoints) for f in east.frontends] == [
        ("llama-frontend", (Endpoint("10.96.0.9", True),))
    ]
    assert [f.endpoints for f in west.frontends] == [(Endpoint("10.97.0.9", True),)]
    assert east.problems == west.problems == ()


def test_a_pool_without_its_frontend_says_so() -> None:
    (pool,) = find([mcs_slice("llama-pool-relay")]).pools
    assert pool.frontends == ()
    assert pool.problems == (
        "no llama-frontend imported from cluster east: the router finds no frontend for this pool",
    )


def test_a_frontend_without_a_ready_endpoint_is_a_problem_not_a_skip() -> None:
    found = find(
        [mcs_slice("llama-pool-relay"), mcs_slice("llama-frontend", endpoints=[("1.1.1.1", False)])]
    )
    assert found.pools[0].live
    assert found.pools[0].problems == ("frontend llama-frontend has no ready endpoint",)
    assert found.skipped == ()


def test_a_frontend_without_a_relay_is_skipped() -> None:
    found = find([mcs_slice("llama-frontend", "east"), mcs_slice("llama-pool-relay", "west")])
    assert (
        Skipped(
            NS,
            "llama-frontend",
            "a frontend without a relay: no llama-pool-relay imported from cluster east (the "
            "router finds a pool by its relay)",
        )
        in found.skipped
    )
    (pool,) = found.pools
    assert pool.cluster == "west"
    assert pool.frontends == ()


def test_a_frontend_in_another_namespace_is_not_the_pools() -> None:
    found = find([mcs_slice("llama-pool-relay"), mcs_slice("llama-frontend", namespace="other")])
    assert found.pools[0].frontends == ()
    assert [s.namespace for s in found.skipped] == ["other"]


# ------------------------------------------------------------------ what is skipped


def test_a_slice_without_the_source_cluster_label_is_skipped() -> None:
    found = find([mcs_slice("llama-pool-relay", None, name="s1")])
    assert found.pools == ()
    assert found.skipped == (
        Skipped(
            NS,
            "llama-pool-relay",
            "EndpointSlice s1 has no multicluster.kubernetes.io/source-cluster label: the "
            "router cannot tell which cluster it came from",
        ),
    )


def test_a_service_name_without_the_suffix_is_skipped() -> None:
    found = find([mcs_slice("llama-relay")])
    assert found.pools == ()
    assert whys(found) == [
        "not a pool's Service: the name ends in neither -pool-relay nor -frontend"
    ]


def test_the_bare_suffix_is_no_pool() -> None:
    found = find([mcs_slice("-pool-relay"), mcs_slice("-frontend")])
    assert found.pools == ()
    assert len(found.skipped) == 2


def test_a_slice_that_is_no_import_is_not_read() -> None:
    # The router lists by the service-name label: a local Service's slice is not an import.
    local = mcs_slice("llama-pool-relay")
    del local["metadata"]["labels"]["multicluster.kubernetes.io/service-name"]
    local["metadata"]["labels"]["kubernetes.io/service-name"] = "llama-pool-relay"
    assert find([local]) == Discovered()


def test_skipped_entries_are_sorted_and_not_repeated() -> None:
    found = find([mcs_slice("zz"), mcs_slice("aa", name="a1"), mcs_slice("aa", name="a2")])
    assert [s.service for s in found.skipped] == ["aa", "zz"]


# ------------------------------------------------------------------ Karmada


def test_karmada_derived_slices_are_keyed_by_the_member() -> None:
    found = find(
        [
            karmada_slice("llama-pool-relay", "member1", [("10.1.0.4", True)]),
            karmada_slice("llama-frontend", "member1", [("10.1.0.9", True)]),
        ],
        Mode.KARMADA,
    )
    (pool,) = found.pools
    assert (pool.cluster, pool.name, pool.live) == ("member1", "llama", True)
    assert pool.relay.service == "llama-pool-relay"
    assert [f.service for f in pool.frontends] == ["llama-frontend"]
    assert pool.problems == ()


def test_karmada_reads_only_the_slices_karmadas_controller_manages() -> None:
    mcs = mcs_slice("llama-pool-relay")
    theirs = karmada_slice("llama-pool-relay")
    theirs["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] = "someone-else"
    assert find([mcs, theirs], Mode.KARMADA) == Discovered()
    # ... and standard MCS does not read Karmada's.
    assert find([karmada_slice("llama-pool-relay")], Mode.MCS) == Discovered()


def test_karmada_slice_without_the_derived_prefix_is_skipped() -> None:
    found = find([karmada_slice("llama-pool-relay", label="llama-pool-relay")], Mode.KARMADA)
    assert found.pools == ()
    assert whys(found) == [
        "EndpointSlice member1-llama-pool-relay is Karmada's but labelled "
        "kubernetes.io/service-name='llama-pool-relay', not derived-<service>"
    ]


def test_karmada_slice_without_the_work_namespace_is_skipped() -> None:
    found = find([karmada_slice("llama-pool-relay", None)], Mode.KARMADA)
    assert found.pools == ()
    assert len(found.skipped) == 1
    assert "no work.karmada.io/namespace annotation" in found.skipped[0].why
    assert found.skipped[0].service == "llama-pool-relay"


def test_karmada_work_namespace_must_be_an_execution_space() -> None:
    s = karmada_slice("llama-pool-relay")
    s["metadata"]["annotations"]["work.karmada.io/namespace"] = "default"
    found = find([s], Mode.KARMADA)
    assert found.pools == ()
    assert "(default)" in found.skipped[0].why


def test_karmada_works_point_out_a_slice_whose_work_is_gone() -> None:
    slices = [
        karmada_slice("llama-pool-relay", work="w1"),
        karmada_slice("llama-frontend", work="w2"),
    ]
    found = find(slices, Mode.KARMADA, [work("member1", "w2")])
    (pool,) = found.pools
    assert pool.live  # the router does not read Works: the pool stays as it sees it
    assert pool.problems == (
        "llama-pool-relay: its Work karmada-es-member1/w1 is gone or going, yet its slices "
        "stay (Karmada keeps them after a member fails) and the router reads them",
    )


def test_karmada_a_work_being_deleted_counts_as_gone() -> None:
    found = find(
        [karmada_slice("llama-pool-relay", work="w1"), karmada_slice("llama-frontend", work="w1")],
        Mode.KARMADA,
        [work("member1", "w1", deleting=True)],
    )
    assert len(found.pools[0].problems) == 2


def test_karmada_without_works_read_nothing_is_said_of_them() -> None:
    found = find([karmada_slice("llama-pool-relay"), karmada_slice("llama-frontend")], Mode.KARMADA)
    assert found.pools[0].problems == ()


# ------------------------------------------------------------------ who made the slice


def managed(slice_: dict[str, Any], manager: str | None) -> dict[str, Any]:
    """`slice_` with its `endpointslice.kubernetes.io/managed-by` set to `manager` (None:
    without the label)."""
    labels = slice_["metadata"]["labels"]
    labels.pop("endpointslice.kubernetes.io/managed-by", None)
    if manager is not None:
        labels["endpointslice.kubernetes.io/managed-by"] = manager
    return slice_


KUBERNETES_MADE = (
    "is managed by {manager}: Kubernetes' own controllers copy a Service's (or an "
    "Endpoints') labels onto the slices they make, so anyone who may create a Service can "
    "make one carrying the import labels; an implementation's import never is"
)


@pytest.mark.parametrize(
    "manager", ["endpointslice-controller.k8s.io", "endpointslicemirroring-controller.k8s.io"]
)
def test_a_slice_kubernetes_made_is_no_import_whatever_its_labels(manager: str) -> None:
    # A Service author's labels, copied by Kubernetes onto her Service's slice.
    forged = managed(mcs_slice("x-pool-relay", "prod-west", name="innocent-abcde"), manager)
    found = find([forged, mcs_slice("x-frontend", "prod-west")])
    assert found.pools == ()
    assert (
        Skipped(
            NS,
            "x-pool-relay",
            "EndpointSlice innocent-abcde " + KUBERNETES_MADE.format(manager=manager),
        )
        in found.skipped
    )


def test_a_slice_kubernetes_made_is_refused_on_the_karmada_fallback_too() -> None:
    forged = managed(karmada_slice("x-pool-relay"), "endpointslicemirroring-controller.k8s.io")
    found = find([forged], Mode.KARMADA_DERIVED)
    assert found.pools == ()
    assert whys(found) == [
        "EndpointSlice member1-x-pool-relay "
        + KUBERNETES_MADE.format(manager="endpointslicemirroring-controller.k8s.io")
    ]


def test_an_implementation_named_takes_only_the_slices_it_manages() -> None:
    theirs = mcs_slice("llama-pool-relay", name="s1")
    other = managed(
        mcs_slice("qwen-pool-relay", name="s2"), "endpointslice-mesh-controller.cilium.io"
    )
    found = find([theirs, other], implementation=Importer.LIGHTHOUSE)
    assert [p.key for p in found.pools] == ["east/dynamo/llama"]
    assert whys(found) == [
        "EndpointSlice s2 is managed by endpointslice-mesh-controller.cilium.io, not "
        "lighthouse-agent.submariner.io: not imported by lighthouse (--implementation "
        "lighthouse)"
    ]
    assert [p.key for p in find([theirs, other]).pools] == ["east/dynamo/llama", "east/dynamo/qwen"]


# ------------------------------------------------------------------ Karmada's older slices


def legacy_slice(service: str, member: str = "member1") -> dict[str, Any]:
    """A slice as Karmada before v1.15.0 (v1.14.4, v1.13.7) collects it: no managed-by."""
    return managed(karmada_slice(service, member), None)


def test_the_karmada_fallback_reads_derived_slices_without_a_manager() -> None:
    found = find(
        [legacy_slice("llama-pool-relay"), legacy_slice("llama-frontend")], Mode.KARMADA_DERIVED
    )
    (pool,) = found.pools
    assert (pool.key, pool.live) == ("member1/dynamo/llama", True)
    assert [f.service for f in pool.frontends] == ["llama-frontend"]
    assert pool.problems == (
        "found by kubernetes.io/service-name=derived-<service> alone: its slices carry no "
        "endpointslice.kubernetes.io/managed-by=endpointslice-controller.karmada.io, which "
        "the router selects on (Karmada sets it from v1.15.0, v1.14.4 and v1.13.7): the "
        "router does not see this pool until Karmada is upgraded",
    )
    # ... and the primary path does not see them, as the router does not.
    assert find([legacy_slice("llama-pool-relay")], Mode.KARMADA) == Discovered()


def test_the_karmada_fallback_reads_only_derived_names_and_no_other_manager() -> None:
    local = legacy_slice("llama-pool-relay")
    local["metadata"]["labels"]["kubernetes.io/service-name"] = "llama-pool-relay"
    dispatched = managed(
        legacy_slice("qwen-pool-relay"), "endpointslice-dispatch-controller.karmada.io"
    )
    found = find([local, dispatched], Mode.KARMADA_DERIVED)
    assert found.pools == ()
    assert whys(found) == [
        "EndpointSlice member1-qwen-pool-relay is managed by "
        "endpointslice-dispatch-controller.karmada.io: Karmada before v1.15.0 sets no "
        "manager on the slices it collects, and from then on endpointslice-controller.karmada.io"
    ]


# ------------------------------------------------------------------ the frontend's name


def test_a_frontend_not_named_dgd_frontend_is_pointed_out() -> None:
    found = find([mcs_slice("llama-pool-relay"), mcs_slice("llama-api")])
    (pool,) = found.pools
    assert pool.frontends == ()
    assert pool.problems == (
        "no llama-frontend imported from cluster east: the router finds no frontend for this pool",
        "llama-api is imported from cluster east beside this pool but is not named "
        "llama-frontend: if it is the pool's frontend, the router will not find it (it finds a "
        "frontend by the -frontend suffix: name the DGD's frontend component Frontend)",
    )


def test_a_second_frontend_beside_dgd_frontend_is_pointed_out_too() -> None:
    found = find(
        [mcs_slice("llama-pool-relay"), mcs_slice("llama-frontend"), mcs_slice("llama-chat")]
    )
    assert [p.split(" is imported")[0] for p in found.pools[0].problems] == ["llama-chat"]


def test_a_misnamed_frontend_belongs_to_the_longest_pool_name_it_starts_with() -> None:
    found = find(
        [
            mcs_slice("llama-pool-relay"),
            mcs_slice("llama-frontend"),
            mcs_slice("llama-big-pool-relay"),
            mcs_slice("llama-big-frontend"),
            mcs_slice("llama-big-api"),
        ]
    )
    llama, big = found.pools
    assert llama.problems == ()
    assert [p.split(" is imported")[0] for p in big.problems] == ["llama-big-api"]


def test_a_service_of_another_cluster_or_namespace_is_not_the_pools_frontend() -> None:
    found = find(
        [
            mcs_slice("llama-pool-relay"),
            mcs_slice("llama-frontend"),
            mcs_slice("llama-api", "west"),
            mcs_slice("llama-api", namespace="other"),
            mcs_slice("llamas-api"),
        ]
    )
    assert found.pools[0].problems == ()


# ------------------------------------------------------------------ imports without slices


def service_import(
    service: str,
    slices: str | None = "Absent",
    clusters: tuple[str, ...] = ("east",),
    *,
    namespace: str = NS,
) -> dict[str, Any]:
    """A ServiceImport as an implementation writes it (mcs-api v0.5.1+ status)."""
    status: dict[str, Any] = {"clusters": [{"cluster": c} for c in clusters]}
    if slices is not None:
        status["endpointSliceObjects"] = slices
    return {
        "apiVersion": "multicluster.x-k8s.io/v1beta1",
        "kind": "ServiceImport",
        "metadata": {"name": service, "namespace": namespace},
        "spec": {"type": "ClusterSetIP", "ports": [{"port": 8000, "protocol": "TCP"}]},
        "status": status,
    }


NO_SLICES = (
    "the implementation writes no EndpointSlices for this import; the router cannot see it "
    "(its ServiceImport says status.endpointSliceObjects: Absent)"
)


def test_a_relay_import_without_slices_is_a_problem_of_its_pool() -> None:
    found = find([], imports=[service_import("llama-pool-relay", clusters=("east", "west"))])
    assert [(p.key, p.live) for p in found.pools] == [
        ("east/dynamo/llama", False),
        ("west/dynamo/llama", False),
    ]
    assert found.pools[0].problems[0] == f"llama-pool-relay: {NO_SLICES}"
    assert not any("has no endpoints" in p for p in found.pools[0].problems)


def test_a_frontend_import_without_slices_is_a_problem_of_its_pool() -> None:
    found = find(
        [mcs_slice("llama-pool-relay")],
        imports=[service_import("llama-frontend"), service_import("llama-pool-relay", "Present")],
    )
    (pool,) = found.pools
    assert pool.live
    assert pool.problems == (f"llama-frontend: {NO_SLICES}",)


def test_an_import_without_slices_and_without_a_cluster_is_skipped() -> None:
    found = find([], imports=[service_import("llama-pool-relay", clusters=())])
    assert found.pools == ()
    assert found.skipped == (
        Skipped(
            NS,
            "llama-pool-relay",
            f"{NO_SLICES}, and it names no exporting cluster, so there is no pool key",
        ),
    )


@pytest.mark.parametrize("slices", ["Present", None])
def test_an_import_with_slices_or_saying_nothing_changes_nothing(slices: str | None) -> None:
    plain = find([mcs_slice("llama-pool-relay"), mcs_slice("llama-frontend")])
    imports = [service_import("llama-pool-relay", slices), service_import("llama-frontend", slices)]
    slices = [mcs_slice("llama-pool-relay"), mcs_slice("llama-frontend")]
    assert find(slices, imports=imports) == plain


def test_an_import_of_another_namespace_or_name_is_not_the_pools() -> None:
    found = find(
        [mcs_slice("llama-pool-relay"), mcs_slice("llama-frontend")],
        imports=[service_import("llama-frontend", namespace="other"), service_import("redis")],
    )
    assert found.pools[0].problems == ()
    assert found.skipped == ()
