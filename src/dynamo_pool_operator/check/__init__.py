"""`dynamo-pool-operator check`: the checks of a cluster and of the operator running in it.

framework.py (the verdict, the context, running and printing) knows no check;
cluster.py and pools.py hold the checks and know only the framework; command.py
(options, configuration, the rounds of `--wait`) runs them. Only the command line
imports this package, for `Options` and `run`.
"""

from __future__ import annotations

from dynamo_pool_operator.check.command import Options, run

__all__ = ["Options", "run"]
