"""The unit tests' one client seam (`fake.py`): a fake cannot drift from the real `Client`.

The code under test takes the `Client` and calls its verbs with the client's own
parameters; a fake that took other ones would pass its tests and fail in production.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import CONFIGMAPS, Resource
from tests.unit.runtime.client.fake import FakeClient, _drift, arguments


async def _get_without_namespace(self: Any, res: Resource, name: str) -> dict[str, Any]:
    return {}


async def _create_without_field_manager(
    self: Any, res: Resource, body: dict[str, Any], namespace: str | None = None
) -> dict[str, Any]:
    return body


async def _get_with_another_default(
    self: Any, res: Resource, name: str, namespace: str | None = "default"
) -> dict[str, Any]:
    return {}


async def _get_taking_more(
    self: Any, res: Resource, name: str, namespace: str | None = None, *, fresh: bool = False
) -> dict[str, Any]:
    return {}


def _get_not_awaitable(
    self: Any, res: Resource, name: str, namespace: str | None = None
) -> dict[str, Any]:
    return {}


async def _watch_awaited(self: Any, *args: Any, **kwargs: Any) -> Any:
    return None


async def _list_renamed(self: Any, resource: Resource, *args: Any, **kwargs: Any) -> Any:
    return None


@pytest.mark.parametrize(
    ("verb", "override"),
    [
        ("get", _get_without_namespace),
        ("create", _create_without_field_manager),
        ("get", _get_with_another_default),
        ("get", _get_taking_more),
        ("get", _get_not_awaitable),
        ("watch_lines", _watch_awaited),
        ("list", _list_renamed),
    ],
    ids=[
        "a positional parameter missing",
        "a keyword missing",
        "another default",
        "a parameter the client does not take",
        "not awaitable",
        "awaited where the client's is iterated",
        "a positional parameter renamed",
    ],
)
def test_a_fake_that_does_not_take_what_the_client_takes_is_refused(
    verb: str, override: Any
) -> None:
    with pytest.raises(TypeError, match=rf"Drifted\.{verb}.* does not take what Client\.{verb}"):
        type("Drifted", (FakeClient,), {verb: override})


async def _get_exactly(
    self: Any, res: Resource, name: str, namespace: str | None = None
) -> dict[str, Any]:
    return {}


async def _create_absorbing(self: Any, res: Resource, body: Any, *_: Any, **__: Any) -> Any:
    return body


async def _list_absorbing_keywords(
    self: Any, res: Resource, namespace: str | None = None, **kw: Any
) -> Any:
    return None


def _watch_returning_an_iterator(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[bytes]:
    raise AssertionError("never called")


def test_a_fake_may_take_exactly_the_clients_parameters_or_absorb_those_it_ignores() -> None:
    made = type(
        "Faithful",
        (FakeClient,),
        {
            "get": _get_exactly,
            "create": _create_absorbing,
            "list": _list_absorbing_keywords,
            "watch_lines": _watch_returning_an_iterator,
        },
    )
    assert issubclass(made, Client)


def test_the_seam_itself_takes_what_the_client_takes() -> None:
    for verb in ("request", "watch_lines"):
        assert _drift(getattr(FakeClient, verb), getattr(Client, verb)) is None, verb


async def test_a_request_no_fake_plays_fails_the_test_naming_it() -> None:
    client = FakeClient()
    with pytest.raises(
        AssertionError, match="does not play GET /api/v1/namespaces/ns/configmaps/a"
    ):
        await client.get(CONFIGMAPS, "a", "ns")
    with pytest.raises(AssertionError, match="does not play watches of /api/v1/configmaps"):
        async for _ in client.watch_lines(CONFIGMAPS, resource_version="1"):
            pass


def test_a_call_a_fake_absorbed_is_recorded_whole_and_a_stray_keyword_fails() -> None:
    call = arguments(Client.list, CONFIGMAPS, "ns", label_selector="app=x")
    assert call == {
        "res": CONFIGMAPS,
        "namespace": "ns",
        "label_selector": "app=x",
        "field_selector": None,
        "limit": 500,
        "each": None,
        "resource_version": None,
        "resource_version_match": None,
    }
    with pytest.raises(TypeError, match="selector"):
        arguments(Client.list, CONFIGMAPS, "ns", selector="app=x")
