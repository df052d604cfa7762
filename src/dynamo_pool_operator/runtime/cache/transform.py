"""The cache's one transform hook: what an informer keeps of each object it is sent.

As controller-runtime's `DefaultTransform`: one function before the store, so what it
drops no reader sees. A `Chain` of steps: drop what no controller reads (managed fields,
kubectl's last-applied), the kind's own trim, then `sharing.Share`. A chain is a value,
so readers of one shared informer asking for equal chains agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dynamo_pool_operator.runtime.cache.sharing import Share, VocabularyPath
from dynamo_pool_operator.runtime.cache.store import Obj

Transform = Callable[[Obj], Obj]

#: kubectl's client-side apply keeps the whole applied object here; only kubectl reads it.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def strip_managed_fields(obj: Obj) -> Obj:
    """Drop `metadata.managedFields`: often the largest part of an object, and ownership is
    tracked server-side."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def strip_last_applied(obj: Obj) -> Obj:
    """Drop kubectl's last-applied annotation (a DGD's carries its pod templates)."""
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if isinstance(annotations, dict) and LAST_APPLIED in annotations:
        del annotations[LAST_APPLIED]
    return obj


@dataclass(frozen=True, slots=True)
class Chain:
    """Steps applied in order; equal when its steps are (functions by identity)."""

    steps: tuple[Transform, ...]

    def __call__(self, obj: Obj) -> Obj:
        for step in self.steps:
            obj = step(obj)
        return obj


def for_cache(
    trim: Transform | None = None,
    *,
    managed_fields: bool = False,
    vocabulary: Iterable[VocabularyPath] = (),
    shared: Iterable[VocabularyPath] = (),
) -> Chain:
    """A cache's transform: drop what no controller reads (keeping `managedFields` for
    `trim` when `managed_fields`), `trim`, then share what is alike (`vocabulary`,
    `shared`: the kind's own)."""
    steps: list[Transform] = [] if managed_fields else [strip_managed_fields]
    steps.append(strip_last_applied)
    if trim is not None:
        steps.append(trim)
    steps.append(Share(frozenset(vocabulary), frozenset(shared)))
    return Chain(tuple(steps))


#: What a cache keeps when its reader names no transform.
DEFAULT_TRANSFORM = for_cache()
