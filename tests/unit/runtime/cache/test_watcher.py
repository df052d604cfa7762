"""The informer's list+watch state machine, one transition at a time.

Each test starts from one state, gives one answer, and checks the state and the
request or decision that follow; the informer's own tests drive the same machine
through a scripted client.
"""

from __future__ import annotations

import orjson
import pytest

from dynamo_pool_operator.runtime.cache.watcher import (
    AfterWatch,
    Empty,
    Fallback,
    InitialEvents,
    ListPages,
    Watch,
    Watcher,
    Watching,
    WatchList,
    after_watch,
    interrupted,
    listed,
    seen,
    start,
    watch_ended,
)
from dynamo_pool_operator.runtime.client import errors
from dynamo_pool_operator.runtime.client.undecodable import Undecodable

GONE = errors.Gone("too old resource version")
REFUSED = errors.Invalid("sendInitialEvents is forbidden")
DROPPED = errors.ServerError("connection reset", status=500)


def gathering(rv: str | None = "5") -> Watcher:
    """A watch-list under way, with one object and one undecodable one gathered."""
    initial = InitialEvents(rv)
    initial.objects[("default", "a")] = {"metadata": {"name": "a"}}
    initial.bad.append(Undecodable("default", "b", "uid-b", "4", "depth limit exceeded"))
    return Watcher(initial)


# --------------------------------------------------------------------------- start
def test_a_new_watcher_streams_its_first_list() -> None:
    assert start(Watcher()) == (Watcher(InitialEvents(None)), WatchList())


def test_a_relist_streams_and_keeps_the_last_version_for_the_log() -> None:
    assert start(Watcher(Empty("9"))) == (Watcher(InitialEvents("9")), WatchList())


def test_a_server_that_refused_a_streaming_list_is_listed_by_pages() -> None:
    assert start(Watcher(Empty("9"), streams=False)) == (
        Watcher(Empty("9"), streams=False),
        ListPages(),
    )


def test_a_cut_short_watch_list_is_followed_by_a_paged_list() -> None:
    assert start(Watcher(Empty("9", pages=True))) == (Watcher(Empty("9")), ListPages())


def test_the_paged_list_is_one_attempt_the_next_list_streams_again() -> None:
    """Spent when it starts: a paged list that fails is followed by a streamed one."""
    during, _ = start(Watcher(Empty("9", pages=True)))
    assert start(during)[1] == WatchList()


def test_a_watcher_that_listed_watches_from_its_version() -> None:
    w = Watcher(Watching("7"), streams=False, last_gone=True)
    assert start(w) == (w, Watch("7"))


def test_an_interrupted_watch_list_starts_over_with_nothing_gathered() -> None:
    w, request = start(gathering("5"))
    assert request == WatchList()
    assert w.initial == InitialEvents("5")
    assert w.initial.objects == {}
    assert w.initial.bad == []


# --------------------------------------------------------------------------- listed
def test_a_paged_list_watches_from_its_version() -> None:
    assert listed(Watcher(Empty("3"), streams=False), "10") == Watcher(
        Watching("10"), streams=False
    )


def test_the_end_bookmark_of_a_watch_list_watches_from_its_version() -> None:
    assert listed(gathering(), "10") == Watcher(Watching("10"))


def test_a_relist_keeps_what_outlives_a_phase() -> None:
    w = Watcher(Empty("3"), streams=False, last_gone=True)
    assert listed(w, "10") == Watcher(Watching("10"), streams=False, last_gone=True)


# --------------------------------------------------------------------------- seen
def test_a_watched_version_is_where_the_next_watch_resumes() -> None:
    assert seen(Watcher(Watching("5")), "6") == Watcher(Watching("6"))


@pytest.mark.parametrize("rv", [None, ""])
def test_an_event_without_a_version_leaves_the_resume_point(rv: str | None) -> None:
    assert seen(Watcher(Watching("5")), rv) == Watcher(Watching("5"))


def test_versions_within_the_initial_events_are_no_place_to_resume_at() -> None:
    w = gathering("5")
    assert seen(w, "6") is w
    assert w.rv == "5"


# --------------------------------------------------------------------------- watch_ended
def test_a_watch_that_ends_cleanly_resumes() -> None:
    assert watch_ended(Watcher(Watching("7")), None) == (Watcher(Watching("7")), None)


def test_a_watch_dropped_by_the_server_resumes_without_a_relist() -> None:
    assert watch_ended(Watcher(Watching("7")), DROPPED) == (Watcher(Watching("7")), None)


def test_an_invalid_answer_to_a_plain_watch_resumes_and_keeps_streaming_lists() -> None:
    assert watch_ended(Watcher(Watching("7")), REFUSED) == (Watcher(Watching("7")), None)


def test_a_410_relists() -> None:
    assert watch_ended(Watcher(Watching("7")), GONE) == (Watcher(Empty("7")), None)


def test_an_undecodable_line_relists_as_an_event_may_be_lost() -> None:
    try:
        orjson.loads(b"{")
    except orjson.JSONDecodeError as e:
        broken = e
    assert watch_ended(Watcher(Watching("7")), broken) == (Watcher(Empty("7")), None)


