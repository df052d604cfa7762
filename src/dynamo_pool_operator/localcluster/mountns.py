"""A private `/run` for a peer process that insists on using the host's.

Some real peers read or write fixed paths under `/run`: the Submariner Lighthouse agent
reads its in-cluster credentials from `/var/run/secrets/...`, cilium-operator creates
`/var/run/cilium` and writes its health history there. Each such process runs in a
mount namespace of its own (`unshare`) with a per-process directory bind-mounted on
`/run`: it finds what we put there, its writes stay there (and go with the control
plane's directory), and nothing of the host's `/run` is seen or touched. No other
mount is changed, and nothing is mounted outside the namespace.
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
