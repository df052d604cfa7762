"""bench/core.py: the bench's own runs get the compiled core, another checkout's do not."""

from __future__ import annotations

import os
import sys

import pytest
from bench import core


def test_another_checkouts_operator_runs_without_this_compiled_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(core.ACTIVE, "/cache/compiled/abc")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/cache/compiled/abc", "/elsewhere"]))
    env = core.env_for("/other/checkout/.venv/bin/python")
    assert env is not None
    assert core.ACTIVE not in env
    assert env["PYTHONPATH"] == "/elsewhere"
    monkeypatch.setenv("PYTHONPATH", "/cache/compiled/abc")
    env = core.env_for("/other/checkout/.venv/bin/python")
    assert env is not None
    assert "PYTHONPATH" not in env


def test_this_checkouts_children_inherit_the_compiled_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(core.ACTIVE, "/cache/compiled/abc")
    assert core.env_for(None) is None
    assert core.env_for(sys.executable) is None


def test_the_interpreted_bench_changes_no_childs_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(core.ACTIVE, raising=False)
    assert core.env_for("/other/checkout/.venv/bin/python") is None
