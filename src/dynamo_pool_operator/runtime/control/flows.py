"""Fair queuing across flows: the keys of one priority, served round-robin by flow.

A controller's keys belong to flows (for the relay controller, a key's namespace: one
tenant's). Served first-in first-out, one tenant's mass change (a thousand keys queued
in one go) makes every other tenant's single change wait for all of it. Served here,
each flow keeps its own FIFO and the flows take turns, one key a turn: a flow whose key
arrives behind a thousand of another flow's is served within one round, after at most
one key of each other flow waiting.

One key a turn is fair because every key costs about the same (one reconcile pass),
so counting keys is counting work; deficit round robin with a quantum of one. Why not
the API server's virtual-time fair queuing or shuffle sharding: decision 0012.

Every operation is O(1) (amortized: a key that leaves for a higher priority is
dropped lazily, when its flow's turn reaches it), whatever the number of keys and
flows. A flow function of None puts every key in one flow: plain FIFO.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["FairQueue", "FlowOf"]

K = TypeVar("K", bound=Hashable)

#: The flow of a key (for the relay controller, its namespace).
FlowOf = Callable[[K], Hashable]


class _Flow(Generic[K]):
    """One flow while it has keys waiting: its FIFO (with dead entries, see `FairQueue`)
    and how many of its entries are live."""

    __slots__ = ("fifo", "live", "name")

    def __init__(self, name: Hashable) -> None:
        self.name = name
        self.fifo: deque[tuple[int, K]] = deque()
        self.live = 0


class FairQueue(Generic[K]):
    """Keys of one priority: FIFO within a flow, one key per flow in turn across flows.

    A flow joins the back of the round when its first key arrives, and leaves it when
    its last key is taken, so a flow that empties and refills (one key at a time) waits
    a whole round each time like any other: it cannot jump ahead of flows that waited.

    `discard` (a key moved up to a higher priority) marks the key's entry dead instead of
    searching its FIFO: an entry (seq, key) is live while `_live[key]` is its seq. A flow
    left with dead entries only is forgotten at once (it no longer counts as waiting), and
    its stale turn is dropped when the round reaches it.
    """

    __slots__ = ("_active", "_flow_of", "_live", "_seq", "_turns")

    def __init__(self, flow_of: FlowOf[K] | None = None) -> None:
        self._flow_of = flow_of
        self._live: dict[K, int] = {}
        self._active: dict[Hashable, _Flow[K]] = {}
        self._turns: deque[_Flow[K]] = deque()
        self._seq = 0

    def __len__(self) -> int:
        """Keys waiting."""
        return len(self._live)

    @property
    def flows(self) -> int:
        """Flows with at least one key waiting."""
        return len(self._active)

    def __contains__(self, key: object) -> bool:
        return key in self._live

    def push(self, key: K) -> None:
        """Queue `key` (not already queued here) at the back of its flow."""
        name = None if self._flow_of is None else self._flow_of(key)
        flow = self._active.get(name)
        if flow is None:
            flow = self._active[name] = _Flow(name)
            self._turns.append(flow)
        self._seq += 1
        self._live[key] = self._seq
        flow.fifo.append((self._seq, key))
        flow.live += 1

    def discard(self, key: K) -> None:
        """Take `key` out (it moved to another priority); its entry stays, dead."""
        if self._live.pop(key, None) is None:
            return
        name = None if self._flow_of is None else self._flow_of(key)
        flow = self._active[name]
        flow.live -= 1
        if not flow.live:
            del self._active[name]  # its turn, now stale, is dropped when reached

    def pop(self) -> K:
        """The first key of the flow whose turn it is; that flow goes to the back."""
        turns, live = self._turns, self._live
        while turns:
            flow = turns[0]
            if self._active.get(flow.name) is not flow:
                turns.popleft()  # a flow whose keys all moved up meanwhile
                continue
            fifo = flow.fifo
            while True:
                seq, key = fifo.popleft()
                if live.get(key) == seq:
                    break
            del live[key]
            flow.live -= 1
            turns.popleft()
            if flow.live:
                turns.append(flow)
            else:
                del self._active[flow.name]
            return key
        raise IndexError("pop from an empty FairQueue")

    def clear(self) -> None:
        self._live.clear()
        self._active.clear()
        self._turns.clear()
