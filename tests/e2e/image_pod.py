"""Running one container of a rendered pod spec from an image's root filesystem, as a
kubelet would, with no container runtime.

The image is mounted by buildah (image_build.py); the container runs in a mount
namespace of its own (`unshare --mount`), chrooted into that root as the pod's user,
and `exec`s all the way down, so the PID the test holds is the program's own and a
SIGTERM reaches it as the kubelet's would. What it does as the kubelet does:

- the command is the image's entrypoint with the container's `args` (`command`
  replaces the entrypoint), in the image's working directory;
- the environment is the image's, then the container's `env` (fieldRefs resolved to
  the pod's), then the service variables of the `kubernetes` Service;
- the user is the pod's `runAsUser`/`runAsGroup`, the container's winning;
- the root filesystem is read-only when the container's `readOnlyRootFilesystem` says so;
- volumes: `configMap` (the rendered ConfigMap's data, read-only), `emptyDir` (a tmpfs
  of its `sizeLimit`), and with `automountServiceAccountToken` the service account's
  `token`, `ca.crt` and `namespace` at /var/run/secrets/kubernetes.io/serviceaccount.

What it does not: a network namespace (the container shares the host's, as
`hostNetwork: true` would, so the API server on 127.0.0.1 is the `kubernetes`
Service), cgroups, seccomp, capabilities beyond those a non-root uid lacks.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
MOUNT = shutil.which("mount") or "/usr/bin/mount"
_UNITS = {"": 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "k": 1000, "M": 1000**2}


def inside(root: Path, path: str) -> Path:
    """Where `path` of the container is on the host: symlinks resolved within `root`
    (Debian's /var/run is a link to /run; followed on the host it would leave the root)."""
    current, parts, hops = root, list(PurePosixPath(path).parts[1:]), 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            current = current.parent if current != root else root
            continue
        step = current / part
        if step.is_symlink():
            hops += 1
            assert hops < 40, f"{path}: too many symbolic links in {root}"
            target = PurePosixPath(os.readlink(step))
            if target.is_absolute():
                current, target = root, target.relative_to("/")
            parts = list(target.parts) + parts
            continue
        current = step
    return current


def _bytes(quantity: str) -> int:
    m = re.fullmatch(r"(\d+)([A-Za-z]*)", quantity)
    assert m, f"unsupported quantity {quantity!r}"
    assert m.group(2) in _UNITS, f"unsupported unit in {quantity!r}"
    return int(m.group(1)) * _UNITS[m.group(2)]


@dataclasses.dataclass(frozen=True)
class ApiServer:
    """What the pod's service account volume and service variables point at."""

    port: int
    ca_pem: bytes
    token: str


@dataclasses.dataclass
class Container:
    """`pod["containers"][0]` of a rendered pod spec, run from `rootfs`."""

    rootfs: Path
    image: dict[str, Any]  # the image's OCI config
    pod: dict[str, Any]  # the rendered pod spec
    name: str  # the pod's name
    namespace: str
    configmaps: dict[str, dict[str, str]]  # ConfigMap name -> data
    api: ApiServer
    workdir: Path  # where the volumes' host directories go

    @property
    def spec(self) -> dict[str, Any]:
        (container,) = self.pod["containers"]
        return dict(container)

    def user(self) -> tuple[int, int]:
        pod_sc, sc = self.pod.get("securityContext") or {}, self.spec.get("securityContext") or {}
        image_user = (self.image.get("User") or "0:0").split(":")
        uid = sc.get("runAsUser", pod_sc.get("runAsUser", int(image_user[0])))
        gid = sc.get("runAsGroup", pod_sc.get("runAsGroup", int(image_user[-1])))
        return int(uid), int(gid)

    def command(self) -> list[str]:
        entry = self.spec.get("command") or self.image.get("Entrypoint") or []
        args = self.spec.get("args")
        if args is None and not self.spec.get("command"):
            args = self.image.get("Cmd") or []
        return [*entry, *(args or [])]

    def environment(self) -> dict[str, str]:
        env = dict(e.split("=", 1) for e in self.image.get("Env") or [])
        fields = {
            "metadata.name": self.name,
            "metadata.namespace": self.namespace,
            "spec.serviceAccountName": self.pod.get("serviceAccountName", "default"),
        }
        for var in self.spec.get("env") or []:
            if "value" in var:
                env[var["name"]] = str(var["value"])
            else:
                path = var["valueFrom"]["fieldRef"]["fieldPath"]
                assert path in fields, f"env {var['name']}: fieldRef {path} not supported here"
                env[var["name"]] = fields[path]
        env |= {
            "HOSTNAME": self.name,
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(self.api.port),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(self.api.port),
        }
        return env

    def _volume_dir(self, name: str, files: dict[str, str | bytes]) -> Path:
        d = self.workdir / f"volume-{name}"
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(0o755)
        for file, text in files.items():
            path = d / file
            path.write_bytes(text.encode() if isinstance(text, str) else text)
            path.chmod(0o644)  # a projected volume's defaultMode
        return d

    def _mounts(self) -> list[list[str]]:
        """The mount commands for the pod's volumes, the service account's included."""
        root = self.rootfs
        volumes = {v["name"]: v for v in self.pod.get("volumes") or []}
        cmds: list[list[str]] = []

        def target(path: str) -> str:
            t = inside(root, path)
            t.mkdir(parents=True, exist_ok=True)  # in the container's own writable layer
            return str(t)

        def bind_ro(source: Path, path: str) -> None:
            t = target(path)
            cmds.extend([[MOUNT, "--bind", str(source), t], [MOUNT, "-o", "remount,bind,ro", t]])

        for m in self.spec.get("volumeMounts") or []:
            volume = volumes[m["name"]]
            if "configMap" in volume:
                data = self.configmaps[volume["configMap"]["name"]]
                bind_ro(self._volume_dir(m["name"], dict(data)), m["mountPath"])
            elif "emptyDir" in volume:
                size = _bytes(volume["emptyDir"].get("sizeLimit", "64Mi"))
                t = target(m["mountPath"])
                cmds.append([MOUNT, "-t", "tmpfs", "-o", f"size={size},mode=1777", "tmpfs", t])
            else:
                raise AssertionError(f"volume {m['name']}: {sorted(volume)} not supported here")
        if self.pod.get("automountServiceAccountToken", True):
            files = {
                "token": self.api.token,
                "ca.crt": self.api.ca_pem,
                "namespace": self.namespace,
            }
            bind_ro(self._volume_dir("serviceaccount", files), SERVICE_ACCOUNT_DIR)
        return cmds

    def argv(self) -> list[str]:
        """`unshare --mount ... sh -c SCRIPT`: mount, then exec chroot as the pod's user."""
        root = str(self.rootfs)
        uid, gid = self.user()
        lines = [
            [MOUNT, "--bind", root, root],
            [MOUNT, "-t", "proc", "proc", f"{root}/proc"],
            [MOUNT, "--rbind", "/dev", f"{root}/dev"],
            *self._mounts(),
        ]
        if (self.spec.get("securityContext") or {}).get("readOnlyRootFilesystem"):
            lines.append([MOUNT, "-o", "remount,bind,ro", root])
        workdir = self.image.get("WorkingDir") or "/"
        chroot = shutil.which("chroot")
        assert chroot is not None
        # chroot changes to the new root's /; `cd` inside, then exec the command.
        run = ["exec", chroot, f"--userspec={uid}:{gid}", root, "sh", "-c", 'cd "$0" && exec "$@"']
        script = "set -e\n" + "\n".join(shlex.join(line) for line in lines)
        script += "\n" + shlex.join([*run, workdir, *self.command()])
        unshare = shutil.which("unshare")
        assert unshare is not None
        return [unshare, "--mount", "--propagation", "private", "sh", "-c", script]

    def start(self, log: Path) -> subprocess.Popen[bytes]:
        """Start it (stdout and stderr to `log`); the PID is the program's."""
        with log.open("ab") as out:
            return subprocess.Popen(
                self.argv(),
                env=self.environment(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def run(self, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run it to completion, as a Job's pod."""
        return subprocess.run(
            self.argv(),
            env=self.environment(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
