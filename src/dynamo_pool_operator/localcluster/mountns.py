"""A private `/run` for a peer process that insists on using the host's.

The Lighthouse agent reads its credentials under `/var/run/secrets`, cilium-operator
writes under `/var/run/cilium`: each runs in its own mount namespace (`unshare`) with a
per-process directory on `/run`, so nothing of the host's is seen or touched.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path


def _prefix(unshare: str) -> list[str]:
    # As root a mount namespace suffices; otherwise a user namespace maps us to root
    # inside it, which is what allows the mount.
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return [unshare, *user, "--mount", "--propagation", "private"]


@functools.cache
def refused(who: str) -> str | None:
    """Why this machine cannot give `who` (e.g. "the Lighthouse agent") a mount
    namespace of its own, or None."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return f"`unshare` (util-linux) is not installed: {who} needs a mount namespace"
    probe = subprocess.run([*_prefix(unshare), "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return (
            f"the sandbox refuses a private mount namespace for {who} "
            f"(`{' '.join(_prefix(unshare))} true`: {probe.stderr.strip()})"
        )
    return None


def with_private_run(run_dir: Path, argv: list[str]) -> list[str]:
    """The command line that runs `argv` with `run_dir` as its `/run`.

    `mount --bind` then `exec`: the program replaces the shell, so the PID its caller
    holds (and stops) is the program's own.
    """
    unshare = shutil.which("unshare")
    if unshare is None:
        raise FileNotFoundError("unshare")
    script = 'mount --bind "$0" /run && exec "$@"'
    return [*_prefix(unshare), "sh", "-c", script, str(run_dir), *argv]
