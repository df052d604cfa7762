"""Reading kubeconfig files the way client-go's loader does.

Several files merge by name, the first definition of an entry winning whole; relative
paths resolve against the file that defined that entry. Validation refuses what
client-go's `ConfirmUsable` does, each message naming file, entry, field and the fix.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from dynamo_pool_operator.runtime.auth.credentials import (
    ClusterConfig,
    ConfigError,
    Credentials,
    StaticCredentials,
    TokenFileCredentials,
)
from dynamo_pool_operator.runtime.auth.exec_plugin import ExecConfig, ExecCredentials
from dynamo_pool_operator.runtime.clock import Clock

log = logging.getLogger(__name__)

_KINDS = (("contexts", "context"), ("clusters", "cluster"), ("users", "user"))
_EXEC_EXTENSION = "client.authentication.k8s.io/exec"
_IMPERSONATION = ("as", "as-uid", "as-groups", "as-user-extra")


@dataclass(frozen=True)
class NamedEntry:
    """One context, cluster or user, and the file that defined it."""

    name: str
    body: dict[str, Any]
    file: Path

    def where(self, kind: str) -> str:
        return f"{kind} {self.name!r} in {self.file}"


@dataclass
class Kubeconfig:
    """Several kubeconfig files merged with client-go's precedence."""

    files: list[Path] = field(default_factory=list)
    current_context: str | None = None
    contexts: dict[str, NamedEntry] = field(default_factory=dict)
    clusters: dict[str, NamedEntry] = field(default_factory=dict)
    users: dict[str, NamedEntry] = field(default_factory=dict)

    def is_empty(self) -> bool:
        """True when nothing usable was defined (client-go then tries in-cluster)."""
        return not (self.current_context or self.contexts or self.clusters or self.users)

    def merge_file(self, path: Path) -> None:
        """Add one file's entries; names already defined by an earlier file are kept."""
        doc = _read_yaml(path)
        self.files.append(path)
        current = doc.get("current-context")
        if current is not None and not isinstance(current, str):
            raise ConfigError(f"kubeconfig {path}: current-context must be a string")
        if current and not self.current_context:
            self.current_context = current
        for plural, singular in _KINDS:
            target: dict[str, NamedEntry] = getattr(self, plural)
            for entry in _entries(doc, plural, singular, path):
                target.setdefault(entry.name, entry)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"kubeconfig {path}: cannot read it ({e.strerror or e})") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"kubeconfig {path}: not UTF-8 text ({e})") from e
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"kubeconfig {path}: not valid YAML: {e}") from e
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError(f"kubeconfig {path}: the top level must be a mapping (kind: Config)")
    return doc


def _entries(doc: dict[str, Any], plural: str, singular: str, path: Path) -> list[NamedEntry]:
    items = doc.get(plural) or []
    if not isinstance(items, list):
        raise ConfigError(f"kubeconfig {path}: {plural} must be a list of {{name, {singular}}}")
    out: list[NamedEntry] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            raise ConfigError(f"kubeconfig {path}: {plural}[{i}] has no name; give it one")
        if name in seen:
            raise ConfigError(
                f"kubeconfig {path}: {plural} has two entries named {name!r}; "
                "rename or remove one (client-go rejects this too)"
            )
        seen.add(name)
        body = item.get(singular) or {}
        if not isinstance(body, dict):
            raise ConfigError(f"kubeconfig {path}: {plural}[{name!r}].{singular} must be a mapping")
        out.append(NamedEntry(name, body, path))
    return out


def read_kubeconfigs(paths: Sequence[str | os.PathLike[str]], *, skip_missing: bool) -> Kubeconfig:
    """Merge `paths` in order. Missing files are skipped when `skip_missing` (as client-go
    does for `KUBECONFIG`), otherwise they are a `ConfigError` (an explicit path)."""
    merged = Kubeconfig()
    seen: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if p in seen:
            continue
        seen.add(p)
        if skip_missing and not p.exists():
            log.debug("kubeconfig %s does not exist; skipped", p)
            continue
        if not p.exists():
            raise ConfigError(f"kubeconfig {p}: no such file; fix the path")
        merged.merge_file(p)
    return merged


# ---------------------------------------------------------------- field helpers
def _opt_str(body: dict[str, Any], key: str, where: str) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {key} must be a string, got {type(value).__name__}")
    return value


