"""Unit tests for runtime.auth.cluster: choosing between kubeconfig and in-cluster config,
and the in-cluster service-account config.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dynamo_pool_operator.runtime.auth.config import (
    ClusterConfig,
    ConfigError,
    load_config,
    load_incluster_config,
)
from tests.clock import FakeClock
from tests.unit.runtime.auth.support import (
    Pki,
    simple_kubeconfig,
    tls_server,
    whoami,
)


def test_load_config_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    simple_kubeconfig(home / ".kube" / "config", {}, {"server": "https://home"})
    env_file = simple_kubeconfig(tmp_path / "env", {}, {"server": "https://env"})
    explicit = simple_kubeconfig(tmp_path / "explicit", {}, {"server": "https://explicit"})
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KUBECONFIG", str(env_file))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert load_config(str(explicit)).server == "https://explicit"
    assert load_config().server == "https://env"
    monkeypatch.delenv("KUBECONFIG")
    assert load_config().server == "https://home"


def test_load_config_falls_back_to_in_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token")
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    cfg = load_config(service_account_dir=sa)
    assert cfg.source == "in-cluster"
    assert cfg.server == "https://10.96.0.1:443"
    with pytest.raises(ConfigError, match="context 'dev' was requested"):
        load_config(context="dev", service_account_dir=sa)

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(ConfigError, match=r"no Kubernetes configuration found.*KUBECONFIG"):
        load_config(service_account_dir=sa)


def test_explicit_kubeconfig_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"kubeconfig .*nope: no such file"):
        load_config(str(tmp_path / "nope"))


@pytest.fixture
def service_account(pki: Pki, tmp_path: Path) -> Path:
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text("sa-1")
    (sa / "ca.crt").write_bytes(pki.ca_pem)
    (sa / "namespace").write_text("operators\n")
    return sa


async def test_in_cluster(
    pki: Pki, tmp_path: Path, service_account: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    clock = FakeClock()
    cfg = load_incluster_config(directory=service_account, clock=clock)
    assert isinstance(cfg, ClusterConfig)
    assert (cfg.server, cfg.source, cfg.namespace) == (
        "https://10.96.0.1:443",
        "in-cluster",
        "operators",
    )
    assert await cfg.credentials.headers() == {"Authorization": "Bearer sa-1"}

    (service_account / "token").write_text("sa-2")
    await clock.advance(60)
    assert await cfg.credentials.headers() == {"Authorization": "Bearer sa-2"}
    (service_account / "token").write_text("sa-3")
    cfg.credentials.invalidate()  # a 401: the bound token rotated under us
    assert await cfg.credentials.headers() == {"Authorization": "Bearer sa-3"}

    async with tls_server(pki, tmp_path) as port:
        assert await whoami(await cfg.credentials.ssl_context(), port) == "anonymous"


def test_in_cluster_ipv6_host(service_account: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "fd00:10:96::1", "KUBERNETES_SERVICE_PORT": "443"}
    cfg = load_incluster_config(directory=service_account, environ=env)
    assert cfg.server == "https://[fd00:10:96::1]:443"


def test_in_cluster_errors(tmp_path: Path, service_account: Path) -> None:
    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT"):
        load_incluster_config(directory=service_account, environ={})
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(ConfigError, match=r"no service-account token at .*automountServiceAccount"):
        load_incluster_config(directory=tmp_path / "empty", environ=env)
