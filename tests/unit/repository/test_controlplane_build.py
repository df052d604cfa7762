"""The control-plane build script's cache check (`reports` in build.sh).

`reports` decides whether a cached binary is reused or rebuilt, and the build fails
when a fresh binary does not report the pinned version. It once piped the binary
into `grep -q` under `pipefail`: grep exits at its first match, a binary that prints
more lines afterwards dies of SIGPIPE, and the check failed about one run in twenty
for etcd (four lines) — CI went red in 2 s on a perfectly good cache. These tests
run the function itself, extracted from the script, against fake binaries.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

BUILD_SH = Path(__file__).resolve().parents[3] / "tools" / "controlplane" / "build.sh"


def _function(name: str = "reports") -> str:
    text = BUILD_SH.read_text()
    found = re.search(rf"^{name}\(\) \{{.*?^\}}$", text, re.MULTILINE | re.DOTALL)
    assert found, f"build.sh no longer defines {name}()"
    return found.group(0)


def _fake(tmp_path: Path, body: str) -> Path:
    binary = tmp_path / "fake"
    binary.write_text("#!/usr/bin/env bash\n" + body + "\n")
    binary.chmod(0o755)
    return binary


def _reports(binary: Path, want: str, *args: str, function: str = "reports") -> int:
    script = "set -euo pipefail\n" + _function(function) + f'\n{function} "$@"\n'
    done = subprocess.run(
        ["bash", "-c", script, function, str(binary), want, *args],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return done.returncode


def test_a_binary_that_keeps_printing_after_the_match_is_accepted(tmp_path: Path) -> None:
    # The pause makes the old pipe-into-grep-q version fail every time, not 1 in 20.
    fake = _fake(
        tmp_path,
        'echo "etcd Version: 3.6.16"; sleep 0.3; echo "Git SHA: none"; echo "Go Version: x"',
    )
    assert _reports(fake, "etcd Version: 3.6.16", "--version") == 0


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ('echo "etcd Version: 3.6.15"', "another version"),
        ('echo "etcd Version: 3.6.16"; exit 3', "the binary failed"),
        ('echo "etcd Version: 3.6.16" >&2', "the version only on stderr"),
    ],
)
def test_a_binary_that_does_not_report_the_version_is_rebuilt(
    tmp_path: Path, body: str, why: str
) -> None:
    assert _reports(_fake(tmp_path, body), "etcd Version: 3.6.16", "--version") != 0, why


def test_a_missing_binary_is_rebuilt(tmp_path: Path) -> None:
    assert _reports(tmp_path / "absent", "v1.37.2", "--version") != 0


def test_the_version_arguments_reach_the_binary(tmp_path: Path) -> None:
    fake = _fake(tmp_path, '[ "$*" = "version --client" ] && echo "Client Version: v1.37.2"')
    assert _reports(fake, "v1.37.2", "version", "--client") == 0
    assert _reports(fake, "v1.37.2", "--version") != 0


# The Lighthouse agent prints its version on stderr only (and logs nothing else
# with -version): `reports_on_stderr` is the same check on the other stream.
def test_a_version_on_stderr_is_accepted_by_the_stderr_check(tmp_path: Path) -> None:
    fake = _fake(tmp_path, 'echo "banner"; echo "agent version: v0.20.0" >&2; echo "more" >&2')
    assert _reports(fake, "version: v0.20.0", "-version", function="reports_on_stderr") == 0


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ('echo "agent version: v0.19.0" >&2', "another version"),
        ('echo "agent version: v0.20.0" >&2; exit 1', "the binary failed"),
        ('echo "agent version: v0.20.0"', "the version only on stdout"),
        ('echo "agent version: not-compiled-properly" >&2', "built without the version ldflag"),
    ],
)
def test_the_stderr_check_rebuilds_what_does_not_report_the_version(
    tmp_path: Path, body: str, why: str
) -> None:
    fake = _fake(tmp_path, body)
    assert _reports(fake, "version: v0.20.0", "-version", function="reports_on_stderr") != 0, why


def test_a_missing_binary_is_rebuilt_by_the_stderr_check(tmp_path: Path) -> None:
    assert _reports(tmp_path / "absent", "v0.20.0", "-version", function="reports_on_stderr") != 0
