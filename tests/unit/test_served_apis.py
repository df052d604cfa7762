"""`resolve_served_apis` with group versions discovery could not read (pure)."""

from __future__ import annotations

import dataclasses

import pytest

from dynamo_pool_operator.served_apis import (
    StartupError,
    follow_served_apis,
    resolve_served_apis,
    transitions,
)
from tests.unit.served import (
    DCDS,
    DGD_ALPHA,
    DGD_BETA,
    DOWN,
    EXPORTS_ALPHA,
    EXPORTS_BETA,
    PROPS,
    RELAYS,
)


def test_an_unavailable_group_nothing_uses_changes_nothing() -> None:
    everything = [RELAYS, DGD_BETA, EXPORTS_BETA, PROPS]
    assert resolve_served_apis(
        everything, "mcs", {"metrics.k8s.io/v1beta1": DOWN}
    ) == resolve_served_apis(everything, "mcs")


def test_an_unavailable_version_less_preferred_than_the_chosen_one_changes_nothing() -> None:
    gates = resolve_served_apis(
        [RELAYS, DGD_BETA, EXPORTS_BETA], "karmada", {"multicluster.x-k8s.io/v1alpha1": DOWN}
    )
    assert gates.serviceexport_version == "v1beta1"


def test_a_preferred_version_unavailable_fails_rather_than_pick_an_older_one() -> None:
    with pytest.raises(StartupError) as e:
        resolve_served_apis(
            [RELAYS, DGD_BETA, EXPORTS_ALPHA], "mcs", {"multicluster.x-k8s.io/v1beta1": DOWN}
        )
    message = str(e.value)
    assert "\n" not in message
    assert "serviceexports.multicluster.x-k8s.io" in message
    assert f"multicluster.x-k8s.io/v1beta1 is unavailable ({DOWN})" in message
    assert "multiCluster.mcsImplementation is 'mcs'" in message
    assert "kubectl get apiservice v1beta1.multicluster.x-k8s.io" in message


def test_the_mcs_group_unavailable_does_not_matter_with_export_off() -> None:
    gates = resolve_served_apis([RELAYS, DGD_BETA], "", {"multicluster.x-k8s.io/v1beta1": DOWN})
    assert gates.serviceexport_version is None


@pytest.mark.parametrize(
    ("unavailable", "api"),
    [
        ("nvidia.com/v1alpha1", "dynamopoolrelays.nvidia.com"),
        ("nvidia.com/v1beta1", "dynamographdeployments.nvidia.com"),
    ],
)
def test_our_own_groups_unavailable_fail_startup(unavailable: str, api: str) -> None:
    resources = [r for r in (RELAYS, DGD_BETA, DGD_ALPHA) if r.version not in unavailable]
    with pytest.raises(StartupError, match=f"the {api} API cannot be discovered"):
        resolve_served_apis(resources, "", {unavailable: DOWN})


def test_the_about_api_unavailable_turns_the_cluster_id_check_off() -> None:
    gates = resolve_served_apis(
        [RELAYS, DGD_BETA, EXPORTS_BETA], "mcs", {"about.k8s.io/v1beta1": DOWN}
    )
    assert gates.about_version is None
    assert gates.serviceexport_version == "v1beta1"


def test_the_dcd_version_is_resolved_at_start_and_followed() -> None:
    # Whose a frontend's Service is reads the DynamoComponentDeployments when served;
    # without them no Service is controlled by one of the pool. Their API is followed
    # like the DGD's: a version no longer served, or one installed later, is seen.
    served = resolve_served_apis([RELAYS, DGD_BETA, DCDS, EXPORTS_BETA], "mcs")
    assert (served.dcd_version, served.dcd_versions) == ("v1alpha1", ("v1alpha1",))
    assert resolve_served_apis([RELAYS, DGD_BETA, EXPORTS_BETA], "mcs").dcd_version is None
    gone = follow_served_apis(served, [RELAYS, DGD_BETA, EXPORTS_BETA], "mcs")
    assert gone.dcd_version is None
    beta = dataclasses.replace(DCDS, version="v1beta1")
    both = follow_served_apis(served, [RELAYS, DGD_BETA, DCDS, beta, EXPORTS_BETA], "mcs")
    assert (both.dcd_version, both.dcd_versions) == ("v1beta1", ("v1beta1", "v1alpha1"))
    # Unreadable is not gone: the version in effect stays.
    doubt = follow_served_apis(
        served, [RELAYS, DGD_BETA, EXPORTS_BETA], "mcs", {"nvidia.com/v1beta1": DOWN}
    )
    assert doubt.dcd_version == "v1alpha1"
    said = transitions(served, both, "mcs")
    assert said == [
        "the DynamoComponentDeployment API (dynamocomponentdeployments.nvidia.com) is served "
        "now at v1beta1 (was v1alpha1): a frontend's Service a DCD controls is read at v1beta1 "
        "from now on"
    ]
