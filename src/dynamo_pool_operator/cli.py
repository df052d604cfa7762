"""`dynamo-pool-operator`: run | dev | manifests | version.

Exit codes: 0 success; 1 runtime failure (startup, lost leadership);
2 invalid configuration or usage (nothing was started).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

import yaml

from . import __version__, logs
from .config import ConfigurationError, load_configuration
from .process import EXIT_CONFIG, EXIT_FAILURE

DESCRIPTION = """\
Makes NVIDIA Dynamo pools discoverable across clusters: for each DynamoPoolRelay it
runs the pool's relay (a Deployment and the Service <dgd>-pool-relay) and keeps the
pool's Multi-Cluster Services ServiceExports right.

exit codes: 0 ok, 1 runtime failure (startup, lost leadership), 2 invalid configuration
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dynamo-pool-operator",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run the operator against a cluster")
    run.add_argument("--config", metavar="PATH", help="OperatorConfiguration file (YAML/JSON)")
    run.add_argument(
        "--kubeconfig", metavar="PATH", help="default: $KUBECONFIG, ~/.kube/config, in-cluster"
    )
    run.add_argument("--context", help="kubeconfig context (default: current-context)")

    dev = sub.add_parser(
        "dev",
        help="start a local control plane with a sample pool and run the operator on it",
        description="With no cluster needed: builds (first run: 10-40 min) and starts "
        "etcd + kube-apiserver + the garbage collector on 127.0.0.1, installs the CRDs, "
        "creates a sample DynamoGraphDeployment and its DynamoPoolRelay, runs the operator "
        "in the foreground and prints how to look at the result. Ctrl-C stops everything.",
    )
    dev.add_argument("--config", metavar="PATH", help="OperatorConfiguration for the operator")
    dev.add_argument(
        "--exit-when-ready",
        action="store_true",
        help="stop once the sample pool is published (for scripts and tests)",
    )

    man = sub.add_parser("manifests", help="print the CRD (and RBAC) manifests as YAML")
    man.add_argument("what", nargs="?", default="all", choices=["all", "crds"])

    sub.add_parser("version", help="print the version")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "version":
        print(f"dynamo-pool-operator {__version__}")
        return 0
    if args.command == "manifests":
        from .api import crd

        sys.stdout.write(yaml.safe_dump(crd.crd(), sort_keys=False))
        return 0
    try:
        config = load_configuration(args.config)
    except ConfigurationError as e:
        print(str(e), file=sys.stderr)
        return EXIT_CONFIG
    logs.setup(config.logging.level, config.logging.format)
    if args.command == "run":
        from . import process

        return asyncio.run(process.run(config, kubeconfig=args.kubeconfig, context=args.context))
    if args.command == "dev":
        from . import dev

        return asyncio.run(dev.run(config, exit_when_ready=args.exit_when_ready))
    return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
