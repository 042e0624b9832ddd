"""How a wrapped (third-party, untrusted) MCP server is started: which OS protections apply, and
the command line that applies them.

Layer: policy, no episode logic. Strongest available first, and what is missing is reported
(at start-up, in the first observation and in `state().info`), never silently dropped:

- `bwrap` (bubblewrap): own pid, network, IPC, UTS, cgroup, user and mount namespaces; the
  server sees /usr, /etc, the system libraries, its own program (read-only) and its episode's
  workspace (read-write) and nothing else: no other episode's files, no home directory, a
  private /tmp; no network unless the task allows it; no user namespaces inside (so it cannot
  regain capabilities); killed with the episode.
- `none`: a plain child process in its own session, resource limits only.

Resource limits (`prlimit`, when present) in both modes: CPU seconds, file size, open files.
Memory is not limited here (RLIMIT_AS breaks JavaScript engines, which reserve large virtual
ranges); rfcs/0015-wrapping-mcp-servers.md says so.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Isolation = Literal["auto", "bwrap", "none"]

_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/ssh")
"""Host secrets under /etc that a server reads whenever the host runs it as root (it then owns
them, user namespace or not): each is covered with an empty file or directory."""


@dataclass(frozen=True)
class Sandbox:
    """The protections for every episode of one wrapped server."""

    isolation: Isolation = "auto"
    cpu_seconds: int | None = 600
    """CPU seconds the server process may use over its life (RLIMIT_CPU)."""
    file_size_bytes: int | None = 64 << 20
    """Largest file it may write (RLIMIT_FSIZE)."""
    open_files: int | None = 1024
    """Open file descriptors (RLIMIT_NOFILE)."""
    read_only: tuple[str, ...] = ()
    """Extra host paths the server may read (its program's own directories are added for it)."""

    @functools.cached_property
    def mode(self) -> Literal["bwrap", "none"]:
        """The isolation actually used (`auto`: bubblewrap when it works here)."""
        if self.isolation == "none":
            return "none"
        if _bwrap_works():
            return "bwrap"
        if self.isolation == "bwrap":
            raise RuntimeError("isolation 'bwrap' was asked for, but bubblewrap is not installed or cannot run here")
        return "none"

    def report(self) -> dict[str, Any]:
        """Which protections are active (shown at start-up, in the first observation and state)."""
        bwrap = self.mode == "bwrap"
        return {
            "isolation": self.mode,
            "filesystem": "workspace only (read-write), program and system read-only"
            if bwrap
            else "host (unrestricted)",
            "network": "off unless the task allows it" if bwrap else "host network",
            "pid_namespace": bwrap,
            "user_namespaces_disabled": bwrap,
            "limits": self._limits() if _prlimit() else {},
            "memory": "not limited",
        }

    def warnings(self) -> list[str]:
        found = []
        if self.mode != "bwrap":
            found.append("bubblewrap is not available: wrapped servers run without namespaces (host files, network)")
        if not _prlimit():
            found.append("prlimit (util-linux) is not installed: wrapped servers run without resource limits")
        return found

    def command(self, argv: Sequence[str], workspace: Path, *, network: bool) -> list[str]:
        """The full command line that starts `argv` for one episode whose workspace is `workspace`."""
        inner = list(argv)
        if self.mode == "bwrap":
            inner = self._bwrap(inner, workspace, network=network)
        if _prlimit():
            limits = [f"--{name}={value}" for name, value in self._limits().items()]
            inner = [_prlimit() or "prlimit", *limits, "--", *inner]
        return inner

    def _limits(self) -> dict[str, int]:
        named = {"cpu": self.cpu_seconds, "fsize": self.file_size_bytes, "nofile": self.open_files}
        return {name: value for name, value in named.items() if value is not None}

    def _bwrap(self, argv: list[str], workspace: Path, *, network: bool) -> list[str]:
        cmd = [_bwrap() or "bwrap", "--die-with-parent", "--new-session", "--unshare-all"]
        cmd += ["--unshare-user", "--disable-userns"]
        if network:
            cmd.append("--share-net")
        # Mounts apply in order. The private /tmp comes first, so a program that lives under the
        # host's /tmp is bound on top of it (and still runs).
        cmd += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for path in _SYSTEM:
            cmd += ["--ro-bind-try", path, path]
        for path in _SECRETS:
            if os.path.isdir(path):
                cmd += ["--tmpfs", path, "--remount-ro", path]
            elif os.path.lexists(path):
                cmd += ["--ro-bind", "/dev/null", path]
        for path in sorted(set(self.read_only) | program_paths(argv, exclude=workspace)):
            cmd += ["--ro-bind-try", path, path]
        # Then an empty directory over the parent of every episode's workspace (a program
        # directory bound above may contain it), and this episode's workspace alone inside it.
        ws = str(workspace)
        cmd += ["--tmpfs", str(workspace.parent), "--bind", ws, ws, "--chdir", ws]
        cmd += ["--setenv", "HOME", ws, "--setenv", "TMPDIR", "/tmp", "--", *argv]
        return cmd


def program_paths(argv: Sequence[str], *, exclude: Path | None = None) -> set[str]:
    """The host directories a command needs to read to run: its interpreter's installation and,
    for each argument that is an existing path, the package it belongs to (a `node_modules` tree,
    a Python prefix, else its directory). Arguments at or under `exclude` (the workspace, whose
    parent holds every other episode's) are not programs."""
    found: set[str] = set()
    if argv:
        exe = shutil.which(argv[0])
        if exe is not None:
            found.update(_owning_dirs(Path(exe)))
    for arg in argv[1:]:
        if arg.startswith("/") and os.path.exists(arg) and not (exclude and Path(arg).is_relative_to(exclude)):
            found.update(_owning_dirs(Path(arg)))
    return {p for p in found if not any(p == s or p.startswith(s + "/") for s in _SYSTEM)}


def _owning_dirs(path: Path) -> set[str]:
    dirs = {str(path.parent), str(path.resolve().parent)}
    for candidate in (path, path.resolve()):
        parts = candidate.parts
        if "node_modules" in parts:
            dirs.add(str(Path(*parts[: parts.index("node_modules") + 1])))
    real = str(path.resolve())
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        if real.startswith(prefix + "/") or str(path).startswith(prefix + "/"):
            dirs.update({sys.prefix, sys.base_prefix})
    return dirs


@functools.cache
def _bwrap() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def _prlimit() -> str | None:
    return shutil.which("prlimit")


@functools.cache
def _bwrap_works() -> bool:
    exe = _bwrap()
    if exe is None:
        return False
    probe = [exe, "--unshare-all", "--unshare-user", "--disable-userns", "--ro-bind", "/", "/", "--", "true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=10, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
