"""`discover`'s output and exit codes without a cluster: the JSON shape docs/exports.md
documents, pinned; the table; `--pool`; usage errors."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from dynamo_pool_operator import cli
from dynamo_pool_operator.api.mcs import Importer
from dynamo_pool_operator.discover import command, view
from dynamo_pool_operator.discover.find import Discovered, Mode, find
from tests.unit.discover.test_find import mcs_slice

ROOT = Path(__file__).resolve().parents[3]


def sample() -> Discovered:
    return find(
        [
            mcs_slice("llama-pool-relay", "east", [("10.244.0.5", True), ("10.244.0.4", False)]),
            mcs_slice("llama-frontend", "east", [("10.96.0.9", True)]),
            mcs_slice("qwen-pool-relay", "west", [("10.245.0.4", False)]),
            mcs_slice("llama-frontend", None, name="orphan"),
        ]
    )


def test_the_json_shape_is_pinned() -> None:
    """Exactly the shape docs/exports.md documents: keys, types, order of the lists."""
    assert json.loads(view.format_json(sample())) == {
        "pools": [
            {
                "cluster": "east",
                "namespace": "dynamo",
                "name": "llama",
                "live": True,
                "relay": {
                    "service": "llama-pool-relay",
                    "endpoints": [
                        {"address": "10.244.0.4", "ready": False},
                        {"address": "10.244.0.5", "ready": True},
                    ],
                },
                "frontends": [
                    {
                        "service": "llama-frontend",
                        "endpoints": [{"address": "10.96.0.9", "ready": True}],
                    }
                ],
                "problems": [],
            },
            {
                "cluster": "west",
                "namespace": "dynamo",
                "name": "qwen",
                "live": False,
                "relay": {
                    "service": "qwen-pool-relay",
                    "endpoints": [{"address": "10.245.0.4", "ready": False}],
                },
                "frontends": [],
                "problems": [
                    "no ready relay endpoint (1 endpoint, none Ready): not live",
                    "no qwen-frontend imported from cluster west: the router finds no frontend "
                    "for this pool",
                ],
            },
        ],
        "skipped": [
            {
                "namespace": "dynamo",
                "service": "llama-frontend",
                "why": "EndpointSlice orphan has no multicluster.kubernetes.io/source-cluster "
                "label: the router cannot tell which cluster it came from",
            },
            {
                "namespace": "dynamo",
                "service": "qwen-pool-relay",
                "why": "no ready relay endpoint: pool west/dynamo/qwen is not live",
            },
        ],
    }


def _keys(value: Any) -> Any:
    """The shape of a JSON value: its keys, recursively (the first item of a list)."""
    if isinstance(value, dict):
        return {k: _keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_keys(value[0])] if value else []
    return type(value).__name__


def test_the_documented_json_example_has_the_shape_of_the_output() -> None:
    """docs/exports.md's example keeps the keys and types of what the command prints."""
    text = (ROOT / "docs" / "exports.md").read_text()
    start = text.index("```json\n", text.index("## As the Global Router sees it"))
    documented = json.loads(text[start + len("```json\n") : text.index("```", start + 7)])
    printed = json.loads(view.format_json(sample()))
    assert _keys(documented["pools"][0]) == _keys(printed["pools"][0])
    assert _keys(documented["skipped"][0]) == _keys(printed["skipped"][0])


def test_the_table() -> None:
    lines = view.format_table(sample()).splitlines()
    assert lines[:3] == [
        "CLUSTER   NAMESPACE   NAME    LIVE   RELAY       FRONTENDS",
        "east      dynamo      llama   yes    1/2 ready   llama-frontend (1/1 ready)",
        "west      dynamo      qwen    no     0/1 ready   -",
    ]
    text = "\n".join(lines)
    assert "  relay llama-pool-relay: 10.244.0.4 not ready, 10.244.0.5 ready" in text
    assert "  frontend llama-frontend: 10.96.0.9 ready" in text
    assert "  problem: no ready relay endpoint (1 endpoint, none Ready): not live" in text
    assert "Not used by the router:" in text
    assert "  dynamo/qwen-pool-relay: no ready relay endpoint" in text


def test_the_table_with_no_pool() -> None:
    assert view.format_table(Discovered()) == (
        "No pools found: no imported relay Service (<dgd>-pool-relay).\n"
    )


def test_narrowed_to_one_pool() -> None:
    found = view.narrowed(sample(), "west/dynamo/qwen")
    assert [p.key for p in found.pools] == ["west/dynamo/qwen"]
    assert {s.namespace for s in found.skipped} == {"dynamo"}
    assert view.narrowed(sample(), "east/other/llama").skipped == ()


def test_the_karmada_selector_and_the_mcs_selector() -> None:
    assert view.selector(Mode.MCS) == "multicluster.kubernetes.io/service-name"
    assert view.selector(Mode.KARMADA) == (
        "endpointslice.kubernetes.io/managed-by=endpointslice-controller.karmada.io"
    )
    # Karmada before v1.15.0: no manager, and no selector matches a prefix (`derived-`).
    assert view.selector(Mode.KARMADA_DERIVED) == "kubernetes.io/service-name"


@pytest.mark.parametrize(
    ("implementation", "karmada", "named", "why"),
    [
        (None, False, None, ""),
        ("lighthouse", False, Importer.LIGHTHOUSE, ""),
        ("karmada", False, Importer.KARMADA, ""),
        ("karmada", True, Importer.KARMADA, ""),
        (
            "cilium",
            True,
            None,
            "--implementation cilium is a standard MCS implementation and --karmada reads a "
            "Karmada control plane: drop one",
        ),
        (
            "submariner",
            False,
            None,
            "--implementation takes one of lighthouse, cilium, karmada, not 'submariner'",
        ),
    ],
)
def test_the_implementation_named(
    implementation: str | None, karmada: bool, named: Importer | None, why: str
) -> None:
    opts = command.Options(implementation=implementation, karmada=karmada)
    assert command.importer(opts) == (named, why)


@pytest.mark.parametrize("value", ["east/ns", "east/ns/name/x", "/ns/name", "east//name", ""])
def test_pool_must_name_three_parts(value: str) -> None:
    assert command.parse_pool(value) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["discover", "--pool", "east/llama"], "--pool takes CLUSTER/NAMESPACE/NAME"),
        (["discover", "--pool", "east/a/llama", "-n", "b"], "is not in namespace 'b'"),
        (["discover", "--karmada", "--implementation", "lighthouse"], "drop one"),
    ],
)
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code = cli.main(args)
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert message in err


def test_bad_flags_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["discover", "-o", "yaml"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        cli.main(["discover", "-n", "a", "-A"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        cli.main(["discover", "--implementation", "submariner"])
    assert e.value.code == 2


async def test_without_a_cluster_exits_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    err = io.StringIO()
    code = await command.run(command.Options(), out=io.StringIO(), err=err)
    assert code == 2
    assert err.getvalue().startswith("error: no Kubernetes configuration found")
