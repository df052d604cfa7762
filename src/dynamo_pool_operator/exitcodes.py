"""The exit codes of every command, in one place, each with one meaning whatever the
command: a script that runs `status`, `check`, `discover` or `run` reads the same code
for the same failure. `TABLE` is docs/troubleshooting.md's table and each command's
`--help` line (`help_line`); a test keeps the doc equal to it.

A leaf module below every command, so the commands share the codes without importing
each other (the import-linter contracts in pyproject.toml keep them independent).
"""

from __future__ import annotations

EXIT_OK = 0
#: The cluster could not be used (unreachable, the credentials or the RBAC refused), or
#: it answered no: `run` could not start or lost its Lease, a check failed, a pool is
#: not live, a CRD was not applied.
EXIT_FAILURE = 1
#: Bad usage: invalid flags, an invalid configuration (file or ConfigMap), or a
#: kubeconfig that cannot be used; nothing was started.
EXIT_USAGE = 2
#: Interrupted (Ctrl-C) before it was done, as a shell reports SIGINT (128 + 2).
EXIT_INTERRUPTED = 130

#: (code, meaning): the documented table.
TABLE: tuple[tuple[int, str], ...] = (
    (
        EXIT_OK,
        "Done: what was asked is so (`check`: no check failed, warnings allowed; `run`: "
        "stopped by SIGTERM or Ctrl-C once started).",
    ),
    (
        EXIT_FAILURE,
        "The cluster could not be used (unreachable, credentials or RBAC refused), or it "
        "answered no: `run` could not start or lost its Lease, a `check` failed, the "
        "`discover --pool` is not live, the CRD was not applied.",
    ),
    (
        EXIT_USAGE,
        "Bad usage: invalid flags, an invalid configuration (file or ConfigMap), or a "
        "kubeconfig that cannot be used (none found, an unknown context). Nothing was started.",
    ),
    (
        EXIT_INTERRUPTED,
        "Interrupted (Ctrl-C) before it was done: `run` while it started, `dev`, "
        "`check --wait`. One line, no traceback.",
    ),
)


def help_line(failure: str) -> str:
    """A command's `--help` line: the codes, with what 1 means for that command."""
    return (
        f"exit codes: 0 ok, 1 {failure}, 2 bad usage (flags, configuration, kubeconfig), "
        "130 interrupted"
    )
