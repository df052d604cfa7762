"""Building the operator image from the repository's Dockerfile with no registry and no
daemon: buildah (`--isolation chroot`) on stand-ins for the Dockerfile's two bases.

No registry is reachable from the test machines, so neither `python:3.11-slim` nor the
uv image can be pulled. The stand-ins come from Debian's packages and the `uv` this
checkout runs; they are passed as the Dockerfile's build arguments, whose defaults stay
the real bases:

- `PYTHON_IMAGE`: a minimal Debian bookworm root with python3 (mmdebstrap), shaped like
  python:3.11-slim where the Dockerfile relies on it: the interpreter at
  /usr/local/bin/python3 and no EXTERNALLY-MANAGED marker (the official image's Python
  is its own build, not Debian's). It carries the host's CA bundle, so the build reaches
  the package index as the host does.
- `UV_IMAGE`: `/uv`, the uv binary this checkout runs (the Dockerfile copies only that).

Both live in a private buildah storage under ~/.cache/dynamo-pool-operator/image/,
tagged with a hash of everything that goes into them (the recipe, the CA bundle, the uv
binary), so a second run reuses them and a changed input makes a new one, which replaces
the old. Debian's package updates are not part of the key: like a pinned base image,
the root stays as first built until the recipe changes (or the cache directory is
removed). The operator image is built anew every time and removed afterwards: the
storage holds the two bases and nothing that grows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")

#: What the Python stand-in is made of; part of its cache key.
SUITE = "bookworm"
PACKAGES = ("python3",)
#: mmdebstrap's customize hook, run with the new root as $1 (before it is packed).
SHAPE_LIKE_PYTHON_SLIM = r"""
set -eu
root="$1"
ln -s /usr/bin/python3 "$root/usr/local/bin/python3"
ln -s /usr/bin/python3 "$root/usr/local/bin/python"
rm -f "$root"/usr/lib/python3.*/EXTERNALLY-MANAGED
mkdir -p "$root/etc/ssl/certs"
cp "$CA_BUNDLE" "$root/etc/ssl/certs/ca-certificates.crt"
"""
#: The environment python:3.11-slim sets, and where the CA bundle is.
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
}


def cache_root() -> Path:
    base = os.environ.get("DPO_CACHE_DIR") or Path.home() / ".cache" / "dynamo-pool-operator"
    return Path(base) / "image"


def host_uv() -> Path | None:
    """The uv that tools/uv runs: on PATH, else in the `pip --user` bin directory."""
    found = shutil.which("uv")
    if found:
        return Path(found)
    local = Path.home() / ".local" / "bin" / "uv"
    return local if local.is_file() else None


def missing() -> str | None:
    """Why this machine cannot build and run the image, or None."""
    absent = [
        tool for tool in ("buildah", "mmdebstrap", "unshare", "chroot") if not shutil.which(tool)
    ]
    if absent:
        return (
            f"{', '.join(absent)} not installed: the image test builds with buildah on an "
            "mmdebstrap root (`apt-get install buildah mmdebstrap`; .ci/run installs them)"
        )
    if os.geteuid() != 0:
        return "the image test mounts the image's root filesystem and chroots into it: run as root"
    if host_uv() is None:
        return "no uv binary for the uv stand-in image: run `make uv`"
    if not CA_BUNDLE.is_file():
        return f"no CA bundle at {CA_BUNDLE} for the stand-in base"
    return None


@dataclasses.dataclass(frozen=True)
class Buildah:
    """buildah on a storage of its own (`--root`, `--runroot`), away from the user's."""

    storage: Path

    def cmd(self, *args: str) -> list[str]:
        return [
            "buildah",
            "--root",
            str(self.storage / "root"),
            "--runroot",
            str(self.storage / "run"),
            *args,
        ]

    def run(self, *args: str, timeout: float = 300) -> str:
        """stdout of `buildah args`; raises with buildah's stderr when it fails."""
        proc = subprocess.run(
            self.cmd(*args), capture_output=True, text=True, timeout=timeout, check=False
        )
        if proc.returncode != 0:
            raise RuntimeError(f"buildah {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def has_image(self, name: str) -> bool:
        proc = subprocess.run(
            self.cmd("inspect", "--type", "image", name), capture_output=True, check=False
        )
        return proc.returncode == 0

    def image_config(self, name: str) -> dict[str, Any]:
        """The image's OCI config: User, Env, Entrypoint, Cmd, WorkingDir, Labels."""
        info = json.loads(self.run("inspect", "--type", "image", name))
        config: dict[str, Any] = info["OCIv1"]["config"]
        return config

    def commit_rootfs(self, name: str, tar: Path, env: dict[str, str]) -> None:
        """An image of the files in `tar` (a root filesystem) with `env`."""
        ctr = self.run("from", "scratch")
        try:
            self.run("add", ctr, str(tar), "/")
            envs = [arg for k, v in env.items() for arg in ("--env", f"{k}={v}")]
            self.run("config", *envs, "--cmd", "python3", ctr)
            self.run("commit", ctr, name)
        finally:
            self.run("rm", ctr)

    def containers(self) -> set[str]:
        return set(self.run("containers", "--quiet").split())

    def build(
        self, context: Path, tag: str, build_args: dict[str, str], log: Path
    ) -> subprocess.CompletedProcess[str]:
        """`buildah bud` of context's Dockerfile; the log has the whole output.

        buildah 1.28 leaves the working container of a stage that is only copied from
        (`FROM ${UV_IMAGE} AS uv`) mounted: the containers the build made are removed."""
        before = self.containers()
        try:
            return self._bud(context, tag, build_args, log)
        finally:
            for ctr in self.containers() - before:
                subprocess.run(self.cmd("rm", ctr), capture_output=True, check=False)

    def _bud(
        self, context: Path, tag: str, build_args: dict[str, str], log: Path
    ) -> subprocess.CompletedProcess[str]:
        args = [arg for k, v in build_args.items() for arg in ("--build-arg", f"{k}={v}")]
        with log.open("w") as out:
            return subprocess.run(
                self.cmd(
                    "bud", "--isolation", "chroot", "--network", "host", "--layers=false",
                    *args, "-t", tag, "-f", str(context / "Dockerfile"), str(context),
                ),
                stdout=out, stderr=subprocess.STDOUT, text=True, timeout=900, check=False,
            )  # fmt: skip

    def keep_only(self, name: str) -> None:
        """Remove the other tags of `name`'s repository: stand-ins of an older recipe."""
        repo = name.rpartition(":")[0]
        listed = self.run("images", "--format", "{{.Name}}:{{.Tag}}").split()
        for other in listed:
            if other.rpartition(":")[0] == repo and other != name:
                self.remove_image(other)

    def remove_image(self, name: str) -> None:
        subprocess.run(self.cmd("rmi", "--force", name), capture_output=True, check=False)
        # The builder stage's image and anything a failed build left behind.
        subprocess.run(self.cmd("rmi", "--prune"), capture_output=True, check=False)

    @contextlib.contextmanager
    def mounted(self, image: str) -> Iterator[Path]:
        """A working container of `image`, its root filesystem mounted; removed after."""
        ctr = self.run("from", "--pull-never", image)
        try:
            yield Path(self.run("mount", ctr))
        finally:
            subprocess.run(self.cmd("umount", ctr), capture_output=True, check=False)
            self.run("rm", ctr)


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:16]


