"""`make dev`'s cluster as a target of the project's own CLI: a kubeconfig at one path
every run, lines that run as printed, and the operator's configuration and Lease where
`check` looks for them. Without a cluster (tests/e2e/test_first_steps.py runs them)."""

from __future__ import annotations

import dataclasses
import stat
import sys
from pathlib import Path

import pytest
import yaml

from dynamo_pool_operator import dev, rbac
from dynamo_pool_operator.check.configuration import CHART_SELECTOR, CONFIG_KEY
from dynamo_pool_operator.config import OperatorConfiguration, parse_configuration

README = Path(__file__).resolve().parents[2] / "README.md"


def _one(server: str, user: str) -> str:
    """A kubeconfig of one cluster, named as ControlPlane names its own."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "dpo-local", "cluster": {"server": server}}],
            "users": [{"name": "admin", "user": {"token": user}}],
            "contexts": [
                {"name": "dpo-local", "context": {"cluster": "dpo-local", "user": "admin"}}
            ],
            "current-context": "dpo-local",
        }
    )


def test_the_kubeconfig_is_at_one_path_every_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPO_CACHE_DIR", raising=False)
    first = dev.kubeconfig_path()
    assert first == dev.kubeconfig_path()
    assert first == Path.home() / ".cache" / "dynamo-pool-operator" / "dev" / "kubeconfig"
    monkeypatch.setenv("DPO_CACHE_DIR", "/elsewhere")
    assert dev.kubeconfig_path() == Path("/elsewhere/dev/kubeconfig")


def test_the_merged_kubeconfig_has_a_context_per_cluster() -> None:
    merged = yaml.safe_load(
        dev.merged_kubeconfig(
            {"east": _one("https://127.0.0.1:1", "e"), "west": _one("https://127.0.0.1:2", "w")}
        )
    )
    assert merged["current-context"] == "east"
    clusters = {c["name"]: c["cluster"]["server"] for c in merged["clusters"]}
    users = {u["name"]: u["user"]["token"] for u in merged["users"]}
    by_context = {
        c["name"]: (clusters[c["context"]["cluster"]], users[c["context"]["user"]])
        for c in merged["contexts"]
    }
    assert by_context == {
        "east": ("https://127.0.0.1:1", "e"),
        "west": ("https://127.0.0.1:2", "w"),
    }


def test_the_kubeconfig_is_owner_only_and_goes_with_its_run(tmp_path: Path) -> None:
    path = tmp_path / "dev" / "kubeconfig"
    with dev.published_kubeconfig(path, "mine") as where:
        assert where.read_text() == "mine"
        assert stat.S_IMODE(where.stat().st_mode) == 0o600
    assert not path.exists()


def test_a_later_runs_kubeconfig_stays(tmp_path: Path) -> None:
    """Two runs at once: the first to end leaves the other's kubeconfig alone."""
    path = tmp_path / "kubeconfig"
    with dev.published_kubeconfig(path, "first"):
        path.write_text("second")
    assert path.read_text() == "second"


def test_the_cli_is_named_as_it_runs_from_any_shell(tmp_path: Path) -> None:
    script = tmp_path / "venv" / "bin" / "dynamo-pool-operator"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    # On PATH: its name.
    assert dev.cli_command(str(script), lambda _: str(script)) == "dynamo-pool-operator"
    # Another one on PATH, or none (`make dev` runs the checkout's virtualenv's): its path.
    assert dev.cli_command(str(script), lambda _: "/usr/local/bin/dynamo-pool-operator") == str(
        script
    )
    assert dev.cli_command(str(script), lambda _: None) == str(script)
    # Not run by its script (`python -m`, a test runner): this Python, with -m.
    assert dev.cli_command("/x/pytest", lambda _: None) == (
        f"{sys.executable} -m dynamo_pool_operator.cli"
    )


def test_devs_configuration_is_where_check_finds_the_charts() -> None:
    cfg = dev.as_deployed(dev.dev_configuration(OperatorConfiguration()))
    cm = dev.configmap(cfg)
    key, _, value = CHART_SELECTOR.partition("=")
    assert cm["metadata"]["labels"][key] == value
    assert cm["metadata"]["namespace"] == dev.OPERATOR_NAMESPACE
    assert parse_configuration(yaml.safe_load(cm["data"][CONFIG_KEY]), "dev") == cfg


def test_dev_holds_the_lease_the_readmes_release_would() -> None:
    """The README installs release `dynamo-pool-operator` in namespace
    `dynamo-pool-operator`: its Lease is the default name, in that namespace."""
    le = dev.as_deployed(OperatorConfiguration()).leader_election
    assert le.enabled
    assert (le.namespace, le.name) == ("dynamo-pool-operator", rbac.DEFAULT_LEASE_NAME)
    assert "--namespace dynamo-pool-operator " in README.read_text()


def test_a_configured_lease_or_restriction_is_kept() -> None:
    base = OperatorConfiguration()
    elsewhere = dataclasses.replace(
        base, leader_election=dataclasses.replace(base.leader_election, namespace="ops")
    )
    assert dev.as_deployed(elsewhere).leader_election.namespace == "ops"
    restricted = dataclasses.replace(
        base, namespace=dataclasses.replace(base.namespace, restricted="team")
    )
    assert dev.as_deployed(restricted).leader_election.namespace == ""
    off = dataclasses.replace(
        base, leader_election=dataclasses.replace(base.leader_election, enabled=False)
    )
    assert not dev.as_deployed(off).leader_election.enabled


def _readme_dev_sample() -> list[str]:
    """The README's `make dev` sample from "Look at it" to the end of its block."""
    lines = README.read_text().splitlines()
    at = lines.index(next(line for line in lines if line.startswith("Look at it")))
    return lines[at : lines.index("```", at)]


def test_the_readme_dev_sample_is_what_dev_prints() -> None:
    """Line for line, for the sample's paths (the kubeconfig, the CLI, kubectl)."""
    sample = _readme_dev_sample()
    kubeconfig = sample[1].strip().removeprefix("export KUBECONFIG=")
    cli = sample[2].strip().removesuffix(" status -A")
    kubectl = sample[4].strip().partition(" get ")[0]
    printed = dev.look_lines(Path(kubeconfig), cli, kubectl)[1:] + list(dev.CHART_ON_DEV)
    assert sample == printed
