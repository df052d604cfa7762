"""The informer's list+watch as a pure state machine, as kube-rs's `watcher`: from the
state and the last answer, the next state and request; the informer does the I/O.

    Empty --start--> ListPages --listed--> Watching
    Empty --start--> WatchList (InitialEvents) --initial-events-end bookmark--> Watching
    InitialEvents --ended early--> Empty(pages=True)   (this list only, by pages)
    InitialEvents --refused (400/422)--> Empty, streams=False   (by pages for good)
    Watching --ended, dropped, failed--> Watching   (resumed from the last version seen)
    any --410 Gone, a lost event--> Empty   (only a relist is safe)
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field

from dynamo_pool_operator.runtime.cache.store import Key, Obj
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.undecodable import Undecodable


# ------------------------------------------------------------------ phases
@dataclass(frozen=True)
class Empty:
    """A list is needed: nothing was listed yet, or what was can no longer be trusted."""

    #: The last resourceVersion seen (None before the first list): named in log lines only.
    rv: str | None = None
    #: This list (only) by pages: the last watch-list ended before its end bookmark.
    pages: bool = False


@dataclass(frozen=True)
class InitialEvents:
    """A watch-list is under way: its ADDED events are the list, until the end BOOKMARK.
    The informer fills the buffers, which go with the phase."""

    #: The last resourceVersion seen before this list: named in log lines only.
    rv: str | None = None
    #: The listed objects so far, as the cache keeps them, by key.
    objects: dict[Key, Obj] = field(default_factory=dict)
    #: Those among them that cannot be decoded.
    bad: list[Undecodable] = field(default_factory=list)


@dataclass(frozen=True)
class Watching:
    """Listed: a watch resumes from `rv`, the last resourceVersion seen."""

    rv: str


Phase = Empty | InitialEvents | Watching


@dataclass(frozen=True)
class Watcher:
    """The state of one informer's list+watch."""

    phase: Phase = Empty()
    #: Lists are streamed (watch-list) until the server refuses one.
    streams: bool = True
    #: The last watch ended in 410 Gone.
    last_gone: bool = False

    @property
    def rv(self) -> str | None:
        """The resourceVersion the next watch resumes from (None before the first list)."""
        return self.phase.rv

    @property
    def initial(self) -> InitialEvents | None:
        """The watch-list under way, while its initial events arrive."""
        return self.phase if isinstance(self.phase, InitialEvents) else None

    @property
    def needs_list(self) -> bool:
        return not isinstance(self.phase, Watching)


# ------------------------------------------------------------------ requests
@dataclass(frozen=True)
class ListPages:
    """A paginated list (`resourceVersion` unset: a consistent read)."""


@dataclass(frozen=True)
class WatchList:
    """A streaming list: a watch with `sendInitialEvents=true` from `resourceVersion=""`."""


@dataclass(frozen=True)
class Watch:
    """A watch from `rv`, with bookmarks."""

    rv: str


Request = ListPages | WatchList | Watch


class Fallback(enum.Enum):
    """Why a watch-list gave way to a paged list."""

    #: It ended cleanly before its end bookmark: this list only is made by pages.
    CUT_SHORT = enum.auto()
    #: The server refused it (400/422): lists are made by pages from now on.
    REFUSED = enum.auto()


@dataclass(frozen=True)
class AfterWatch:
    """What the loop does once a watch has ended."""

    #: List by pages at once: a watch-list fell back. No restart counted, no backoff.
    at_once: bool = False
    #: It ended in 410 Gone (`informer_gone_total`).
    gone: bool = False
    #: The backoff starts over: the watch was healthy, or a first 410 answered.
    reset_backoff: bool = False
    #: Sleep before the next request: the watch was not healthy.
    back_off: bool = False
    #: What happens next, for the log line.
    what: str = ""


# ------------------------------------------------------------------ transitions
def start(w: Watcher) -> tuple[Watcher, Request]:
    """The next request, and the state while it is under way. A paged list is one
    attempt: the next list streams again (if the server streams)."""
    phase = w.phase
    if isinstance(phase, Watching):
        return w, Watch(phase.rv)
    pages = isinstance(phase, Empty) and phase.pages
    if pages or not w.streams:
        return dataclasses.replace(w, phase=Empty(phase.rv)), ListPages()
    return dataclasses.replace(w, phase=InitialEvents(phase.rv)), WatchList()


def listed(w: Watcher, rv: str) -> Watcher:
    """A list was applied at `rv`: the watch goes on from there."""
    return dataclasses.replace(w, phase=Watching(rv))


def seen(w: Watcher, rv: str | None) -> Watcher:
    """An event or bookmark carried `rv`: the next watch resumes there (not within the
    initial events of a watch-list)."""
    if rv and isinstance(w.phase, Watching):
        return dataclasses.replace(w, phase=Watching(rv))
    return w


def watch_ended(w: Watcher, error: Exception | None) -> tuple[Watcher, Fallback | None]:
    """A watch ended, cleanly (`error` None) or not. Returns the next state and, when a
    watch-list falls back to pages, why: 410 Gone or an error not from the server (an
    event may be lost) relist; other server errors resume (a watch-list starts over); a
    refused watch-list pages from now on; one that ended early (its timeout, a proxy)
    says nothing of the server, so only this list is paged, as client-go's reflector does.
    """
    phase = w.phase
    rv = phase.rv
    if isinstance(phase, InitialEvents):
        if error is None:
            return dataclasses.replace(w, phase=Empty(rv, pages=True)), Fallback.CUT_SHORT
        if isinstance(error, errors.Invalid):
            return dataclasses.replace(w, phase=Empty(rv), streams=False), Fallback.REFUSED
        return dataclasses.replace(w, phase=Empty(rv)), None
    if isinstance(error, errors.Gone) or (
        error is not None and not isinstance(error, errors.ApiError)
    ):
        return dataclasses.replace(w, phase=Empty(rv)), None
    return w, None


def interrupted(w: Watcher) -> Watcher:
    """The request was cancelled: a watch-list under way drops what it gathered."""
    if isinstance(w.phase, InitialEvents):
        return dataclasses.replace(w, phase=Empty(w.phase.rv))
    return w


def after_watch(
    w: Watcher, request: Request, error: Exception | None, healthy: bool
) -> tuple[Watcher, AfterWatch]:
    """How the loop goes on after the watch `request` ended (`w` already past
    `watch_ended`). A first 410 is an answer (the server is back), so it resets the
    backoff; repeated 410s still back off."""
    phase = w.phase
    if isinstance(request, WatchList) and (
        not w.streams or (isinstance(phase, Empty) and phase.pages)
    ):
        return w, AfterWatch(at_once=True)
    gone = isinstance(error, errors.Gone)
    if w.needs_list:
        what = f"watch from resourceVersion {phase.rv} failed, relisting"
    else:
        what = f"watch ended, resuming from resourceVersion {phase.rv}"
    return dataclasses.replace(w, last_gone=gone), AfterWatch(
        gone=gone,
        reset_backoff=healthy or (gone and not w.last_gone),
        back_off=not healthy,
        what=what,
    )
