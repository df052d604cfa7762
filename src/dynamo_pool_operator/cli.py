"""`dynamo-pool-operator`: run | dev | status | discover | check | manifests | version.

Exit codes: one table for every command (exitcodes.py, docs/troubleshooting.md): 0 ok,
1 the cluster could not be used or answered no, 2 bad usage, 130 interrupted. Ctrl-C
before a command is done is one line and 130, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

import yaml

from dynamo_pool_operator import __version__, logs, rbac
from dynamo_pool_operator.api.mcs import Importer
from dynamo_pool_operator.config import ConfigurationError, load_configuration
from dynamo_pool_operator.config_fields import parse_duration
from dynamo_pool_operator.exitcodes import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    TABLE,
    help_line,
)

#: The local control plane `dev` starts; the operator image leaves it out.
LOCAL_CLUSTER = f"{__package__}.localcluster"
NO_LOCAL_CLUSTER = (
    "dynamo-pool-operator: dev starts local control planes and needs a source checkout "
    "(run `make dev` there); this install has no local cluster (the operator image "
    "leaves it out)"
)

DESCRIPTION = """\
Makes NVIDIA Dynamo pools discoverable across clusters: for each DynamoPoolRelay it
runs the pool's relay (a Deployment and the Service <dgd>-pool-relay) and keeps the
pool's Multi-Cluster Services ServiceExports right.

