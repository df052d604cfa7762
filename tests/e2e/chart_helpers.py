"""Running the helm we build against the chart in deploy/helm."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamo_pool_operator.config import OperatorConfiguration, parse_configuration

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "dynamo-pool-operator"


def helm_binary() -> Path:
    """`resolve().helm`: the helm built by tools/controlplane/build.sh (or provided)."""
    from dynamo_pool_operator.localcluster.assets import resolve

    helm = resolve().helm
    if helm is None:
        pytest.fail("helm was not built: run `make controlplane` (or set TEST_ASSET_HELM)")
    return helm


def helm(*args: str, values: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    """Run helm with `values` passed as a values file (exact types, no --set parsing)."""
    with tempfile.TemporaryDirectory(prefix="dpo-helm-") as tmp:
        cmd = [str(helm_binary()), *args]
        if values is not None:
            path = Path(tmp) / "values.yaml"
            path.write_text(yaml.safe_dump(values))
            cmd += ["--values", str(path)]
        # Private helm homes: keep helm away from the user's repositories and config.
        # HOME too: `helm install` caches discovery under $HOME/.kube, and with no HOME
        # that is the working directory (the repository).
        env = {
            "HOME": tmp,
            "HELM_CACHE_HOME": f"{tmp}/cache",
            "HELM_CONFIG_HOME": f"{tmp}/config",
            "HELM_DATA_HOME": f"{tmp}/data",
            "PATH": "/usr/bin:/bin",
        }
        return subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=120, check=False
        )


def template(
    values: dict[str, Any] | None = None,
    *,
    release: str = "dynamo-pool-operator",
    namespace: str = "dpo-system",
    include_crds: bool = False,
    hooks: bool = True,
) -> list[dict[str, Any]]:
    """`helm template` of the chart, parsed; fails the test with helm's message.
    `hooks=False` leaves out Helm hooks (the CRD upgrade Job and its identity), which
    `helm install` runs apart from the release's objects."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    if include_crds:
        args.append("--include-crds")
    if not hooks:
        args.append("--no-hooks")
    proc = helm(*args, values=values)
    assert proc.returncode == 0, f"helm template failed:\n{proc.stderr}"
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def template_error(values: dict[str, Any]) -> str:
    """helm template's error output for values that must be refused."""
    proc = helm("template", "x", str(CHART), "--namespace", "dpo-system", values=values)
    assert proc.returncode != 0, "helm template accepted values it must refuse"
    return proc.stderr


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"want one {kind} {name or ''}, got {len(found)}"
    return found[0]


def rendered_configuration(docs: list[dict[str, Any]]) -> OperatorConfiguration:
    """The ConfigMap's config.yaml, decoded strictly as the operator decodes it."""
    text = one(docs, "ConfigMap")["data"]["config.yaml"]
    return parse_configuration(yaml.safe_load(text), "ConfigMap config.yaml")


def restricted_values(target: str) -> dict[str, Any]:
    return {"namespaceRestriction": {"enabled": True, "targetNamespace": target}}