def python_standin(b: Buildah) -> str:
    """The PYTHON_IMAGE stand-in (built once per recipe and host CA bundle)."""
    recipe = json.dumps([SUITE, PACKAGES, SHAPE_LIKE_PYTHON_SLIM, BASE_ENV]).encode()
    name = f"localhost/dpo-standin-python:{_digest(recipe, CA_BUNDLE.read_bytes())}"
    if b.has_image(name):
        return name
    with tempfile.TemporaryDirectory(prefix="dpo-standin-") as tmp:
        tar = Path(tmp) / "root.tar"
        proc = subprocess.run(
            [
                "mmdebstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
                f"--customize-hook={SHAPE_LIKE_PYTHON_SLIM}", SUITE, str(tar),
            ],
            env={**os.environ, "CA_BUNDLE": str(CA_BUNDLE)},
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"mmdebstrap failed:\n{proc.stderr[-3000:]}")
        b.commit_rootfs(name, tar, BASE_ENV)
    b.keep_only(name)
    return name


def uv_standin(b: Buildah) -> str:
    """The UV_IMAGE stand-in: `/uv`, the host's uv binary (built once per binary)."""
    uv = host_uv()
    assert uv is not None
    binary = uv.resolve().read_bytes()
    name = f"localhost/dpo-standin-uv:{_digest(binary)}"
    if b.has_image(name):
        return name
    ctr = b.run("from", "scratch")
    try:
        b.run("copy", "--chmod", "0755", ctr, str(uv.resolve()), "/uv")
        b.run("commit", ctr, name)
    finally:
        b.run("rm", ctr)
    b.keep_only(name)
    return name


def dockerfile_defaults(context: Path = ROOT) -> dict[str, str]:
    """The Dockerfile's `ARG NAME=default` lines."""
    out = {}
    for line in (context / "Dockerfile").read_text().splitlines():
        if line.startswith("ARG ") and "=" in line:
            name, _, value = line.removeprefix("ARG ").partition("=")
            out[name.strip()] = value.strip()
    return out
