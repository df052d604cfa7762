"""Which cached exports a pass reads (pool/exports/feature.py `relevant_exports`), and
which Services and DCDs (`frontend_services`).

The exports this relay controls (by the controller index, filtered to its namespace)
and those named like a name it wants: nothing else can change its plan. The Services
named like a frontend in the relay's namespace and the DCDs they name as controller:
nothing else decides whose a frontend's Service is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dynamo_pool_operator.api.mcs import ClusterID, Implementation
from dynamo_pool_operator.pool.exports.feature import frontend_services, relevant_exports
from dynamo_pool_operator.pool.exports.plan import plan
from tests.unit.pool.exports.test_plan import (
    DCD_REF,
    DGD_REF,
    DGD_UID,
    FE,
    NS,
    OTHER_NS,
    PUBLISHED,
    RELAY_EXPORT,
    SE,
    WORKER,
    C,
    F,
    fe,
    foreign,
    make_pool,
    make_relay,
    ours,
    service,
    verbs,
)
from tests.unit.pool.exports.test_plan import dcd as make_dcd
from tests.unit.pool.support import dgds_services


def cache(*objs: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """A namespace's-worth of cached exports, keyed like the informer store."""
    return {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objs}


def lookup_in(store: Mapping[tuple[str, str], Mapping[str, Any]], namespace: str = NS) -> Any:
    return lambda name: store.get((namespace, name))


def published_plan(relay: Any, pool: Any, got: Any) -> Any:
    """The plan of a published pool exported through an MCS implementation, its
    frontends' Services the DGD's."""
    return plan(
        relay,
        PUBLISHED,
        pool,
        got,
        implementation=Implementation.MCS,
        cluster_id=ClusterID(),
        resource=SE,
        services=dgds_services(pool),
    )


def test_relevant_exports_are_ours_by_name_plus_those_named_like_wanted_ones() -> None:
    relay, pool = make_relay(), make_pool(fe("Frontend"), fe("my_fe"), WORKER)
    mine_old = ours("pool-old")
    users_fe = foreign(FE, "user-no-owner")
    users_relay = foreign(RELAY_EXPORT, "another-relay")
    invalid = ours("pool-my_fe")
    store = cache(mine_old, users_fe, users_relay, invalid, foreign("x", "user-no-owner"))
    got = relevant_exports(relay, pool, lookup_in(store), [mine_old, invalid])
    assert got == {
        "pool-old": mine_old,
        FE: users_fe,
        RELAY_EXPORT: users_relay,
        "pool-my_fe": invalid,
    }


def test_relevant_exports_look_up_only_the_names_that_can_matter() -> None:
    asked: list[str] = []

    def lookup(name: str) -> None:
        asked.append(name)

    relevant_exports(make_relay(), make_pool(fe("Frontend"), fe("chat"), WORKER), lookup, [])
    assert sorted(asked) == sorted([RELAY_EXPORT, FE, "pool-chat"])


def test_relevant_exports_without_a_pool_are_ours_and_the_relay_export() -> None:
    mine = ours(FE)
    users = foreign(RELAY_EXPORT, "user-no-owner")
    store = cache(mine, users, foreign("x", "user-no-owner"))
    got = relevant_exports(make_relay(), None, lookup_in(store), [mine])
    assert got == {FE: mine, RELAY_EXPORT: users}


def test_relevant_exports_prefer_the_namespace_view_of_a_name() -> None:
    stale = ours(RELAY_EXPORT)
    fresh = foreign(RELAY_EXPORT, "user-no-owner")
    got = relevant_exports(make_relay(), make_pool(WORKER), lookup_in(cache(fresh)), [stale])
    assert got[RELAY_EXPORT] is fresh


def test_an_export_we_control_in_another_namespace_does_not_count() -> None:
    relay = make_relay()
    elsewhere = ours(FE, namespace=OTHER_NS)
    got = relevant_exports(relay, make_pool(WORKER), lookup_in(cache(elsewhere)), [elsewhere])
    assert got == {}
    p = published_plan(relay, make_pool(WORKER), got)
    assert verbs(p) == [(C, RELAY_EXPORT)]


def test_a_same_named_export_in_another_namespace_does_not_block_ours() -> None:
    relay, pool = make_relay(), make_pool(fe("Frontend"), WORKER)
    users_elsewhere = foreign(FE, "user-no-owner", namespace=OTHER_NS)
    others_relay = foreign(RELAY_EXPORT, "another-relay", namespace=OTHER_NS)
    store = cache(users_elsewhere, others_relay)
    got = relevant_exports(relay, pool, lookup_in(store), [])
    assert got == {}
    p = published_plan(relay, pool, got)
    assert verbs(p) == [(C, RELAY_EXPORT), (C, FE)]
    # ...while the same export in the relay's namespace blocks it.
    here = foreign(FE, "user-no-owner")
    got = relevant_exports(relay, pool, lookup_in(cache(users_elsewhere, here)), [])
    p = published_plan(relay, pool, got)
    assert verbs(p) == [(C, RELAY_EXPORT), (F, FE)]


def test_frontend_services_are_those_named_like_a_frontend_with_the_dcds_they_name() -> None:
    relay, pool = make_relay(), make_pool(fe("Frontend"), fe("chat"), WORKER, uid=DGD_UID)
    by_dcd, by_dgd = service(FE, DCD_REF), service("pool-chat", DGD_REF)
    the_dcd = make_dcd(DGD_REF)
    services = cache(by_dcd, by_dgd, service("pool-other"), service(RELAY_EXPORT))
    services[(OTHER_NS, FE)] = {**by_dcd, "metadata": {**by_dcd["metadata"], "namespace": "x"}}
    dcds = cache(the_dcd, make_dcd(name="pool-unrelated"))
    asked: list[str] = []

    def dcd_lookup(name: str) -> Mapping[str, Any] | None:
        asked.append(name)
        return dcds.get((NS, name))

    found, named = frontend_services(relay, pool, lookup_in(services), dcd_lookup)
    assert found == {FE: by_dcd, "pool-chat": by_dgd}
    assert named == {FE: the_dcd}
    assert asked == [FE], "only the DCDs a Service names as controller"
    # No DCD readable: the Services still, no DCD.
    assert frontend_services(relay, pool, lookup_in(services), None) == (
        {FE: by_dcd, "pool-chat": by_dgd},
        {},
    )
    # No pool: nothing.
    assert frontend_services(relay, None, lookup_in(services), dcd_lookup) == ({}, {})


def test_the_relay_service_is_never_read_as_a_frontends() -> None:
    relay, pool = make_relay(), make_pool(fe("pool-relay"), WORKER)
    services = cache(service(RELAY_EXPORT))
    assert frontend_services(relay, pool, lookup_in(services), None) == ({}, {})
