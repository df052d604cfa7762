"""Where a bench run files its result: the name bench/results/README.md asks for, made
by the bench from the run's own start (bench/main.py)."""

from __future__ import annotations

import pytest
from bench.main import parse_args


def test_a_named_run_is_filed_under_its_start_minute_and_what_it_measures() -> None:
    args = parse_args(["--fairness", "--pools", "5000", "--name", "fair-again"])
    stamp = args.started.strftime("%Y%m%dT%H%MZ")
    assert args.out.name == f"{stamp}-fair-again-n5000.json"
    assert args.out.parent.name == "results"
    with pytest.raises(SystemExit):
        parse_args(["--name", "fair", "--out", "/tmp/x.json"])  # one or the other
    with pytest.raises(SystemExit):
        parse_args(["--name", "fair/../x"])  # a name, not a path
