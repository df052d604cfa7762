"""The CLI's `manifests`, `status` and `version` commands, without a cluster."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamo_pool_operator import __version__, admission, cli, logs, rbac, status
from dynamo_pool_operator.api import crd


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------ manifests
def test_manifests_crds_is_the_crd_alone(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "manifests", "crds")
    assert code == 0
    assert out == yaml.safe_dump(crd.crd(), sort_keys=False)


def test_manifests_all_is_crd_then_rbac_then_admission(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "manifests")
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    assert docs[0] == crd.crd()
    assert docs[1] == rbac.service_account(rbac.DEFAULT_NAMESPACE, rbac.DEFAULT_SERVICE_ACCOUNT)
    ns = rbac.DEFAULT_NAMESPACE
    operator = rbac.render(ns, rbac.DEFAULT_SERVICE_ACCOUNT, None, ns)
    assert docs[2:] == operator + rbac.user_roles() + admission.render()


def test_manifests_admission_restricted_binds_in_the_namespace(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "manifests", "admission", "--restricted", "team-a")
    assert code == 0
    assert list(yaml.safe_load_all(out)) == admission.render("team-a")


def test_manifests_rbac_restricted(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "manifests", "rbac", "--namespace", "ops", "--restricted", "team-a")
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    assert docs[0]["kind"] == "ServiceAccount"
    assert docs[0]["metadata"]["namespace"] == "ops"
    where = {(d["kind"], d["metadata"]["name"]): d["metadata"].get("namespace") for d in docs}
    assert where[("Role", "dynamo-pool-operator")] == "team-a"
    # The operator puts its Lease in the restricted namespace, so the Role goes there.
    assert where[("Role", "dynamo-pool-operator-leader-election")] == "team-a"
    assert where[("ClusterRole", "dynamo-pool-operator-clusterproperty-reader")] is None
    assert ("ClusterRole", "dynamo-pool-operator") not in where


def test_manifests_refuses_an_unknown_kind(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["manifests", "secrets"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "version") == (0, f"dynamo-pool-operator {__version__}\n", "")


@pytest.mark.parametrize("command", ["manifests", "status", "discover", "check", "run", "dev"])
def test_every_command_has_help(capsys: pytest.CaptureFixture[str], command: str) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--help"])
    assert exc.value.code == 0
    assert "usage: dynamo-pool-operator" in capsys.readouterr().out


# ------------------------------------------------------------------ status
def relay(
    name: str,
    namespace: str = "team-a",
    *,
    ready: str | None = "True",
    reason: str = "Published",
    message: str = "",
    exports: list[dict[str, str]] | None = None,
    generation: int = 1,
    observed: int = 1,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace, "generation": generation}
    }
    if ready is not None:
        obj["status"] = {
            "observedGeneration": observed,
            "conditions": [
                {"type": "Ready", "status": ready, "reason": reason, "message": message}
            ],
            "exports": exports or [],
        }
    return obj


def test_status_table() -> None:
    rows = [
        status.row_of(
            relay(
                "llama",
                exports=[
                    {"name": "llama-pool-relay", "state": "Exported"},
                    {"name": "llama-frontend", "state": "Exported"},
                    {
                        "name": "llama-chat",
                        "state": "Pending",
                        "reason": "Conflict",
                        "message": "owned by someone else",
                    },
                ],
            )
        ),
        status.row_of(
            relay("mistral", "team-b", ready="False", reason="DGDNotFound", message="no DGD")
        ),
        status.row_of(relay("new", ready=None)),
    ]
    text = status.format_table(rows)
    lines = text.splitlines()
    assert lines[0].split() == [
        "NAMESPACE", "NAME", "READY", "REASON", "AVAILABLE", "EXPORTED", "EXPORTS"
    ]  # fmt: skip
    assert lines[1].split() == ["team-a", "llama", "True", "Published", "-", "-", "2/3", "exported"]
    assert lines[2].split() == ["team-a", "new", "Unknown", "NotReconciled", "-", "-", "-"]
    assert lines[3].split() == ["team-b", "mistral", "False", "DGDNotFound", "-", "-", "-"]
    # Columns line up.
    assert lines[1].index("True") == lines[0].index("READY")
    assert "  export llama-chat        Pending  Conflict: owned by someone else" in lines
    assert "  export llama-pool-relay  Exported" in lines
    assert "  DGDNotFound: no DGD" in lines
    assert "team-b/mistral:" in lines


def test_status_explains_each_part_of_ready_that_is_not_true() -> None:
    obj = relay("llama", ready="False", reason="Unavailable", message="RelayAvailable: no pod")
    obj["status"]["relayPods"] = "0/2"
    obj["status"]["conditions"] = [
        {"type": "Published", "status": "True", "reason": "Published", "message": "ok"},
        {"type": "RelayAvailable", "status": "False", "reason": "Unavailable", "message": "no pod"},
        {"type": "Exported", "status": "False", "reason": "ConflictingPorts", "message": "ports"},
        *obj["status"]["conditions"],
    ]
    lines = status.format_table([status.row_of(obj)]).splitlines()
    assert lines[1].split()[2:6] == ["False", "Unavailable", "0/2", "False"]
    at = lines.index("  RelayAvailable False Unavailable: no pod")
    assert lines[at + 1] == (
        "    what to do: `kubectl describe deployment llama-pool-relay -n team-a` and its "
        "pods' events say why no relay pod is available"
    )
    assert "  Exported False ConflictingPorts: ports" in lines
    assert not any(line.startswith("  Published") for line in lines), "True parts are quiet"


def _failing(*conditions: tuple[str, str, str]) -> list[str]:
    obj = relay("llama", ready="False", reason=conditions[0][1], message="")
    obj["status"]["conditions"] = [
        {"type": t, "status": "False", "reason": r, "message": m} for t, r, m in conditions
    ] + obj["status"]["conditions"]
    return status.format_table([status.row_of(obj)]).splitlines()


def test_status_gives_one_hint_for_the_first_failing_part_only() -> None:
    """Ready names the first part that is not True: the one to fix first. Its hint only;
    the parts after it follow from it or wait their turn."""
    lines = _failing(
        ("RelayAvailable", "Unavailable", "no pod"),
        ("Exported", "ConflictingPorts", "ports"),
    )
    hints = [line for line in lines if "what to do" in line]
    assert len(hints) == 1, hints
    assert "kubectl describe deployment llama-pool-relay" in hints[0]
    assert lines[lines.index("  RelayAvailable False Unavailable: no pod") + 1] == hints[0]


def test_status_hint_is_about_the_reason_at_hand() -> None:
    """An invalid `podLabels` is `InvalidConfiguration`, whose meaning in the docs also
    covers a relay name that gives an invalid Service name: the hint must not speak of
    Service names, nor carry the docs table's `False:` prefix."""
    message = "spec.podLabels: app.kubernetes.io/name is set by the operator"
    lines = _failing(("Published", "InvalidConfiguration", message))
    hints = [line for line in lines if "what to do" in line]
    assert hints == [
        "    what to do: fix the field the message names: "
        "`kubectl edit dynamopoolrelay llama -n team-a`"
    ]