exit codes, the same for every command:
""" + "\n".join(
    textwrap.fill(meaning, 84, initial_indent=f"  {code:<4}", subsequent_indent=" " * 6)
    for code, meaning in TABLE
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dynamo-pool-operator",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run the operator against a cluster",
        description="Run the operator: serve probes and metrics, watch the relays, lead "
        "and reconcile until SIGTERM (or Ctrl-C). At start it checks that the APIs it "
        "needs are served and that its identity holds its RBAC, and exits at once naming "
        "what is missing. "
        + help_line(
            "it could not start (cluster unreachable, an API or a permission "
            "missing) or lost its Lease"
        ),
    )
    run.add_argument("--config", metavar="PATH", help="OperatorConfiguration file (YAML/JSON)")
    run.add_argument(
        "--kubeconfig", metavar="PATH", help="default: $KUBECONFIG, ~/.kube/config, in-cluster"
    )
    run.add_argument("--context", help="kubeconfig context (default: current-context)")

    dev = sub.add_parser(
        "dev",
        help="start a local control plane with a sample pool and run the operator on it",
        description="With no cluster needed: builds (first run: 20-45 min) and starts "
        "etcd + kube-apiserver + kube-controller-manager on 127.0.0.1 with a kwok Node "
        "(pods are scheduled and become Ready; no container runs), installs the CRDs, "
        "creates a sample DynamoGraphDeployment and its DynamoPoolRelay, runs the operator "
        "in the foreground and prints the result: the pool's exports and its relay pods "
        "Running. Ctrl-C stops everything. "
        + help_line("the clusters or the operator could not start"),
    )
    dev.add_argument("--config", metavar="PATH", help="OperatorConfiguration for the operator")
    dev.add_argument(
        "--log-format",
        choices=["auto", "json", "console"],
        help="overrides logging.format; for dev, auto (the default) is console lines "
        "(time level logger message key=value), piped or not (`make dev LOG_FORMAT=json`)",
    )
    dev.add_argument(
        "--exit-when-ready",
        action="store_true",
        help="stop once the sample pool is published (for scripts and tests)",
    )
    dev.add_argument(
        "--clusters",
        type=int,
        choices=[1, 2],
        default=1,
        help="2: clusters east and west joined by Submariner Lighthouse; the pool runs in "
        "east and the report shows it as west sees it (its ServiceImports and ready "
        "endpoints)",
    )

    status = sub.add_parser(
        "status",
        help="show each DynamoPoolRelay: published or not, why, and its exports",
        description="A table of relays (NAMESPACE NAME READY REASON EXPORTS), then, for "
        "each relay not Ready, its conditions that are not True with what to do about the "
        "first, and the state of each export. Reads only. "
        + help_line("the cluster cannot be read"),
    )
    status.add_argument(
        "--kubeconfig", metavar="PATH", help="default: $KUBECONFIG, ~/.kube/config, in-cluster"
    )
    status.add_argument("--context", help="kubeconfig context (default: current-context)")
    scope = status.add_mutually_exclusive_group()
    scope.add_argument(
        "-n", "--namespace", help="only this namespace (default: the context's namespace)"
    )
    scope.add_argument(
        "-A", "--all-namespaces", action="store_true", help="relays of every namespace"
    )

    disc = sub.add_parser(
        "discover",
        help="show the pools a consuming cluster imports, as the Global Router finds them",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""\
Reads the imported EndpointSlices, as the Global Router does (never the exports), and
prints every pool it would find: the pool key (source cluster, namespace, DGD name), the
relay endpoints and their readiness, the frontend Services imported for it, live or not;
then what it would not use, and why. Reads only: it needs `list` on
endpointslices.discovery.k8s.io; `list` on serviceimports.multicluster.x-k8s.io (and
works.work.karmada.io with --karmada) lets it explain more, and without it, it says so.

Standard MCS: slices labelled multicluster.kubernetes.io/service-name and
multicluster.kubernetes.io/source-cluster, never one Kubernetes' own EndpointSlice
controllers made (they copy any Service's labels); --implementation takes only the
slices that implementation manages. --karmada: point it at the Karmada control plane;
slices derived-<service> from Karmada's endpointslice controller (labelled with its
manager from Karmada v1.15.0, v1.14.4, v1.13.7; an older Karmada's are read by name, and
said so), the cluster from their Work's namespace karmada-es-<member>.
"""
        + help_line("the cluster cannot be read, or the --pool named is not live"),
    )
    disc.add_argument(
        "--kubeconfig", metavar="PATH", help="default: $KUBECONFIG, ~/.kube/config, in-cluster"
    )
    disc.add_argument("--context", help="kubeconfig context (default: current-context)")
    disc.add_argument(
        "--karmada",
        action="store_true",
        help="the cluster is a Karmada control plane: read the slices Karmada collects",
    )
    disc.add_argument(
        "--implementation",
        choices=[i.value for i in Importer],
        help="take only the imports this implementation writes (its EndpointSlice manager); "
        "karmada implies --karmada, without reading an older Karmada's slices by name",
    )
    disc_scope = disc.add_mutually_exclusive_group()
    disc_scope.add_argument(
        "-n", "--namespace", help="only this namespace (default: the context's namespace)"
    )
    disc_scope.add_argument(
        "-A", "--all-namespaces", action="store_true", help="pools of every namespace"
    )
    disc.add_argument("-o", "--output", choices=["table", "json"], default="table")
    disc.add_argument(
        "--pool",
        metavar="CLUSTER/NAMESPACE/NAME",
        help="show only this pool (in its namespace unless -A) and exit 1 unless it is live",
    )

    check = sub.add_parser(
        "check",
        help="check the cluster and the operator: APIs, CRDs, RBAC, leader, exports, relays",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""\
One line per check, ✔ ok, ‼ warning, ✘ failed, and what to do when it is not ok:
api-server, relay-crd (installed, and the version this binary serves), dgd-crd,
serviceexport-api (multicluster.x-k8s.io, or which other group is there), cluster-id
(About API property vs relays' clusterId), karmada-names (55 characters), rbac
(SelfSubjectAccessReview of every rule in rbac.py, as --as), leader (the Lease's holder
and age), exports-terminating, confirmation (exports the configured
multiCluster.confirmation cannot be met for), foreign-exports, relays-ready.

Reads only. The operator's configuration (which implementation, namespace restriction,
Lease) comes from --configmap or --config; without them, from the chart's ConfigMap
when exactly one is found by its labels (in the namespace of --as's ServiceAccount or
--operator-namespace, else in every namespace), else the defaults. The first line says
which, and why the defaults.
"""
        + help_line("a check failed (warnings allowed), the API server unreachable is one"),
    )
    check.add_argument(
        "--kubeconfig", metavar="PATH", help="default: $KUBECONFIG, ~/.kube/config, in-cluster"
    )
    check.add_argument("--context", help="kubeconfig context (default: current-context)")
    source = check.add_mutually_exclusive_group()
    source.add_argument(
        "--configmap",
        metavar="NAMESPACE/NAME",
        help="read the operator's configuration from its ConfigMap (the chart's: "
        "<release namespace>/<fullname>)",
    )
    source.add_argument("--config", metavar="PATH", help="an OperatorConfiguration file")
    check.add_argument(
        "--as",
        dest="as_user",
        metavar="USER",
        help="ask the RBAC check as this user, e.g. "
        "system:serviceaccount:dynamo-pool-operator:dynamo-pool-operator (needs impersonate); "
        "in the operator's pod it asks as itself",
    )
    check.add_argument(
        "--operator-namespace",
        metavar="NS",
        help="the operator's namespace, where its Lease is when the configuration names none, "
        "and where the chart's ConfigMap is looked for "
        "(default: the ConfigMap's, else the pod's, else dynamo-pool-operator)",
    )
    check.add_argument("-o", "--output", choices=["text", "json"], default="text")
    check.add_argument(
        "--wait",
        metavar="DURATION",
        default="0s",
        help="run the checks again until none fails or DURATION (e.g. 5m) passes",
    )

    man = sub.add_parser(
        "manifests",
        help="print the CRD, RBAC and admission policy manifests as YAML (or install the "
        "CRD: crds --apply)",
        description="Render what the operator needs installed, from the code that defines "
        "it: `crds` (the DynamoPoolRelay CRD), `rbac` (ServiceAccount, roles, bindings), "
        "`admission` (the ValidatingAdmissionPolicy that lets only those who may create "
        "Deployments set a relay's pod fields, and its binding) or `all`. Pipe to "
        "`kubectl apply -f -`. `crds --apply` installs or upgrades the CRD "
        "itself (what the Helm chart's upgrade hook runs): it replaces the stored spec with "
        "this version's, keeps others' labels and annotations, and waits until the CRD is "
        "Established; exit 1 when it cannot. It refuses, writing nothing, to replace a CRD "
        "of a newer operator version (unless --allow-downgrade) or one whose "
        "status.storedVersions this version does not serve.",
    )
    man.add_argument("what", nargs="?", default="all", choices=["all", "crds", "rbac", "admission"])
    man.add_argument(
        "--apply",
        action="store_true",
        help="with `crds`: install or upgrade the CRD in the cluster instead of printing it",
    )
    man.add_argument(
        "--allow-downgrade",
        action="store_true",
        help="with --apply: apply the CRD even when the installed one is from a newer "
        "operator version (or its version cannot be compared); refused without it",
    )
    man.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="with --apply: default $KUBECONFIG, ~/.kube/config, in-cluster",
    )
    man.add_argument("--context", help="with --apply: kubeconfig context")
    man.add_argument(
        "--namespace",
        default=rbac.DEFAULT_NAMESPACE,
        metavar="NS",
        help=f"namespace of the operator's ServiceAccount and Lease "
        f"(default: {rbac.DEFAULT_NAMESPACE})",
    )
    man.add_argument(
        "--service-account",
        default=rbac.DEFAULT_SERVICE_ACCOUNT,
        metavar="NAME",
        help=f"the operator's ServiceAccount, which the bindings name "
        f"(default: {rbac.DEFAULT_SERVICE_ACCOUNT})",
    )
    man.add_argument(
        "--restricted",
        metavar="NS",
        help="namespace-restricted install: the manager rules become a Role in NS "
        "(and the Lease lives there), not a ClusterRole; the admission policy is bound "
        "in NS only",
    )

    sub.add_parser("version", help="print the version")
    return p


def manifests(
    what: str = "all",
    *,
    namespace: str = rbac.DEFAULT_NAMESPACE,
    restricted: str | None = None,
    service_account: str = rbac.DEFAULT_SERVICE_ACCOUNT,
) -> list[dict[str, Any]]:
    """The documents `manifests` prints: the CRD, then the RBAC (ServiceAccount first, so
    `kubectl apply` creates it before the bindings that name it), then the admission
    policy and its binding. The Lease lives in the restricted namespace when there is
    one, as the operator itself defaults it."""
    from dynamo_pool_operator import admission
    from dynamo_pool_operator.api import crd

    docs: list[dict[str, Any]] = []
    if what in ("all", "crds"):
        docs.append(crd.crd())
    if what in ("all", "rbac"):
        docs.append(rbac.service_account(namespace, service_account))
        docs += rbac.render(namespace, service_account, restricted, restricted or namespace)
        docs += rbac.user_roles()
    if what in ("all", "admission"):
        docs += admission.render(restricted)
    return docs


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        # Ctrl-C before the command installed its own handling (imports, a control
        # plane starting, a read in flight): one line, as a shell reports SIGINT.
        print(f"dynamo-pool-operator {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "version":
        print(f"dynamo-pool-operator {__version__}")
        return 0
    if args.command == "check":
        from dynamo_pool_operator import check as check_cmd

        try:
            wait = parse_duration(args.wait)
        except ValueError as e:
            print(f"error: --wait: {e}; use a Go duration such as 5m or 90s", file=sys.stderr)
            return EXIT_USAGE
        if args.configmap is not None and args.configmap.count("/") != 1:
            print("error: --configmap takes NAMESPACE/NAME", file=sys.stderr)
            return EXIT_USAGE
        opts = check_cmd.Options(
            kubeconfig=args.kubeconfig,
            context=args.context,
            config_path=args.config,
            configmap=args.configmap,
            as_user=args.as_user,
            operator_namespace=args.operator_namespace,
            output=args.output,
            wait=max(wait, 0.0),
        )
        return asyncio.run(check_cmd.run(opts))
    if args.command == "manifests" and args.apply:
        if args.what != "crds":
            print(
                "error: --apply installs the CRDs only: use `manifests crds --apply` (RBAC is "
                "the chart's or `manifests rbac | kubectl apply -f -`)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        from dynamo_pool_operator import crd_install

        return asyncio.run(
            crd_install.run(
                kubeconfig=args.kubeconfig,
                context=args.context,
                out=sys.stdout,
                err=sys.stderr,
                allow_downgrade=args.allow_downgrade,
            )
        )
    if args.command == "manifests" and args.allow_downgrade:
        print("error: --allow-downgrade goes with `manifests crds --apply`", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "manifests":
        docs = manifests(
            args.what,
            namespace=args.namespace,
            restricted=args.restricted,
            service_account=args.service_account,
        )
        sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False))
        return 0
    if args.command == "discover":
        from dynamo_pool_operator.discover import command as discover_cmd

        return asyncio.run(
            discover_cmd.run(
                discover_cmd.Options(
                    kubeconfig=args.kubeconfig,
                    context=args.context,
                    karmada=args.karmada,
                    namespace=args.namespace,
                    all_namespaces=args.all_namespaces,
                    output=args.output,
                    pool=args.pool,
                    implementation=args.implementation,
                )
            )
        )
    if args.command == "status":
        from dynamo_pool_operator import status

        return asyncio.run(
            status.run(
                kubeconfig=args.kubeconfig,
                context=args.context,
                namespace=args.namespace,
                all_namespaces=args.all_namespaces,
            )
        )
    try:
        config = load_configuration(args.config)
    except ConfigurationError as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE
    fmt = getattr(args, "log_format", None) or config.logging.format
    if args.command == "dev":
        # A person runs dev, piped to `tee` or `less` as often as not: lines to read.
        fmt = logs.for_people(fmt)
    logs.setup(config.logging.level, fmt)
    if args.command == "run":
        from dynamo_pool_operator import process

        try:
            return asyncio.run(
                process.run(config, kubeconfig=args.kubeconfig, context=args.context)
            )
        except Exception as e:
            # `run` reports every failure it expects in one line; this is the backstop
            # for one it does not: still one line, the traceback only at debug level.
            log = logging.getLogger("dynamo_pool_operator")
            log.error(
                "operator failed: %s: %s (logging.level debug shows where)", type(e).__name__, e
            )
            log.debug("operator failed", exc_info=True)
            return EXIT_FAILURE
    if args.command == "dev":
        if importlib.util.find_spec(LOCAL_CLUSTER) is None:
            print(NO_LOCAL_CLUSTER, file=sys.stderr)
            return EXIT_FAILURE
        from dynamo_pool_operator import dev

        return asyncio.run(
            dev.run(config, exit_when_ready=args.exit_when_ready, clusters=args.clusters)
        )
    return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