def _bool(body: dict[str, Any], key: str, where: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {key} must be true or false, got {value!r}")
    return value


def _resolve(path: str, entry: NamedEntry) -> Path:
    p = Path(path)
    return p if p.is_absolute() else entry.file.parent / p


def _material(entry: NamedEntry, kind: str, key: str) -> bytes | None:
    """`<key>-data` (base64) or `<key>` (a file, relative to the entry's kubeconfig)."""
    where = entry.where(kind)
    data = _opt_str(entry.body, f"{key}-data", where)
    path = _opt_str(entry.body, key, where)
    if data and path:
        raise ConfigError(f"{where}: both {key} and {key}-data are set; keep only one")
    if data:
        try:
            return base64.b64decode("".join(data.split()), validate=True)
        except (binascii.Error, ValueError) as e:
            raise ConfigError(f"{where}: {key}-data is not valid base64 ({e})") from e
    if path:
        resolved = _resolve(path, entry)
        try:
            return resolved.read_bytes()
        except OSError as e:
            raise ConfigError(
                f"{where}: cannot read {key} {resolved} ({e.strerror or e}); fix the path "
                f"(relative paths are relative to {entry.file.parent})"
            ) from e
    return None


# ---------------------------------------------------------------- building
@dataclass(frozen=True)
class _Cluster:
    server: str
    ca_pem: bytes | None
    insecure: bool
    server_hostname: str | None
    proxy: str | None
    exec_info: dict[str, Any]


def _cluster(entry: NamedEntry) -> _Cluster:
    where = entry.where("cluster")
    b = entry.body
    server = _opt_str(b, "server", where)
    if not server:
        raise ConfigError(f"{where}: no server; set server to the API server's URL")
    ca = _material(entry, "cluster", "certificate-authority")
    insecure = _bool(b, "insecure-skip-tls-verify", where)
    sni = _opt_str(b, "tls-server-name", where)
    proxy = _opt_str(b, "proxy-url", where)
    if proxy is not None and urlsplit(proxy).scheme not in ("http", "https"):
        raise ConfigError(
            f"{where}: proxy-url {proxy!r} is not supported; only http:// and https:// "
            "proxies are (no socks5)"
        )
    info: dict[str, Any] = {"server": server}
    if sni:
        info["tls-server-name"] = sni
    if insecure:
        info["insecure-skip-tls-verify"] = True
    if ca:
        info["certificate-authority-data"] = base64.b64encode(ca).decode()
    if proxy:
        info["proxy-url"] = proxy
    for ext in b.get("extensions") or []:
        if isinstance(ext, dict) and ext.get("name") == _EXEC_EXTENSION:
            info["config"] = ext.get("extension")
    return _Cluster(server, ca, insecure, sni, proxy, info)


def _server_url(server: str, tls: bool, where: str) -> str:
    """client-go's defaulting: a bare host:port gets https:// if any TLS setting exists."""
    if "://" not in server:
        server = ("https://" if tls else "http://") + server
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{where}: server {server!r} is not an http(s) URL; fix server")
    return server.rstrip("/")


def _exec_config(entry: NamedEntry, raw: object, cluster: _Cluster) -> ExecConfig:
    where = entry.where("user")
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: exec must be a mapping")
    command = _opt_str(raw, "command", where + " exec")
    api_version = _opt_str(raw, "apiVersion", where + " exec")
    if not command:
        raise ConfigError(f"{where}: exec.command is empty; set the plugin to run")
    if not api_version:
        raise ConfigError(
            f"{where}: exec.apiVersion is empty; set client.authentication.k8s.io/v1 "
            "(or v1beta1, whichever the plugin speaks)"
        )
    # Only commands with a path separator are files; bare names are looked up on PATH.
    if os.sep in command:
        command = str(_resolve(command, entry))
    args = raw.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"{where}: exec.args must be a list of strings")
    env: dict[str, str] = {}
    for i, item in enumerate(raw.get("env") or []):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}: exec.env[{i}] has no name; set name and value")
        env[name] = str(item.get("value") or "")
    mode = raw.get("interactiveMode") or "IfAvailable"
    if mode == "Always":
        raise ConfigError(
            f"{where}: exec.interactiveMode is Always, but the operator has no terminal; "
            "use a plugin mode that works non-interactively (Never or IfAvailable)"
        )
    if mode not in ("Never", "IfAvailable"):
        raise ConfigError(
            f"{where}: exec.interactiveMode {mode!r} is invalid; use Never or IfAvailable"
        )
    return ExecConfig(
        command=command,
        api_version=api_version,
        args=tuple(args),
        env=env,
        install_hint=_opt_str(raw, "installHint", where) or "",
        cluster_info=cluster.exec_info if _bool(raw, "provideClusterInfo", where) else None,
        what=where,
    )


