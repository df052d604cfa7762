"""Unit tests for runtime.auth.exec_plugin: exec credential plugins, run for real
as tiny Python scripts.
"""

from __future__ import annotations

import asyncio
import json
import stat
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dynamo_pool_operator.runtime.auth.config import (
    ConfigError,
    ExecConfig,
    ExecCredentials,
    load_kubeconfig,
)
from dynamo_pool_operator.runtime.auth.exec_plugin import EXEC_STDOUT_LIMIT
from tests.clock import FakeClock
from tests.unit.runtime.auth.support import (
    V1,
    V1BETA1,
    Pki,
    b64,
    simple_kubeconfig,
    tls_server,
    whoami,
)

PLUGIN = textwrap.dedent(
    """\
    import json, os, sys, time
    log = os.environ["PLUGIN_LOG"]
    with open(log, "a") as f:
        f.write(json.dumps({"argv": sys.argv[1:], "info": os.environ.get("KUBERNETES_EXEC_INFO"),
                            "extra": os.environ.get("PLUGIN_EXTRA")}) + "\\n")
    calls = sum(1 for _ in open(log))
    time.sleep(float(os.environ.get("PLUGIN_SLEEP", "0")))
    if os.environ.get("PLUGIN_FAIL"):
        sys.stderr.write(os.environ["PLUGIN_FAIL"])
        sys.exit(3)
    out = open(os.environ["PLUGIN_RESPONSE"]).read().replace("{n}", str(calls))
    sys.stdout.write(out)
    """
)


@dataclass
class Plugin:
    """A Python exec plugin whose answer and invocations the test controls."""

    dir: Path

    @property
    def log(self) -> Path:
        return self.dir / "calls.log"

    @property
    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def respond(self, status: dict[str, Any], api_version: str = V1, **extra: Any) -> None:
        doc = {"apiVersion": api_version, "kind": "ExecCredential", "status": status, **extra}
        (self.dir / "response.json").write_text(json.dumps(doc))

    def exec_stanza(self, api_version: str = V1, **env: str) -> dict[str, Any]:
        env = {
            "PLUGIN_LOG": str(self.log),
            "PLUGIN_RESPONSE": str(self.dir / "response.json"),
            **env,
        }
        return {
            "apiVersion": api_version,
            "command": sys.executable,
            "args": [str(self.dir / "plugin.py"), "--flag"],
            "env": [{"name": k, "value": v} for k, v in env.items()],
            "interactiveMode": "Never",
            "installHint": "install it with: pip install demo-auth",
        }

    def config(self, api_version: str = V1, **env: str) -> ExecConfig:
        stanza = self.exec_stanza(api_version, **env)
        return ExecConfig(
            command=stanza["command"],
            api_version=api_version,
            args=stanza["args"],
            env={e["name"]: e["value"] for e in stanza["env"]},
            install_hint=stanza["installHint"],
            what="user 'u' in test",
        )


@pytest.fixture
def plugin(tmp_path: Path) -> Plugin:
    d = tmp_path / "plugin"
    d.mkdir()
    (d / "plugin.py").write_text(PLUGIN)
    return Plugin(d)


@pytest.mark.parametrize("api_version", [V1, V1BETA1])
async def test_exec_token(tmp_path: Path, plugin: Plugin, api_version: str) -> None:
    plugin.respond({"token": "exec-token-{n}"}, api_version)
    stanza = plugin.exec_stanza(api_version, PLUGIN_EXTRA="from-env")
    stanza["provideClusterInfo"] = True
    cfg = load_kubeconfig(simple_kubeconfig(tmp_path / "config", {"exec": stanza}))
    assert await cfg.credentials.headers() == {"Authorization": "Bearer exec-token-1"}
    assert await cfg.credentials.headers() == {"Authorization": "Bearer exec-token-1"}, "cached"

    [call] = plugin.calls
    assert call["argv"] == ["--flag"]
    assert call["extra"] == "from-env"
    info = json.loads(call["info"])
    assert info["apiVersion"] == api_version
    assert info["kind"] == "ExecCredential"
    assert info["spec"]["interactive"] is False
    assert info["spec"]["cluster"]["server"] == "https://k8s.example:6443"


async def test_exec_relative_command_resolves_against_kubeconfig(
    tmp_path: Path, plugin: Plugin
) -> None:
    script = tmp_path / "bin" / "auth-plugin"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\n" + PLUGIN)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    plugin.respond({"token": "rel"})
    stanza = {**plugin.exec_stanza(), "command": "./bin/auth-plugin", "args": []}
    cfg = load_kubeconfig(simple_kubeconfig(tmp_path / "config", {"exec": stanza}))
    assert await cfg.credentials.headers() == {"Authorization": "Bearer rel"}


async def test_exec_refreshes_before_expiry(plugin: Plugin) -> None:
    clock = FakeClock()  # 2026-01-01T00:00:00Z
    plugin.respond({"token": "t{n}", "expirationTimestamp": "2026-01-01T00:01:00Z"})
    creds = ExecCredentials(plugin.config(), clock=clock)
    assert await creds.headers() == {"Authorization": "Bearer t1"}
    await clock.advance(20)
    assert await creds.headers() == {"Authorization": "Bearer t1"}
    await clock.advance(15)  # within 30 s of expiry: refresh early
    assert await creds.headers() == {"Authorization": "Bearer t2"}
    assert len(plugin.calls) == 2


