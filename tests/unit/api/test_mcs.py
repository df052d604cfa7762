"""The MCS and About API names (api/mcs.py)."""

from __future__ import annotations

from dynamo_pool_operator.api import mcs
from dynamo_pool_operator.runtime.resources import Resource


def test_the_mcs_and_about_api_resources() -> None:
    assert mcs.serviceexports("v1alpha1") == Resource(
        "multicluster.x-k8s.io", "v1alpha1", "serviceexports", "ServiceExport"
    )
    assert mcs.clusterproperties("v1alpha1") == Resource(
        "about.k8s.io", "v1alpha1", "clusterproperties", "ClusterProperty", namespaced=False
    )