def _credentials(
    user: NamedEntry | None, cluster: _Cluster, cluster_where: str, clock: Clock | None
) -> Credentials:
    """Pick the credential holder the user's fields call for, with client-go's precedence:
    token, basic auth or a client certificate set in the file beat an exec plugin."""
    body = user.body if user else {}
    where = user.where("user") if user else "anonymous user"
    if body.get("auth-provider"):
        raise ConfigError(
            f"{where}: auth-provider is not supported (client-go removed the gcp and azure "
            "providers); configure an exec plugin instead, e.g. gke-gcloud-auth-plugin, "
            "kubelogin or aws eks get-token"
        )
    if any(body.get(k) for k in _IMPERSONATION):
        raise ConfigError(f"{where}: impersonation (as, as-uid, as-groups) is not supported")
    token = _opt_str(body, "token", where)
    token_file = _opt_str(body, "tokenFile", where)
    username = _opt_str(body, "username", where)
    password = _opt_str(body, "password", where)
    cert = key = None
    if user is not None:
        cert = _material(user, "user", "client-certificate")
        key = _material(user, "user", "client-key")
    if cert and not key:
        raise ConfigError(f"{where}: client-certificate is set but not client-key; set both")
    if key and not cert:
        raise ConfigError(f"{where}: client-key is set but not client-certificate; set both")
    if token and (username or password):
        raise ConfigError(f"{where}: both token and username/password are set; keep only one")
    tls_what = f"{cluster_where} with {where}"
    static = bool(token or token_file or username or password or cert)
    exec_raw = body.get("exec")
    if exec_raw and user is not None and not static:
        return ExecCredentials(
            _exec_config(user, exec_raw, cluster),
            ca_pem=cluster.ca_pem,
            insecure=cluster.insecure,
            clock=clock,
            tls_what=tls_what,
        )
    if exec_raw:
        log.info("%s: token/basic/client certificate set, so exec is not used", where)
    if token_file and user is not None:
        return TokenFileCredentials(
            _resolve(token_file, user),
            ca_pem=cluster.ca_pem,
            cert_pem=cert,
            key_pem=key,
            insecure=cluster.insecure,
            what=f"{where} tokenFile",
            clock=clock,
            fallback_token=token,
        )
    creds = StaticCredentials(
        ca_pem=cluster.ca_pem,
        cert_pem=cert,
        key_pem=key,
        token=token,
        insecure=cluster.insecure,
        username=username,
        password=password,
        what=tls_what,
    )
    creds.tls_context()  # fail at load time, not on the first request
    return creds


def cluster_config(kc: Kubeconfig, context: str | None, *, clock: Clock | None) -> ClusterConfig:
    """Resolve `context` (or the current context) of a merged kubeconfig."""
    files = ", ".join(str(f) for f in kc.files) or "(no files)"
    name = context or kc.current_context
    if not name:
        raise ConfigError(
            f"kubeconfig {files}: no context selected; set current-context "
            "(kubectl config use-context NAME) or pass a context explicitly"
        )
    ctx = kc.contexts.get(name)
    if ctx is None:
        known = ", ".join(sorted(kc.contexts)) or "none"
        raise ConfigError(
            f"kubeconfig {files}: context {name!r} not found (known: {known}); "
            "pass one of those or add it under contexts"
        )
    where = ctx.where("context")
    cluster_name = _opt_str(ctx.body, "cluster", where)
    if not cluster_name:
        raise ConfigError(f"{where}: no cluster set; set context.cluster to a cluster name")
    cluster_entry = kc.clusters.get(cluster_name)
    if cluster_entry is None:
        raise ConfigError(
            f"{where}: cluster {cluster_name!r} is not defined in {files}; "
            "add it under clusters or fix context.cluster"
        )
    user_name = _opt_str(ctx.body, "user", where)
    user_entry = kc.users.get(user_name) if user_name else None
    if user_name and user_entry is None:
        raise ConfigError(
            f"{where}: user {user_name!r} is not defined in {files}; "
            "add it under users or fix context.user"
        )
    cluster = _cluster(cluster_entry)
    cluster_where = cluster_entry.where("cluster")
    creds = _credentials(user_entry, cluster, cluster_where, clock)
    user_body = user_entry.body if user_entry else {}
    has_cert = any(user_body.get(k) for k in ("client-certificate", "client-certificate-data"))
    tls = bool(cluster.ca_pem or cluster.insecure or has_cert)
    return ClusterConfig(
        server=_server_url(cluster.server, tls, cluster_where),
        credentials=creds,
        source=name,
        server_hostname=cluster.server_hostname,
        proxy=cluster.proxy,
        namespace=_opt_str(ctx.body, "namespace", where),
    )


def load_kubeconfig(
    path: str | os.PathLike[str], context: str | None = None, *, clock: Clock | None = None
) -> ClusterConfig:
    """Load `context` (default: the current context) from one kubeconfig file."""
    return cluster_config(read_kubeconfigs([path], skip_missing=False), context, clock=clock)
