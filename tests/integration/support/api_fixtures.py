"""Helpers for the tests of APIs that change while the operator runs: private control
planes whose CRDs a test installs, changes and deletes, an operator rediscovering every
0.2 s, and waiters that count rediscovery passes rather than seconds."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from dynamo_pool_operator.api import crd as relay_crd
from dynamo_pool_operator.config import OperatorConfiguration
from dynamo_pool_operator.localcluster.assets import resolve
from dynamo_pool_operator.localcluster.controlplane import ControlPlane
from dynamo_pool_operator.localcluster.crds import cluster_property_crd, dgd_crd, mcs_crds
from dynamo_pool_operator.runtime.client.rest import Client
from tests.harness import OperatorUnderTest, eventually
from tests.integration.support.export_fixtures import config
from tests.integration.support.planes import started
from tests.integration.support.relay_fixtures import condition

ABOUT_CRD = "clusterproperties.about.k8s.io"
EXPORTS_CRD = "serviceexports.multicluster.x-k8s.io"
IMPORTS_CRD = "serviceimports.multicluster.x-k8s.io"
INTERVAL = "200ms"


def fast(implementation: str, **sections: Any) -> OperatorConfiguration:
    """The operator rediscovering every 0.2 s, so a test waits for passes, not minutes."""
    return config(implementation, multiCluster={
        "mcsImplementation": implementation, "apiDiscoveryInterval": INTERVAL
    }, **sections)  # fmt: skip


def plane(
    *,
    about: bool | tuple[str, ...],
    mcs: tuple[str, ...] | None,
    dgd: list[dict[str, Any]] | None = None,
    extra_apiserver_args: list[str] | None = None,
) -> Iterator[ControlPlane]:
    """A private control plane: our CRD, the DGD's (`dgd`: a CRD of its own, else
    v1beta1), and optionally the About API (True: both versions, or the versions given)
    and the MCS CRDs at the given versions."""
    assets = resolve()
    crds = [relay_crd.crd(), *(dgd or [dgd_crd("v1beta1")])]
    if about:
        crds.append(cluster_property_crd() if about is True else cluster_property_crd(about))
    if mcs is not None:
        crds += mcs_crds(assets.mcs_crd_dir, served=mcs)
    yield from started(
        ControlPlane(
            assets=assets,
            crds=crds,
            garbage_collector=False,
            extra_apiserver_args=extra_apiserver_args,
        )
    )


def namespace(cp: ControlPlane) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    cp.create_namespace(name)
    return name


def lines(caplog: pytest.LogCaptureFixture, text: str, level: int = logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= level and text in r.getMessage()]


def informer_warnings(caplog: pytest.LogCaptureFixture, plural: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.endswith("runtime.informer")
        and r.levelno >= logging.WARNING
        and r.getMessage().startswith(f"informer {plural}.")
    ]


async def passes(op: OperatorUnderTest, count: int) -> None:
    """Wait until the operator has rediscovered `count` more times (a count, not a time)."""
    rediscovery = op.running.rediscovery
    target = rediscovery.reads + count
    await eventually(lambda: _at_least(rediscovery.reads, target), timeout=30)


async def _at_least(value: int, target: int) -> bool:
    return value >= target


async def exported(client: Client, ns: str, name: str) -> dict[str, Any] | None:
    return await condition(client, ns, name, "Exported")


async def exported_becomes(client: Client, ns: str, name: str, reason: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        c = await exported(client, ns, name)
        return c if c is not None and c["reason"] == reason else None

    try:
        found: dict[str, Any] = await eventually(probe, timeout=30)
    except AssertionError as e:
        raise AssertionError(
            f"Exported of {ns}/{name} is {await exported(client, ns, name)}, want {reason}"
        ) from e
    return found
