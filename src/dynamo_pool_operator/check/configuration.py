"""Which operator configuration `check` checks against, and saying so.

The checks depend on it (which MCS implementation, the namespace restriction, the
Lease), and the defaults are rarely what an install runs: checked against them, a
working operator can look broken (no Lease where the defaults put it) or a broken one
fine. So the source is always named in the output's first line: `--config PATH`,
`--configmap NS/NAME`, else the chart's ConfigMap found by its labels when exactly one
is visible, else the defaults, with why (none, several — listed — or not allowed to
look). The search reads with the caller's credentials, in `--operator-namespace`,
else in the namespace of `--as`'s ServiceAccount (the chart puts both in the release
namespace), else, in a pod, the pod's; otherwise in every namespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import yaml

from dynamo_pool_operator.config import (
    OperatorConfiguration,
    load_configuration,
    parse_configuration,
)
from dynamo_pool_operator.runtime import Client, ConfigError, errors
from dynamo_pool_operator.runtime.objects import CONFIGMAPS, Meta

#: A label every object of the chart carries whatever `nameOverride` says
#: (deploy/helm/dynamo-pool-operator/templates/_helpers.tpl, "labels").
CHART_SELECTOR = "app.kubernetes.io/part-of=dynamo-pool-operator"
#: The key of the chart's ConfigMap the operator reads its configuration from.
CONFIG_KEY = "config.yaml"


@dataclass(frozen=True)
class Source:
    """The configuration checked against, and where it came from."""

    config: OperatorConfiguration
    kind: Literal["file", "configmap", "defaults"]
    #: The file's path or the ConfigMap's NAMESPACE/NAME; "" for the defaults.
    name: str = ""
    #: The ConfigMap was found by the chart's labels, not named with --configmap.
    found: bool = False
    #: With the defaults: why no ConfigMap of the chart was used.
    why: str = ""
    #: The chart's ConfigMaps the search saw (NAMESPACE/NAME).
    candidates: tuple[str, ...] = ()

    @property
    def namespace(self) -> str:
        """The ConfigMap's namespace (the release's), or ""."""
        return self.name.partition("/")[0] if self.kind == "configmap" else ""

    def describe(self) -> str:
        if self.kind == "file":
            return f"the configuration in {self.name}"
        if self.kind == "configmap":
            found = " (the chart's, found by its labels)" if self.found else ""
            return f"the configuration in ConfigMap {self.name}{found}"
        return f"the configuration's defaults (no --config or --configmap, and {self.why})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.kind,
            "name": self.name,
            "found": self.found,
            "candidates": list(self.candidates),
            "summary": self.describe(),
        }


async def read_configmap(client: Client, ref: str) -> OperatorConfiguration:
    """The operator's configuration from its ConfigMap `NAMESPACE/NAME` (key config.yaml),
    decoded as strictly as the operator decodes it."""
    ns, _, name = ref.partition("/")
    text = ((await client.get(CONFIGMAPS, name, ns)).get("data") or {}).get(CONFIG_KEY)
    if text is None:
        raise ConfigError(f"ConfigMap {ref} has no {CONFIG_KEY}")
    return _decode(text, ref)


def _decode(text: str, ref: str) -> OperatorConfiguration:
    return parse_configuration(yaml.safe_load(text), f"ConfigMap {ref}")


async def chart_configmaps(client: Client, namespace: str | None) -> dict[str, str]:
    """The config.yaml of each ConfigMap of the chart (its label and that key) in
    `namespace`, or in every namespace when None, by NAMESPACE/NAME."""
    found = (await client.list(CONFIGMAPS, namespace, label_selector=CHART_SELECTOR)).items
    out = {}
    for cm in found:
        text = (cm.get("data") or {}).get(CONFIG_KEY)
        if isinstance(text, str):
            meta = Meta(cm)
            out[f"{meta.namespace}/{meta.name}"] = text
    return dict(sorted(out.items()))


async def choose(
    client: Client,
    *,
    config_path: str | None,
    configmap: str | None,
    search_namespace: str | None,
) -> Source:
    """The configuration to check against. Raises what reading a named or found source
    raises (ConfigurationError, ConfigError, ApiError); a search that cannot look falls
    back to the defaults and says why, as the first line must."""
    if configmap:
        return Source(await read_configmap(client, configmap), "configmap", configmap)
    if config_path is not None:
        return Source(load_configuration(config_path), "file", config_path)
    where = f"namespace {search_namespace}" if search_namespace else "any namespace"
    try:
        found = await chart_configmaps(client, search_namespace)
    except errors.ApiError as e:
        why = f"ConfigMaps in {where} could not be listed ({e}): name it with --configmap"
        return Source(OperatorConfiguration(), "defaults", why=why)
    candidates = tuple(found)
    if len(candidates) == 1:
        ref = candidates[0]
        return Source(_decode(found[ref], ref), "configmap", ref, True, candidates=candidates)
    if candidates:
        why = (
            f"{len(candidates)} ConfigMaps of the chart in {where}: {', '.join(candidates)}; "
            "name one with --configmap"
        )
    else:
        why = f"no ConfigMap of the chart in {where}"
    return Source(OperatorConfiguration(), "defaults", why=why, candidates=candidates)
