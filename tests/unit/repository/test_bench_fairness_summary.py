"""The user changes' summary (bench/fairness.py): beside each change's latency, its own
writes' round trips during the mass event, each write counted alone."""

from __future__ import annotations

from bench import fairness


def _sample(ms: float, writes: list[float], during: bool = True) -> dict[str, object]:
    return {"ms": ms, "during": during, "user_writes_ms": writes}


def test_the_changes_own_writes_are_summarised_one_by_one_during_the_event() -> None:
    samples = [
        _sample(40.0, [60.0, 70.0]),  # a rename: the DGD's patch, then the Service's create
        _sample(20.0, [30.0]),  # an export deleted: one write
        _sample(10.0, [900.0], during=False),  # after the event: not counted
    ]
    out = fairness.summary(samples)
    assert out["during"]["n"] == 2
    writes = out["user_writes_during"]
    assert writes["n"] == 3
    assert writes["max_ms"] == 70.0
    assert writes["p50_ms"] == 60.0


def test_samples_without_write_times_summarise_as_before() -> None:
    """Result files written before the field existed are read by the same summary."""
    out = fairness.summary([{"ms": 5.0, "during": True}])
    assert out["during"]["n"] == 1
    assert "user_writes_during" not in out


def test_the_chain_beside_each_change_is_summarised_during_the_event() -> None:
    """Tenants: the bench's chain of writes in a row, started with each of B's changes,
    is B's floor; only the chains of changes made during A's change count."""
    samples = [
        {"ms": 150.0, "during": True, "chain_ms": 120.0},
        {"ms": 40.0, "during": True, "chain_ms": 30.0},
        {"ms": 20.0, "during": False, "chain_ms": 900.0},
        {"ms": 25.0, "during": True},  # a change without a chain: counted in "during" only
    ]
    out = fairness.summary(samples)
    chain = out["chain_during"]
    assert chain["n"] == 2
    assert chain["max_ms"] == 120.0
    assert out["during"]["n"] == 3
