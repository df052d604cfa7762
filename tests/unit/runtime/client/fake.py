"""The one seam through which unit tests stand in for the API server: `FakeClient`.

The code under test takes the real `Client`, so a fake is a `Client`: one that never
opens a connection and overrides the verbs it plays, as controller-runtime's
interceptor client overrides the functions a test scripts. A request a fake does not
play fails the test, naming it. An override that does not take exactly what the
`Client`'s verb takes (names, kinds, defaults; awaited or iterated as the verb is) is
refused when its class is made, so a fake cannot drift from the client it stands in for.
A fake names the parameters it reads and absorbs the rest with `**kwargs`, so no fake
need restate a verb's signature; `arguments` gives it the whole call when it records one.
"""

from __future__ import annotations

import inspect
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.auth.config import ClusterConfig
from dynamo_pool_operator.runtime.client.rest import Client
from dynamo_pool_operator.runtime.objects.resources import Resource

#: An object as the client sends and answers it.
Obj = dict[str, Any]

#: Where a fake "lives": a reserved name that never resolves.
FAKE_SERVER = "https://fake-apiserver.invalid"


class _NoCredentials:
    async def ssl_context(self) -> ssl.SSLContext:
        raise AssertionError("a FakeClient never connects")

    async def headers(self) -> dict[str, str]:
        return {}

    def invalidate(self) -> None:
        pass


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _drift(override: Callable[..., Any], verb: Callable[..., Any]) -> str | None:
    """Why a call the client's `verb` takes would not reach `override` as it reaches the
    verb, or None. A fake may absorb arguments it does not look at with `*args` and
    `**kwargs`; it may not take another name, kind or default, nor need what the client
    does not take. Annotations are left out: a fake may say `Obj` for `dict[str, Any]`."""
    if inspect.iscoroutinefunction(verb) and not inspect.iscoroutinefunction(override):
        return "the client's verb is a coroutine function"
    if inspect.isasyncgenfunction(verb) and (
        inspect.iscoroutinefunction(override)  # awaited, not iterated
    ):
        return "the client's verb is iterated, not awaited"
    mine = inspect.signature(override).parameters
    theirs = inspect.signature(verb).parameters
    rest_args = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in mine.values())
    rest_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in mine.values())
    positional = [n for n, p in mine.items() if p.kind in _POSITIONAL]
    expected = [n for n, p in theirs.items() if p.kind in _POSITIONAL]
    if positional != expected[: len(positional)] or (
        len(positional) < len(expected) and not (rest_args and rest_kw)
    ):
        return f"positional parameters {positional}, the client's {expected}"
    for name, p in theirs.items():
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        q = mine.get(name)
        if q is None:
            if p.kind is inspect.Parameter.KEYWORD_ONLY and not rest_kw:
                return f"no parameter {name!r}"
        elif (q.kind, q.default) != (p.kind, p.default):
            return f"{q} ({q.kind.description}) here, {p} ({p.kind.description}) in the client"
    for name, q in mine.items():
        if name not in theirs and q.kind not in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            return f"parameter {name!r}, which the client does not take"
    return None


class FakeClient(Client):
    """A `Client` whose every request fails the test unless a subclass plays its verb."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, override in vars(cls).items():
            verb = getattr(Client, name, None)
            if name.startswith("_") or not callable(verb) or not callable(override):
                continue
            why = _drift(override, verb)
            if why is not None:
                raise TypeError(
                    f"{cls.__name__}.{name}{inspect.signature(override)} does not take what "
                    f"Client.{name}{inspect.signature(verb)} takes: {why}"
                )

    def __init__(self) -> None:
        super().__init__(ClusterConfig(FAKE_SERVER, _NoCredentials()), registry=CollectorRegistry())

    async def request(self, method: str, path: str, **_: Any) -> Any:
        raise AssertionError(f"{type(self).__name__} does not play {method} {path}")

    async def watch_lines(
        self, res: Resource, namespace: str | None = None, **_: Any
    ) -> AsyncIterator[bytes]:
        raise AssertionError(
            f"{type(self).__name__} does not play watches of {res.path(namespace)}"
        )
        yield b""  # an async generator, as the client's


def arguments(verb: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Every parameter of the client's `verb` (a `Client` method) as this call binds it,
    defaults included: a fake that absorbs what it ignores with `**kwargs` still records
    the whole call, and a keyword the client does not take fails here as it would there."""
    bound = inspect.signature(verb).bind(None, *args, **kwargs)
    bound.apply_defaults()
    return {name: value for name, value in bound.arguments.items() if name != "self"}
