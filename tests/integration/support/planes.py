"""Private control planes and scratch namespaces: started and stopped, created and
deleted, the same way for every test that needs one of its own."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

from dynamo_pool_operator.localcluster.controlplane import ControlPlane


def started(cp: ControlPlane) -> Iterator[ControlPlane]:
    """`cp` running while the caller (a fixture: `yield from started(...)`) holds it."""
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


@contextlib.contextmanager
def scratch_namespace(cp: ControlPlane, prefix: str = "t") -> Iterator[str]:
    """A fresh namespace on `cp`, deleted when the block ends."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    cp.create_namespace(name)
    try:
        yield name
    finally:
        cp.delete_namespace(name)
