"""What every export carries for its imports (`multiCluster.exportedAnnotations`,
`exportedLabels`: docs/exports.md), against a real API server: written into each
ServiceExport we own, repaired like every field we own, and refused at start where the
served ServiceExport CRD has no such field (mcs-api before v0.5.1, as Lighthouse ships)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dynamo_pool_operator.localcluster.assets import resolve
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.crds import dgd_crd, mcs_crds
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.served_apis import StartupError
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.api_fixtures import plane
from tests.integration.support.export_fixtures import SE, config, exports_become
from tests.integration.support.race_fixtures import FRONTEND_SVC, RELAY_SVC, make_pool
from tests.integration.support.relay_fixtures import POOL

CILIUM = {"service.cilium.io/global-sync-endpoint-slices": "true"}
LABELS = {"team": "inference"}
CARRIED = {"exportedAnnotations": CILIUM, "exportedLabels": LABELS}


def carrying() -> Any:
    return config(
        "mcs",
        multiCluster={
            "mcsImplementation": "mcs",
            "exportedAnnotations": CILIUM,
            "exportedLabels": LABELS,
        },
    )


async def test_every_export_carries_what_is_configured_and_it_is_kept_right(
    client: Client, namespace: str, control_plane: ControlPlane
) -> None:
    async with OperatorUnderTest(control_plane, carrying()) as op:
        await make_pool(client, namespace)
        await exports_become(client, namespace, {RELAY_SVC, FRONTEND_SVC})

        async def carried(name: str) -> dict[str, Any] | None:
            export = await client.get(SE, name, namespace)
            return export if export.get("spec") == CARRIED else None

        made: dict[str, Any] = await eventually(lambda: carried(FRONTEND_SVC))
        await eventually(lambda: carried(RELAY_SVC))
        await client.merge_patch(
            SE, FRONTEND_SVC, {"spec": {"exportedAnnotations": None}}, namespace
        )
        again: dict[str, Any] = await eventually(lambda: carried(FRONTEND_SVC))
        assert again["metadata"]["uid"] == made["metadata"]["uid"], "repaired in place"
        assert await op.reconcile_again((namespace, POOL)) == []


@pytest.fixture(scope="module")
def lighthouse_crds() -> Iterator[ControlPlane]:
    """A cluster whose ServiceExport CRD is mcs-api v0.1.0's, as Lighthouse v0.20 ships
    it: a ServiceExport with no `spec`."""
    old = resolve().lighthouse_mcs_crd_dir
    assert old is not None, "the build copies mcs-api v0.1.0's CRDs"
    yield from plane(about=False, mcs=None, dgd=[dgd_crd("v1beta1"), *mcs_crds(old, ("v1alpha1",))])


async def test_an_export_crd_without_the_field_is_refused_at_start_naming_the_setting(
    lighthouse_crds: ControlPlane,
) -> None:
    with pytest.raises(StartupError) as refused:
        async with OperatorUnderTest(lighthouse_crds, carrying()):
            pass
    said = str(refused.value)
    assert "multiCluster.exportedAnnotations is set" in said, said
    assert "has no spec.exportedAnnotations" in said, said
    assert "mcs-api v0.5.1 or later" in said, said
    async with OperatorUnderTest(lighthouse_crds, config("mcs")):
        pass  # nothing configured to carry: it starts
