"""What one slice or import says (discover/slices.py): whether the router may take a
slice for an import at all (who wrote it), whether it would list it, and which
ServiceImports say their implementation writes no slices. Table-driven, one row per rule."""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.api.mcs import Importer
from dynamo_pool_operator.discover.slices import Mode, absent_imports, is_import, untrusted
from tests.unit.discover.test_find import NS, karmada_slice, managed, mcs_slice, service_import

LIGHTHOUSE = "lighthouse-agent.submariner.io"
CILIUM = "endpointslice-mesh-controller.cilium.io"
KUBE = "endpointslice-controller.k8s.io"
MIRRORING = "endpointslicemirroring-controller.k8s.io"


@pytest.mark.parametrize(
    ("mode", "implementation", "manager", "refused"),
    [
        # Kubernetes' own controllers, in every mode, with or without an implementation.
        (Mode.MCS, None, KUBE, True),
        (Mode.MCS, None, MIRRORING, True),
        (Mode.MCS, Importer.LIGHTHOUSE, KUBE, True),
        (Mode.KARMADA_DERIVED, None, KUBE, True),
        # Without an implementation named, any other manager (or none) is taken.
        (Mode.MCS, None, LIGHTHOUSE, False),
        (Mode.MCS, None, CILIUM, False),
        (Mode.MCS, None, "someone-else.example.com", False),
        (Mode.MCS, None, None, False),
        # With one, only its own.
        (Mode.MCS, Importer.LIGHTHOUSE, LIGHTHOUSE, False),
        (Mode.MCS, Importer.LIGHTHOUSE, CILIUM, True),
        (Mode.MCS, Importer.LIGHTHOUSE, None, True),
        (Mode.MCS, Importer.CILIUM, CILIUM, False),
        (Mode.MCS, Importer.CILIUM, LIGHTHOUSE, True),
        (Mode.KARMADA, Importer.KARMADA, "endpointslice-controller.karmada.io", False),
        # Karmada's older slices carry no manager; one that does is someone else's.
        (Mode.KARMADA_DERIVED, None, None, False),
        (Mode.KARMADA_DERIVED, None, "endpointslice-dispatch-controller.karmada.io", True),
    ],
)
def test_who_wrote_the_slice(
    mode: Mode, implementation: Importer | None, manager: str | None, refused: bool
) -> None:
    s = managed(mcs_slice("llama-pool-relay", name="s1"), manager)
    why = untrusted(s, mode, implementation)
    assert bool(why) is refused, why
    if refused:
        assert why.startswith(f"EndpointSlice s1 is managed by {manager or 'no one'}")


def test_a_manager_refused_for_the_implementation_named_says_which_it_wants() -> None:
    s = managed(mcs_slice("llama-pool-relay", name="s1"), None)
    assert untrusted(s, Mode.MCS, Importer.CILIUM) == (
        "EndpointSlice s1 is managed by no one (no managed-by label), not "
        "endpointslice-mesh-controller.cilium.io: not imported by cilium (--implementation "
        "cilium)"
    )


@pytest.mark.parametrize(
    ("label", "listed"),
    [("derived-llama-pool-relay", True), ("llama-pool-relay", False), ("derived-", False)],
)
def test_the_karmada_fallback_lists_the_derived_names_only(label: str, listed: bool) -> None:
    s = managed(karmada_slice("llama-pool-relay", label=label), None)
    assert is_import(s, Mode.KARMADA_DERIVED) is listed
    assert not is_import(s, Mode.KARMADA)  # the router's path wants the manager


def _import(status: dict[str, Any], name: str = "llama-pool-relay") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS}, "status": status}


@pytest.mark.parametrize(
    ("imports", "absent"),
    [
        ([service_import("llama-pool-relay")], {(NS, "llama-pool-relay"): ("east",)}),
        ([service_import("llama-pool-relay", "Present")], {}),
        ([service_import("llama-pool-relay", None)], {}),
        # The clusters are a set, sorted; an empty or malformed entry names none.
        (
            [
                _import(
                    {
                        "endpointSliceObjects": "Absent",
                        "clusters": [{"cluster": "w"}, {"cluster": "e"}, {"cluster": "w"}, {}, "x"],
                    }
                )
            ],
            {(NS, "llama-pool-relay"): ("e", "w")},
        ),
        ([_import({"endpointSliceObjects": "Absent"})], {(NS, "llama-pool-relay"): ()}),
        ([_import({"endpointSliceObjects": "absent"})], {}),
        ([{"metadata": {"name": "x"}}], {}),
    ],
)
def test_imports_whose_implementation_writes_no_slices(
    imports: list[dict[str, Any]], absent: dict[tuple[str, str], tuple[str, ...]]
) -> None:
    assert absent_imports(imports) == absent
