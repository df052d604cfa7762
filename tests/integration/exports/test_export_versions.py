"""Exports at the version the cluster serves, on private control planes.

Rule: docs/exports.md, 'Turning it on' (the served version is resolved at startup).

Each plane serves ServiceExports only at v1alpha1, only at v1beta1, or at both (the
operator then prefers v1beta1). The operator must resolve that version at startup and
create, repair and withdraw at it: the audit log's objectRef of every export write it
makes names the resolved version. A plane serving the DGD only at its deprecated
v1alpha1 (`spec.services{}`) must still publish and export the pool.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dynamo_pool_operator.api import names
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.crds import dgd_crd
from dynamo_pool_operator.runtime.auth.config import load_kubeconfig
from dynamo_pool_operator.runtime.client.rest import Client
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.api_fixtures import namespace, plane
from tests.integration.support.export_fixtures import (
    SE,
    config,
    existing_export,
    export_obj,
    exports_become,
)
from tests.integration.support.race_fixtures import (
    FRONTEND_SVC,
    POOL,
    RELAY_SVC,
    export_states,
    make_pool,
    writes_nothing,
)
from tests.integration.support.relay_fixtures import (
    DGDS,
    RELAYS,
    WORKER,
    decision_of,
    dynamos_services,
    relay_body,
)
from tests.integration.support.spies import export_writes

pytestmark = pytest.mark.timeout(120)

#: ServiceExport versions a plane serves -> the version the operator must use.
SERVED = {
    "only-v1alpha1": (("v1alpha1",), "v1alpha1"),
    "only-v1beta1": (("v1beta1",), "v1beta1"),
    "both": (("v1alpha1", "v1beta1"), "v1beta1"),
}


@pytest.fixture(scope="module", params=list(SERVED), ids=list(SERVED))
def versioned(request: pytest.FixtureRequest) -> Iterator[tuple[ControlPlane, str]]:
    served, want = SERVED[request.param]
    for cp in plane(about=True, mcs=served):
        yield cp, want


@pytest.fixture(scope="module")
def alpha_dgd_plane() -> Iterator[ControlPlane]:
    yield from plane(about=True, mcs=("v1alpha1", "v1beta1"), dgd=[dgd_crd("v1alpha1")])


def object_refs(writes: list[Any]) -> set[tuple[str, str]]:
    return {(w.raw["objectRef"]["apiGroup"], w.raw["objectRef"]["apiVersion"]) for w in writes}


async def test_exports_are_created_repaired_and_withdrawn_at_the_served_version(
    versioned: tuple[ControlPlane, str],
) -> None:
    cp, want = versioned
    ns = namespace(cp)
    se = SE.at_version(want)
    async with (
        Client(load_kubeconfig(cp.kubeconfig), user_agent="dpo-tests") as client,
        OperatorUnderTest(cp, config("mcs")) as op,
    ):
        assert op.running.served.serviceexport_version == want
        since = cp.audit.offset()
        await make_pool(client, ns)
        await exports_become(client, ns, {RELAY_SVC, FRONTEND_SVC}, se)
        # Repair: a changed DGD label is restored on the same export.
        await existing_export(client, ns, FRONTEND_SVC, se)
        await client.merge_patch(
            se, FRONTEND_SVC, {"metadata": {"labels": {names.DGD_NAME: "x"}}}, ns
        )

        async def repaired() -> bool:
            e = await export_obj(client, ns, FRONTEND_SVC, se)
            return bool(e and e["metadata"]["labels"][names.DGD_NAME] == POOL)

        await eventually(repaired)
        # Withdrawal: a renamed frontend's export moves (once its Service exists).
        renamed = await client.merge_patch(
            DGDS,
            POOL,
            {"spec": {"components": [{"name": "Gateway", "type": "frontend"}, WORKER]}},
            ns,
        )
        await dynamos_services(client, renamed)
        await exports_become(client, ns, {RELAY_SVC, f"{POOL}-gateway"}, se)
        await writes_nothing(op, ns)
        writes = await export_writes(op, since, ns)
        assert {w.verb for w in writes} == {"create", "patch", "delete"}
        # Every write succeeded, bar what a lagging cache makes: a create answered
        # AlreadyExists, a withdrawal of an export already deleted answered NotFound
        # (docs/exports.md: one already gone is fine).
        failed = [(w.verb, w.code) for w in writes if w.code >= 300]
        assert set(failed) <= {("create", 409), ("delete", 404)}, failed
        assert object_refs(writes) == {("multicluster.x-k8s.io", want)}
        assert set((await export_states(client, ns)).values()) == {"Exported"}


async def test_dgd_served_only_at_v1alpha1_is_published_and_exported(
    alpha_dgd_plane: ControlPlane,
) -> None:
    cp = alpha_dgd_plane
    ns = namespace(cp)
    dgds = DGDS.at_version("v1alpha1")
    async with (
        Client(load_kubeconfig(cp.kubeconfig), user_agent="dpo-tests") as client,
        OperatorUnderTest(cp, config("mcs")) as op,
    ):
        assert op.running.served.dgd_version == "v1alpha1"
        dgd = await client.create(
            dgds,
            {
                "apiVersion": dgds.api_version,
                "kind": dgds.kind,
                "metadata": {"name": POOL, "namespace": ns},
                "spec": {
                    "services": {
                        "Frontend": {"componentType": "frontend", "replicas": 1},
                        "decode": {
                            "componentType": "worker",
                            "subComponentType": "decode",
                            "replicas": 1,
                        },
                    }
                },
            },
        )
        assert await dynamos_services(client, dgd) == [FRONTEND_SVC]
        await client.create(RELAYS, relay_body(POOL, ns))
        await exports_become(client, ns, {RELAY_SVC, FRONTEND_SVC})

        async def published() -> bool:
            cond = await decision_of(client, ns, POOL)
            return bool(cond and cond["status"] == "True")

        await eventually(published)
        await writes_nothing(op, ns)
        # A frontend removed from the map withdraws its export.
        await client.merge_patch(dgds, POOL, {"spec": {"services": {"Frontend": None}}}, ns)
        await exports_become(client, ns, {RELAY_SVC})
        await writes_nothing(op, ns)
