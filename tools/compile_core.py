"""Compile the pure core with mypyc: C extensions beside its modules' sources.

The decision of a pass is mostly `dict` reads and small records; compiled, the same
pass takes about two thirds of the CPU (docs/decisions/0010-compiled-pure-core.md).
Only the modules in `MODULES` are compiled: pure, `mypy --strict` clean, and free of
what mypyc does not compile the same (monkeypatched calls, dynamic attributes).

    python tools/compile_core.py               # a compiled copy of src/, cached; prints its path
    python tools/compile_core.py --in-place D  # compile the package under D (the image's builder)

The copy lives under ~/.cache/dynamo-pool-operator/compiled/, keyed by a hash of the
sources, the checkout's path, the interpreter and mypy's version: `PYTHONPATH=<that
path>` runs the operator, the tests or the benchmark on the compiled core (an extension
module is imported before a source file of the same name). The checkout's own `src/` is
never compiled in place: the tests' coverage and the mutation runs read its sources.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "dynamo_pool_operator"
#: The compiled modules, relative to the package: the pass's decision and what it reads.
MODULES = (
    "api/dgd.py",
    "api/relay.py",
    "api/shown.py",
    "api/status.py",
    "pool/exports/feature.py",
    "pool/exports/plan.py",
    "pool/exports/verdict.py",
    "pool/ladder.py",
    "pool/model.py",
    "pool/plan.py",
    "pool/relay/objects.py",
    "pool/status.py",
    "runtime/objects/diff.py",
    "runtime/objects/meta.py",
)


#: Trees kept: the newest few, so a run still on an older one (a bench started before an
#: edit) keeps its files.
KEEP = 3


def cache_dir() -> Path:
    base = os.environ.get("DPO_CACHE_DIR") or Path.home() / ".cache" / "dynamo-pool-operator"
    return Path(base) / "compiled"


def _key() -> str:
    import mypy.version

    h = hashlib.sha256()
    h.update(f"{sys.version} {sysconfig.get_platform()} {mypy.version.__version__}".encode())
    h.update(str(ROOT).encode())  # the copy links back to this checkout (below)
    for path in sorted((ROOT / "src" / PACKAGE).rglob("*.py")):
        h.update(str(path.relative_to(ROOT)).encode())
        h.update(path.read_bytes())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()[:16]


def compile_in_place(root: Path, python: str | None = None) -> None:
    """Compile `MODULES` of the package under `root` (the directory holding it),
    leaving each extension beside its source. `python`: the interpreter whose installed
    packages the type check reads (the image's virtualenv; default: this one)."""
    files = [f"{PACKAGE}/{m}" for m in MODULES]
    missing = [f for f in files if not (root / f).is_file()]
    if missing:
        raise SystemExit(f"compile_core: not found under {root}: {', '.join(missing)}")
    where = ["--python-executable", python] if python else []
    subprocess.run(
        [sys.executable, "-m", "mypyc", *where, *files],
        cwd=root,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    shutil.rmtree(root / "build", ignore_errors=True)
    for module in MODULES:
        stem = (root / PACKAGE / module).with_suffix("")
        if not list(stem.parent.glob(f"{stem.name}.*.so")):
            raise SystemExit(f"compile_core: mypyc left no extension for {module}")


def compiled_tree() -> Path:
    """A compiled copy of `src/`, built once per source state."""
    out = cache_dir() / _key()
    if (out / ".complete").is_file():
        return out
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        work = Path(tmp) / "tree"
        shutil.copytree(
            ROOT / "src" / PACKAGE,
            work / PACKAGE,
            ignore=shutil.ignore_patterns("__pycache__", "*.so"),
        )
        compile_in_place(work)
        # The local control plane finds its pinned versions above its own module: the
        # copy points back at this checkout's.
        (work / "tools").mkdir()
        (work / "tools" / "controlplane").symlink_to(ROOT / "tools" / "controlplane")
        (work / ".complete").write_text("")
        shutil.rmtree(out, ignore_errors=True)  # a build that did not complete
        work.rename(out)
    _prune(keep=KEEP)
    return out


def _prune(keep: int) -> None:
    trees = [p for p in cache_dir().iterdir() if (p / ".complete").is_file()]
    trees.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for old in trees[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-place", type=Path, help="compile the package under this directory")
    parser.add_argument("--python-executable", help="whose installed packages to type check with")
    args = parser.parse_args()
    if args.in_place is not None:
        compile_in_place(args.in_place, args.python_executable)
        return
    print(compiled_tree())


if __name__ == "__main__":
    main()
