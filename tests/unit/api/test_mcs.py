"""The MCS and About API names (api/mcs.py)."""

from __future__ import annotations

import pytest

from dynamo_pool_operator.api import mcs
from dynamo_pool_operator.runtime.objects.resources import Resource


def test_the_mcs_and_about_api_resources() -> None:
    assert mcs.serviceexports("v1alpha1") == Resource(
        "multicluster.x-k8s.io", "v1alpha1", "serviceexports", "ServiceExport"
    )
    assert mcs.serviceimports("v1beta1") == Resource(
        "multicluster.x-k8s.io", "v1beta1", "serviceimports", "ServiceImport"
    )
    assert mcs.clusterproperties("v1alpha1") == Resource(
        "about.k8s.io", "v1alpha1", "clusterproperties", "ClusterProperty", namespaced=False
    )


PROPERTY = {"metadata": {"name": "cluster.clusterset.k8s.io"}, "spec": {"value": "east"}}


def test_the_effective_cluster_id_is_the_spec_then_the_clusters_then_the_last_known() -> None:
    readable = mcs.ClusterID(True, PROPERTY, "about.k8s.io/v1alpha1")
    unreadable = mcs.ClusterID(True, None, "about.k8s.io/v1alpha1", "cannot read it")
    unchecked = mcs.ClusterID()
    assert readable.effective("west") == "west"
    assert readable.effective("") == "east"
    assert readable.effective("", last_known="old") == "east"
    assert unchecked.effective("") == ""
    assert unchecked.effective("", last_known="old") == ""
    assert unreadable.effective("west") == "west"
    # Unreadable: the last known ID, "" included; nothing known is None, never "".
    assert unreadable.effective("", last_known="east") == "east"
    assert unreadable.effective("", last_known="") == ""
    assert unreadable.effective("", last_known=None) is None
    assert unreadable.effective("", last_known=3) is None


def test_the_confirmation_in_effect_is_the_configured_one_else_the_implementations() -> None:
    c, i = mcs.Confirmation, mcs.Implementation
    # Every standard implementation that writes conditions writes Valid; Antrea no Ready.
    assert i.MCS.confirmation(c.DEFAULT) is c.VALID
    assert i.KARMADA.confirmation(c.DEFAULT) is c.NONE  # Karmada writes no condition
    for implementation in (i.MCS, i.KARMADA):
        for level in (c.NONE, c.VALID, c.READY):
            assert implementation.confirmation(level) is level


def test_required_is_the_old_name_of_ready() -> None:
    assert mcs.Confirmation("required") is mcs.Confirmation.READY
    assert mcs.Confirmation("ready") is mcs.Confirmation.READY
    with pytest.raises(ValueError, match="optional"):
        mcs.Confirmation("optional")


def test_the_managers_of_imported_slices() -> None:
    """Each implementation's own value (docs/exports.md, "As the Global Router sees it"),
    and Kubernetes' two controllers, which write no import."""
    assert {i.value: i.manager for i in mcs.Importer} == {
        "lighthouse": "lighthouse-agent.submariner.io",
        "cilium": "endpointslice-mesh-controller.cilium.io",
        "karmada": "endpointslice-controller.karmada.io",
    }
    assert {
        "endpointslice-controller.k8s.io",
        "endpointslicemirroring-controller.k8s.io",
    } == mcs.KUBERNETES_SLICE_MANAGERS
    assert not {i.manager for i in mcs.Importer} & mcs.KUBERNETES_SLICE_MANAGERS
