"""Pages and events with an object nested deeper than the decoder follows."""

from __future__ import annotations

import orjson
import pytest

from dynamo_pool_operator.runtime.client.undecodable import SKIM_DEPTH, decode_page, named, skim


def deep(levels: int) -> bytes:
    """A JSON value nested `levels` deep, built as text (no encoder follows so deep)."""
    return b'{"a":' * levels + b"{}" + b"}" * levels


def item(name: str, rv: str = "1", body: bytes = b'"x"') -> bytes:
    meta = orjson.dumps(
        {"name": name, "namespace": "team", "uid": f"u-{name}", "resourceVersion": rv}
    )
    return b'{"metadata":' + meta + b',"spec":{"deep":' + body + b',"s":"a]b\\"[{,"}}'


def page(*items: bytes, cont: str = "") -> bytes:
    meta = orjson.dumps({"resourceVersion": "42", "continue": cont})
    return b'{"kind":"List","metadata":' + meta + b',"items":[' + b",".join(items) + b"]}"


def test_orjson_refuses_what_the_api_server_stores() -> None:
    """The premise: 1,100 levels are too deep for orjson (its limit is 1,024)."""
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(deep(1100))


def test_a_page_that_decodes_is_decoded_whole() -> None:
    got = decode_page(page(item("a"), item("b"), cont="t"))
    assert [i["metadata"]["name"] for i in got.items] == ["a", "b"]
    assert got.meta == {"resourceVersion": "42", "continue": "t"}
    assert got.undecodable == []


def test_one_undecodable_item_is_named_and_left_out_the_others_kept() -> None:
    got = decode_page(page(item("a"), item("bad", "7", deep(1100)), item("c")))
    assert [i["metadata"]["name"] for i in got.items] == ["a", "c"]
    assert got.items[0]["spec"]["s"] == 'a]b"[{,', "strings holding brackets stay whole"
    (bad,) = got.undecodable
    assert (bad.namespace, bad.name, bad.uid, bad.resource_version) == ("team", "bad", "u-bad", "7")
    assert bad.key == ("team", "bad")
    assert str(bad) == "team/bad at resourceVersion 7"
    assert got.meta["resourceVersion"] == "42"


def test_every_item_undecodable_leaves_an_empty_page_with_its_metadata() -> None:
    got = decode_page(page(item("x", body=deep(1100)), item("y", body=deep(2000))))
    assert got.items == []
    assert [b.name for b in got.undecodable] == ["x", "y"]


@pytest.mark.parametrize("broken", [b'{"items":[{"a":1}', b"not json", b'{"items":[1,]}'])
def test_a_broken_page_is_an_error_not_an_empty_list(broken: bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        decode_page(broken)


def test_skim_replaces_what_is_nested_too_deep_and_keeps_the_rest() -> None:
    raw = b'{"a":{"b":[1,{"c":"]}"}]},"d":"x"}'
    assert orjson.loads(skim(raw, 1)) == {"a": None, "d": "x"}
    assert orjson.loads(skim(raw, 2)) == {"a": {"b": None}, "d": "x"}
    assert orjson.loads(skim(raw, 10)) == orjson.loads(raw)
    assert orjson.loads(skim(deep(5000)))  # decodes however deep the original
    assert skim(deep(5000)).count(b"{") == SKIM_DEPTH


def test_a_watch_event_names_its_object() -> None:
    line = b'{"type":"MODIFIED","object":' + item("bad", "9", deep(1100)) + b"}"
    with pytest.raises(orjson.JSONDecodeError) as refused:
        orjson.loads(line)
    bad = named(line, refused.value, wrapped=True)
    assert (bad.namespace, bad.name, bad.resource_version) == ("team", "bad", "9")
    assert "depth" in bad.error


def test_what_names_nothing_is_named_empty() -> None:
    bad = named(b"[[[", ValueError("broken"))
    assert (bad.name, bad.namespace, str(bad)) == ("", "", "(unnamed) at resourceVersion ?")
