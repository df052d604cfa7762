"""The resources discovery finds in the rules tests (`served_apis.py`), as it reports them."""

from __future__ import annotations

from dynamo_pool_operator.runtime.client.discovery import ServedResource

RELAYS = ServedResource("nvidia.com", "v1alpha1", "dynamopoolrelays", "DynamoPoolRelay", True)
DGD_BETA = ServedResource(
    "nvidia.com", "v1beta1", "dynamographdeployments", "DynamoGraphDeployment", True
)
DGD_ALPHA = ServedResource(
    "nvidia.com", "v1alpha1", "dynamographdeployments", "DynamoGraphDeployment", True
)
EXPORTS_ALPHA = ServedResource(
    "multicluster.x-k8s.io", "v1alpha1", "serviceexports", "ServiceExport", True
)
EXPORTS_BETA = ServedResource(
    "multicluster.x-k8s.io", "v1beta1", "serviceexports", "ServiceExport", True
)
DCDS = ServedResource(
    "nvidia.com", "v1alpha1", "dynamocomponentdeployments", "DynamoComponentDeployment", True
)
PROPS = ServedResource("about.k8s.io", "v1beta1", "clusterproperties", "ClusterProperty", False)
#: What discovery says of a group version it could not read.
DOWN = "503: service unavailable"
