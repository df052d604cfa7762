"""Read-your-own-writes at the cache (runtime/cache/store.py `wrote`, `latest`): our
write's answer is read instead of the cached object while the cache still holds the
version the write was decided on, and never once the cache changed that object."""

from __future__ import annotations

from typing import Any

from dynamo_pool_operator.runtime.cache.store import Store


def relay(rv: str, status: str = "", uid: str = "u") -> dict[str, Any]:
    meta = {"name": "r", "namespace": "ns", "uid": uid, "resourceVersion": rv}
    return {"metadata": meta, "status": {"said": status}}


def cached_with(obj: dict[str, Any]) -> Store:
    store = Store()
    store.put(obj)
    return store


def test_the_answer_is_read_until_the_cache_shows_the_write() -> None:
    read = relay("1")
    store = cached_with(read)
    store.wrote(relay("2", "ours"), read)
    assert store.latest("ns", "r") == relay("2", "ours")
    assert store.shows_own_write("ns", "r")
    assert store.get("ns", "r") == read  # the cache itself is the cache
    store.put(relay("2", "ours"))  # the write's own event
    assert not store.shows_own_write("ns", "r")
    assert store.latest("ns", "r") == relay("2", "ours")


def test_any_change_the_cache_sees_ends_it() -> None:
    read = relay("1")
    store = cached_with(read)
    store.wrote(relay("3", "ours"), read)
    store.put(relay("2", "theirs"))  # before ours or after it: the server's word now
    assert store.latest("ns", "r") == relay("2", "theirs")
    store.put(relay("3", "ours"))
    assert store.latest("ns", "r") == relay("3", "ours")


def test_a_relist_with_the_same_version_keeps_it_a_later_one_ends_it() -> None:
    read = relay("1")
    store = cached_with(read)
    store.wrote(relay("2", "ours"), read)
    store.replace([relay("1")])
    assert store.shows_own_write("ns", "r")
    store.replace([relay("5", "later")])
    assert store.latest("ns", "r") == relay("5", "later")


def test_a_deletion_ends_it() -> None:
    read = relay("1")
    store = cached_with(read)
    store.wrote(relay("2", "ours"), read)
    store.delete("ns", "r")
    assert store.latest("ns", "r") is None
    store.put(relay("1", uid="new"))
    assert store.latest("ns", "r") == relay("1", uid="new")


def test_not_kept_when_the_cache_moved_before_the_answer() -> None:
    read = relay("1")
    store = cached_with(read)
    store.put(relay("2", "ours"))
    store.wrote(relay("2", "ours"), read)
    assert not store.shows_own_write("ns", "r")
    store.wrote(relay("3", "ours"), relay("1", uid="other"))  # decided on another object
    assert not store.shows_own_write("ns", "r")


def test_a_write_under_way_reads_the_cache() -> None:
    read = relay("1")
    store = cached_with(read)
    store.wrote(relay("2", "ours"), read)
    store.writing("ns", "r")
    assert store.latest("ns", "r") == read


def test_the_answer_is_made_as_the_cache_keeps_it_only_once_read() -> None:
    """The write's own event mostly comes before any pass reads the answer: the cache's
    transform (most of reading a relay) then runs once, on the event, not on both."""
    made: list[str] = []

    def prepare(obj: dict[str, Any]) -> dict[str, Any]:
        made.append(obj["metadata"]["resourceVersion"])
        return {**obj, "kept": True}

    read = relay("1")
    store = cached_with(read)
    store.wrote(relay("2", "ours"), read, prepare)
    assert store.shows_own_write("ns", "r")
    store.put(relay("2", "ours"))  # the write's own event, the answer never read
    assert made == []
    # Read before its event: made once, however often it is read.
    store.wrote(relay("3", "ours"), relay("2", "ours"), prepare)
    assert store.latest("ns", "r") == {**relay("3", "ours"), "kept": True}
    assert store.latest("ns", "r") == {**relay("3", "ours"), "kept": True}
    assert made == ["3"]