@pytest.mark.parametrize(
    ("type_", "reason"),
    [
        ("Published", "DGDTerminating"),  # passes by itself
        ("RelayAvailable", "Withdrawn"),  # Published says why
        ("Exported", "Pending"),  # the implementation is working
    ],
)
def test_status_says_nothing_when_there_is_nothing_to_do(type_: str, reason: str) -> None:
    assert not [line for line in _failing((type_, reason, "why")) if "what to do" in line]


def test_status_hint_for_the_implementations_own_reason() -> None:
    lines = _failing(("Exported", "ConflictingPorts", "ports"))
    assert [line for line in lines if "what to do" in line] == [
        "    what to do: the MCS implementation's own reason: see its documentation, and the "
        "export's status (`kubectl get serviceexport NAME -n team-a -o yaml`)"
    ]


def test_every_hint_is_of_a_declared_reason_and_says_what_to_do() -> None:
    from dynamo_pool_operator.api.conditions import MEANINGS, ConditionType, ReadyReason

    declared = {(t, r) for t, reasons in MEANINGS.items() for r in reasons}
    declared |= {(ConditionType.READY, r) for r in ReadyReason}
    for type_, reason in status.HINTS:
        assert (type_, reason) in declared, (type_, reason)
        said = status.what_to_do(type_, reason, "ns", "llama")
        assert said, (type_, reason)
        assert said.split(":")[0] not in ("True", "False", "Unknown"), said
        assert "{" not in said.replace("{.metadata", ""), said
        assert said != MEANINGS.get(type_, {}).get(reason), "the docs' meaning, not a hint"


def test_status_marks_a_stale_report() -> None:
    row = status.row_of(relay("llama", generation=3, observed=2))
    assert row.stale
    assert "True (stale)" in status.format_table([row])


def test_status_empty() -> None:
    assert status.format_table([]) == "No DynamoPoolRelays found.\n"


async def test_status_without_a_cluster_exits_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No kubeconfig is bad usage (nothing was asked of a cluster), as for every command
    (exitcodes.py)."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    err = io.StringIO()
    code = await status.run(out=io.StringIO(), err=err)
    assert code == status.EXIT_USAGE
    assert err.getvalue().startswith("error: no Kubernetes configuration found")


# ------------------------------------------------------------------ check and crds --apply
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "--wait", "soon"], "--wait: invalid duration"),
        (["check", "--configmap", "no-namespace"], "--configmap takes NAMESPACE/NAME"),
        (["manifests", "rbac", "--apply"], "--apply installs the CRDs only"),
        (["manifests", "--apply"], "--apply installs the CRDs only"),
    ],
)
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = run(capsys, *args)
    assert (code, out) == (2, "")
    assert message in err


@pytest.mark.parametrize(
    "args", [["check"], ["manifests", "crds", "--apply"], ["status"], ["discover"], ["run"]]
)
def test_every_command_without_a_cluster_exits_2(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    args: list[str],
) -> None:
    """One code for one failure, whatever the command (exitcodes.py): no kubeconfig is
    bad usage, nothing was asked of a cluster."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setattr(logs, "setup", lambda level, fmt: None)  # `run` logs its error
    code, _, err = run(capsys, *args)
    assert code == 2, args
    if args != ["run"]:
        assert err.startswith("error: no Kubernetes configuration found"), err