def test_a_watch_list_ended_before_its_bookmark_pages_this_list_only() -> None:
    assert watch_ended(gathering("5"), None) == (
        Watcher(Empty("5", pages=True)),
        Fallback.CUT_SHORT,
    )


def test_a_refused_watch_list_pages_every_list_from_now_on() -> None:
    assert watch_ended(gathering("5"), REFUSED) == (
        Watcher(Empty("5"), streams=False),
        Fallback.REFUSED,
    )


def test_a_watch_list_answered_410_streams_the_relist() -> None:
    assert watch_ended(gathering("5"), GONE) == (Watcher(Empty("5")), None)


def test_a_dropped_watch_list_streams_again() -> None:
    assert watch_ended(gathering("5"), DROPPED) == (Watcher(Empty("5")), None)


def test_a_watch_list_failing_otherwise_streams_again() -> None:
    assert watch_ended(gathering(None), ValueError("a bug")) == (Watcher(Empty(None)), None)


def test_the_end_of_a_watch_keeps_the_memory_of_the_last_410() -> None:
    w = Watcher(Watching("7"), last_gone=True)
    assert watch_ended(w, GONE)[0].last_gone


# --------------------------------------------------------------------------- interrupted
def test_a_cancelled_watch_list_drops_what_it_gathered() -> None:
    assert interrupted(gathering("5")) == Watcher(Empty("5"))


def test_a_cancelled_watch_keeps_its_resume_point() -> None:
    w = Watcher(Watching("7"))
    assert interrupted(w) is w


# --------------------------------------------------------------------------- after_watch
def test_a_cut_short_watch_list_pages_at_once() -> None:
    w = Watcher(Empty("5", pages=True))
    assert after_watch(w, WatchList(), None, False) == (w, AfterWatch(at_once=True))


def test_a_refused_watch_list_pages_at_once() -> None:
    w = Watcher(Empty("5"), streams=False, last_gone=True)
    assert after_watch(w, WatchList(), REFUSED, False) == (w, AfterWatch(at_once=True))


def test_a_watch_on_a_server_without_streaming_lists_is_no_fallback() -> None:
    w = Watcher(Watching("7"), streams=False)
    assert not after_watch(w, Watch("7"), None, True)[1].at_once


def test_a_watch_list_that_listed_and_then_ended_resumes() -> None:
    w = Watcher(Watching("9"))
    assert after_watch(w, WatchList(), None, True) == (
        w,
        AfterWatch(reset_backoff=True, what="watch ended, resuming from resourceVersion 9"),
    )


def test_a_healthy_watch_resumes_at_once_and_resets_the_backoff() -> None:
    w = Watcher(Watching("7"))
    assert after_watch(w, Watch("7"), DROPPED, True) == (
        w,
        AfterWatch(reset_backoff=True, what="watch ended, resuming from resourceVersion 7"),
    )


def test_a_watch_with_nothing_to_show_backs_off() -> None:
    w = Watcher(Watching("7"))
    assert after_watch(w, Watch("7"), None, False) == (
        w,
        AfterWatch(back_off=True, what="watch ended, resuming from resourceVersion 7"),
    )


def test_a_first_410_is_an_answer_and_resets_the_backoff() -> None:
    assert after_watch(Watcher(Empty("7")), Watch("7"), GONE, False) == (
        Watcher(Empty("7"), last_gone=True),
        AfterWatch(
            gone=True,
            reset_backoff=True,
            back_off=True,
            what="watch from resourceVersion 7 failed, relisting",
        ),
    )


def test_repeated_410s_back_off_and_grow() -> None:
    w = Watcher(Empty("7"), last_gone=True)
    _, after = after_watch(w, WatchList(), GONE, False)
    assert (after.gone, after.back_off, after.reset_backoff) == (True, True, False)


def test_an_end_other_than_410_forgets_the_last_410() -> None:
    w = Watcher(Watching("7"), last_gone=True)
    assert not after_watch(w, Watch("7"), DROPPED, False)[0].last_gone


def test_a_failed_first_list_names_no_version() -> None:
    _, after = after_watch(Watcher(Empty(None)), WatchList(), DROPPED, False)
    assert after.what == "watch from resourceVersion None failed, relisting"


# --------------------------------------------------------------------------- a life
def test_a_life_stream_watch_410_relist_refused_pages() -> None:
    """The transitions chained as the informer's loop chains them."""
    w, request = start(Watcher())
    assert request == WatchList()
    w = listed(w, "10")  # the end bookmark
    w = seen(w, "12")
    w, fallback = watch_ended(w, GONE)
    assert fallback is None
    w, after = after_watch(w, request, GONE, True)
    assert (after.at_once, after.gone) == (False, True)
    w, request = start(w)
    assert (w.phase, request) == (InitialEvents("12"), WatchList())
    w, fallback = watch_ended(w, REFUSED)
    assert fallback is Fallback.REFUSED
    w, after = after_watch(w, request, REFUSED, False)
    assert after.at_once
    w, request = start(w)
    assert request == ListPages()
    w = listed(w, "30")
    assert start(w) == (Watcher(Watching("30"), streams=False, last_gone=True), Watch("30"))
