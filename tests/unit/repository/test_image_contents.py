"""The operator image leaves the local control plane out (Dockerfile: `rm -r .../localcluster`).

That is safe only while nothing the operator runs imports it: the package is copied
without `localcluster/`, every other module is imported from the copy in a fresh
interpreter, the runtime commands answer, and `dev` says what it needs instead of a
traceback.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "src" / "dynamo_pool_operator"

PROBE = r"""
import contextlib, io, json, pkgutil, sys
sys.path.insert(0, sys.argv[1])
import dynamo_pool_operator as pkg
assert pkg.__file__.startswith(sys.argv[1]), pkg.__file__
imported = []
for mod in pkgutil.walk_packages(pkg.__path__, "dynamo_pool_operator."):
    __import__(mod.name)
    imported.append(mod.name)
from dynamo_pool_operator import cli
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    manifests = cli.main(["manifests", "crds"])
    dev = cli.main(["dev"])
print(json.dumps({
    "imported": imported,
    "loaded": sorted(m for m in sys.modules if m.startswith("dynamo_pool_operator.")),
    "manifests": manifests,
    "crd": "kind: CustomResourceDefinition" in out.getvalue(),
    "dev": dev,
    "err": err.getvalue(),
}))
"""


def test_the_operator_runs_without_the_local_control_plane(tmp_path: Path) -> None:
    copy = tmp_path / "site"
    shutil.copytree(
        PACKAGE,
        copy / "dynamo_pool_operator",
        ignore=shutil.ignore_patterns("localcluster", "__pycache__"),
    )
    assert not (copy / "dynamo_pool_operator" / "localcluster").exists()
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(copy)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert {"dynamo_pool_operator.operator", "dynamo_pool_operator.process"} <= set(got["imported"])
    assert not [m for m in got["loaded"] if ".localcluster" in m]
    assert (got["manifests"], got["crd"]) == (0, True)
    assert got["dev"] == 1
    assert "needs a source checkout" in got["err"], got["err"]


def test_the_image_removes_the_package_the_probe_leaves_out() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "rm -r /opt/venv/lib/python3.*/site-packages/dynamo_pool_operator/localcluster" in (
        dockerfile
    )
    assert (PACKAGE / "localcluster" / "__init__.py").exists()
