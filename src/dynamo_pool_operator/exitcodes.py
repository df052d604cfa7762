"""The exit codes of every command, in one place: 0 success; 1 a runtime failure (startup,
lost leadership, the cluster cannot be read, a `check` failed); 2 invalid configuration
or usage (nothing was started); 130 interrupted (Ctrl-C) before it was done.

A leaf module below every command, so the commands share the codes without importing
each other (the import-linter contracts in pyproject.toml keep them independent).
"""

from __future__ import annotations

EXIT_OK = 0
#: Startup failed, leadership was lost, the cluster could not be read, a check failed.
EXIT_FAILURE = 1
#: Bad usage: invalid flags or an invalid configuration (file or ConfigMap); nothing
#: was started.
EXIT_USAGE = 2
#: Interrupted (Ctrl-C) before it was done, as a shell reports SIGINT (128 + 2): one
#: line, never a traceback.
EXIT_INTERRUPTED = 130
