"""Shared helpers for tests that run a real informer against a silent API server."""

from __future__ import annotations

import asyncio
from typing import Any

from dynamo_pool_operator.runtime.objects.resources import Resource
from tests.unit.runtime.client.fake import FakeClient

RES = Resource("multicluster.x-k8s.io", "v1beta1", "serviceexports", "ServiceExport", True)


class Silent(FakeClient):
    """An API server that never answers a list: the informer runs and never syncs."""

    async def list(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()

    def watch_lines(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("never reached")
