"""Fair queuing across flows: the keys of one priority, served round-robin by flow.

A controller's keys belong to flows (for the relay controller, a key's namespace: one
tenant's). Served first-in first-out, one tenant's mass change (a thousand keys queued
in one go) makes every other tenant's single change wait for all of it. Served here,
each flow keeps its own FIFO and the flows take turns, one key a turn: a flow whose key
arrives behind a thousand of another flow's is served within one round, after at most
one key of each other flow waiting.

The workers count too: a flow with no key in flight (at this priority) goes before the
flows that have some, so a newcomer takes the next free worker rather than the one
after the mass change's next key. Among those that have keys in flight, and among
those that have none, the round order holds.

One key a turn is fair because every key costs about the same (one reconcile pass),
so counting keys is counting work; deficit round robin with a quantum of one. Why not
the API server's virtual-time fair queuing or shuffle sharding: decision 0012.

Every operation is O(1) in the keys and flows queued (amortized: a key that leaves for
a higher priority is dropped lazily, when its flow's turn reaches it); `pop` looks at
most at one flow more than there are flows with keys in flight, which the workers
bound. A flow function of None puts every key in one flow: plain FIFO.
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
    """Keys of one priority: FIFO within a flow, one key per flow in turn across flows,
    flows with no key in flight first.

    A flow joins the back of the round when its first key arrives, and leaves it when
    its last key is taken, so a flow that empties and refills (one key at a time) waits
    a whole round each time like any other: it cannot jump ahead of flows that waited.

    `discard` (a key moved up to a higher priority) marks the key's entry dead instead of
    searching its FIFO: an entry (seq, key) is live while `_live[key]` is its seq. A flow
    left with dead entries only is forgotten at once (it no longer counts as waiting), and
    its stale turn is dropped when the round reaches it.
    """

    __slots__ = ("_active", "_busy", "_flow_of", "_live", "_seq", "_turns")

    def __init__(self, flow_of: FlowOf[K] | None = None) -> None:
        self._flow_of = flow_of
        self._live: dict[K, int] = {}
        self._active: dict[Hashable, _Flow[K]] = {}
        self._turns: deque[_Flow[K]] = deque()
        #: Keys handed out by `pop` and not yet `finished`, per flow (only flows with some).
        self._busy: dict[Hashable, int] = {}
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

    def _name(self, key: K) -> Hashable:
        return None if self._flow_of is None else self._flow_of(key)

    def push(self, key: K) -> None:
        """Queue `key` (not already queued here) at the back of its flow."""
        name = self._name(key)
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
        name = self._name(key)
        flow = self._active[name]
        flow.live -= 1
        if not flow.live:
            del self._active[name]  # its turn, now stale, is dropped when reached

    def _turn(self, idle_only: bool) -> int:
        """Where in the round the flow whose turn it is stands: the first with no key in
        flight, else (unless `idle_only`) the first; -1 if none."""
        turns, busy = self._turns, self._busy
        first = -1
        i = 0
        # Every flow passed over has keys in flight, so this ends within len(busy) + 1
        # live turns (and the stale ones it drops on the way).
        while i < len(turns):
            flow = turns[i]
            if self._active.get(flow.name) is not flow:
                del turns[i]  # a flow whose keys all moved up meanwhile
                continue
            if flow.name not in busy:
                return i
            if first < 0:
                first = i
            i += 1
        return -1 if idle_only else first

    def has_idle(self) -> bool:
        """Whether a flow with no key in flight has a key waiting."""
        return self._turn(idle_only=True) >= 0

    def pop(self, idle_only: bool = False) -> K:
        """The first key of the flow whose turn it is: the first in the round with no key
        in flight, else (unless `idle_only`) the first in the round. That flow goes to
        the back, and has one more key in flight until `finished`."""
        turns, busy = self._turns, self._busy
        i = self._turn(idle_only)
        if i < 0:
            raise IndexError("pop from an empty FairQueue")
        flow = turns[i]
        del turns[i]
        live, fifo = self._live, flow.fifo
        while True:
            seq, key = fifo.popleft()
            if live.get(key) == seq:
                break
        del live[key]
        flow.live -= 1
        if flow.live:
            turns.append(flow)
        else:
            del self._active[flow.name]
        busy[flow.name] = busy.get(flow.name, 0) + 1
        return key

    def finished(self, key: K) -> bool:
        """A key `pop` handed out is done with: its flow has one key fewer in flight.
        True if that leaves the flow with none in flight and keys waiting."""
        name = self._name(key)
        left = self._busy.get(name, 0) - 1
        if left > 0:
            self._busy[name] = left
            return False
        self._busy.pop(name, None)
        return name in self._active

    def clear(self) -> None:
        """Drop every key waiting (those in flight are still `finished` later)."""
        self._live.clear()
        self._active.clear()
        self._turns.clear()