async def test_exec_expired_credential_is_re_executed(plugin: Plugin) -> None:
    plugin.respond({"token": "t{n}", "expirationTimestamp": "2020-01-01T00:00:00Z"})
    creds = ExecCredentials(plugin.config())
    assert await creds.headers() == {"Authorization": "Bearer t1"}
    assert await creds.headers() == {"Authorization": "Bearer t2"}
    assert len(plugin.calls) == 2


async def test_exec_invalidate_re_executes_and_refreshes_are_serialized(plugin: Plugin) -> None:
    plugin.respond({"token": "t{n}"})  # no expiry: valid until a 401
    creds = ExecCredentials(plugin.config(PLUGIN_SLEEP="0.2"))
    results = await asyncio.gather(*(creds.headers() for _ in range(5)))
    assert {r["Authorization"] for r in results} == {"Bearer t1"}
    assert len(plugin.calls) == 1
    creds.invalidate()
    assert await creds.headers() == {"Authorization": "Bearer t2"}


async def test_exec_client_certificate(pki: Pki, tmp_path: Path, plugin: Plugin) -> None:
    plugin.respond(
        {
            "clientCertificateData": pki.client_cert_pem.decode(),
            "clientKeyData": pki.client_key_pem.decode(),
        }
    )
    cluster = {"server": "https://x", "certificate-authority-data": b64(pki.ca_pem)}
    cfg = load_kubeconfig(
        simple_kubeconfig(tmp_path / "config", {"exec": plugin.exec_stanza()}, cluster)
    )
    assert await cfg.credentials.headers() == {}
    ctx = await cfg.credentials.ssl_context()
    assert await cfg.credentials.ssl_context() is ctx, "same material, same context"
    async with tls_server(pki, tmp_path) as port:
        assert await whoami(ctx, port) == "alice"
    assert len(plugin.calls) == 1


async def test_exec_failure_reports_exit_code_and_stderr(plugin: Plugin) -> None:
    creds = ExecCredentials(plugin.config(PLUGIN_FAIL="error: token expired, run login"))
    with pytest.raises(ConfigError, match=r"exited with code 3: error: token expired, run login"):
        await creds.headers()


async def test_exec_missing_command_shows_install_hint(plugin: Plugin, tmp_path: Path) -> None:
    stanza = {**plugin.exec_stanza(), "command": "dpo-no-such-auth-plugin"}
    cfg = load_kubeconfig(simple_kubeconfig(tmp_path / "config", {"exec": stanza}))
    with pytest.raises(ConfigError) as info:
        await cfg.credentials.headers()
    message = str(info.value)
    assert "'dpo-no-such-auth-plugin'" in message
    assert "executable not found" in message
    assert "install it with: pip install demo-auth" in message
    assert "user 'u'" in message


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (lambda p: (p.dir / "response.json").write_text("not json"), "not an ExecCredential"),
        (lambda p: p.respond({"token": "x"}, V1BETA1), "configured for apiVersion .*v1 but"),
        (lambda p: p.respond({}), "neither a token nor a client certificate"),
        (lambda p: p.respond({"clientCertificateData": "c"}), "only one of clientCertificate"),
        (
            lambda p: p.respond({"token": "x", "expirationTimestamp": "soon"}),
            "not an RFC 3339 time",
        ),
    ],
)
async def test_exec_bad_output(
    plugin: Plugin, write: Callable[[Plugin], object], message: str
) -> None:
    write(plugin)
    with pytest.raises(ConfigError, match=message):
        await ExecCredentials(plugin.config()).headers()


async def test_exec_output_that_is_no_credential_is_never_quoted(plugin: Plugin) -> None:
    """Whatever a plugin prints on stdout may be a secret (a token in the wrong shape): an
    error says how much it printed, never what."""
    (plugin.dir / "response.json").write_text("token=s3cr3t-abcdef\n")
    with pytest.raises(ConfigError) as info:
        await ExecCredentials(plugin.config()).headers()
    assert "s3cr3t" not in str(info.value)
    assert "printed 20 bytes that are not an ExecCredential" in str(info.value)


async def test_exec_output_is_read_up_to_a_cap(plugin: Plugin) -> None:
    (plugin.dir / "response.json").write_text("x" * (EXEC_STDOUT_LIMIT + 1))
    with pytest.raises(ConfigError, match=r"printed more than 1048576 bytes"):
        await ExecCredentials(plugin.config()).headers()


async def test_exec_stderr_is_capped_to_its_tail(plugin: Plugin) -> None:
    noise = "n" * 100_000 + "the last words"
    creds = ExecCredentials(plugin.config(PLUGIN_FAIL=noise))
    with pytest.raises(ConfigError) as info:
        await creds.headers()
    message = str(info.value)
    assert message.endswith("the last words")
    assert len(message) < 2_300


async def test_exec_timeout_kills_plugin(plugin: Plugin) -> None:
    plugin.respond({"token": "late"})
    creds = ExecCredentials(plugin.config(PLUGIN_SLEEP="30"), timeout=0.5)
    with pytest.raises(ConfigError, match=r"did not finish within 0.5s"):
        await creds.headers()


def test_exec_ignored_when_static_token_is_set(tmp_path: Path, plugin: Plugin) -> None:
    user = {"token": "static", "exec": plugin.exec_stanza()}
    creds = load_kubeconfig(simple_kubeconfig(tmp_path / "config", user)).credentials
    assert asyncio.run(creds.headers()) == {"Authorization": "Bearer static"}
    assert plugin.calls == []
