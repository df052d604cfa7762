"""Which pure core this checkout's runs measure: compiled with mypyc, as the image ships
it (tools/compile_core.py), or the sources (`--core interpreted`).

The compiled core is a copy of `src/` first on PYTHONPATH, for the bench's own process
(its in-process measurements) and every operator it starts; an operator of another
checkout (`--compare-python`) is started without it, to run its own tree."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
#: Set to the compiled tree in a process that runs on it.
ACTIVE = "DPO_COMPILED_CORE"


def _compile_core() -> ModuleType:
    spec = importlib.util.spec_from_file_location("compile_core", ROOT / "tools/compile_core.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reexec_compiled(argv: list[str]) -> None:
    """Start this bench again on the compiled core, unless it already runs on it."""
    if os.environ.get(ACTIVE):
        return
    tree = str(_compile_core().compiled_tree())
    paths = [tree, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, ACTIVE: tree, "PYTHONPATH": os.pathsep.join(paths)}
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "bench.main", *argv], env)


def describe() -> dict[str, object]:
    """What the result records of the core this process runs."""
    from dynamo_pool_operator.pool import plan

    return {"compiled": bool(os.environ.get(ACTIVE)), "plan_module": Path(plan.__file__).name}


def env_for(python: str | None) -> dict[str, str] | None:
    """The environment of a child run with `python`: this one's, except that another
    checkout's interpreter does not get this checkout's compiled core."""
    tree = os.environ.get(ACTIVE)
    if python is None or python == sys.executable or not tree:
        return None
    env = {k: v for k, v in os.environ.items() if k != ACTIVE}
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != tree]
    if rest:
        env["PYTHONPATH"] = os.pathsep.join(rest)
    else:
        env.pop("PYTHONPATH", None)
    return env
