"""The documented developer commands work right after `make test` on a fresh machine.

There `make` installs `uv` with `pip --user`, into `~/.local/bin`, which is often not
on PATH. So no script and no documented command may call a bare `uv`: they go
through `tools/uv`, which finds it where `make` does. These tests run the real
scripts with a PATH that has no `uv` on it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Every document that names commands to run.
DOCUMENTS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "deploy" / "helm" / "dynamo-pool-operator" / "README.md",
]
#: What the scripts need besides uv.
TOOLS = ("bash", "env", "dirname", "python3")


def _uv_home() -> Path:
    """Where `make` installs uv (the user base of `pip --user`)."""
    return Path.home() / ".local" / "bin" / "uv"


def _path_without_uv(tmp_path: Path) -> str:
    """A PATH with the tools the scripts need and no `uv`: a directory of links to them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, f"{tool} is needed to run the scripts"
        (bin_dir / tool).symlink_to(found)
    assert not (bin_dir / "uv").exists()
    return str(bin_dir)


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.skipif(not _uv_home().exists(), reason="uv is not in ~/.local/bin here")
def test_bench_run_finds_the_uv_make_installed_off_path(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": _path_without_uv(tmp_path)}
    env.pop("VIRTUAL_ENV", None)
    done = _run(["bench/run", "--help"], env)
    assert done.returncode == 0, done.stderr
    assert "usage: bench/run" in done.stdout


def test_tools_uv_without_any_uv_says_in_one_line_how_to_get_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": _path_without_uv(tmp_path),
        "HOME": str(home),
        "PYTHONUSERBASE": str(home / ".local"),
    }
    done = _run(["tools/uv", "--version"], env)
    assert done.returncode == 127
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, lines
    assert "make uv" in lines[0]


_FENCE = re.compile(r"^```.*?$(.*?)^```", re.MULTILINE | re.DOTALL)
_INLINE = re.compile(r"`([^`\n]+)`")
#: A command that starts with a bare `uv` (optionally after VAR=value assignments).
_BARE_UV = re.compile(r"^(?:\$ )?(?:[A-Z_]+=\S+ )*uv\s")


def _commands(text: str) -> list[str]:
    lines = [line.strip() for block in _FENCE.findall(text) for line in block.splitlines()]
    return lines + [m.strip() for m in _INLINE.findall(_FENCE.sub("", text))]


def test_no_documented_command_calls_a_bare_uv() -> None:
    bare = [
        f"{doc.relative_to(ROOT)}: {cmd}"
        for doc in DOCUMENTS
        for cmd in _commands(doc.read_text())
        if _BARE_UV.match(cmd)
    ]
    assert not bare, "use tools/uv (uv may not be on PATH):\n" + "\n".join(bare)


@pytest.mark.parametrize("script", ["bench/run", ".ci/nightly", "Makefile"])
def test_no_script_calls_a_bare_uv(script: str) -> None:
    text = (ROOT / script).read_text()
    calls = [line for line in text.splitlines() if re.search(r"(^|[\s;&|(])uv\s+(run|sync)", line)]
    assert not calls, calls
