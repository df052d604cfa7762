"""dynamo-pool-operator: publishes NVIDIA Dynamo pools to the Multi-Cluster Services API."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dynamo-pool-operator")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
