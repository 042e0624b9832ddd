"""How a wrapped (third-party, untrusted) MCP server is started: which OS protections apply, and
the command line that applies them.

Layer: policy, no episode logic (OS plumbing from `mcpgym._isolation`). Strongest available
first, and what is missing is reported (at start-up, in the first observation and in
`state().info`), never silently dropped:

- `bwrap` (bubblewrap): own pid, network, IPC, UTS, cgroup and mount namespaces. The server sees
  an allowlist, read-only: /usr (and the /bin, /lib links into it), the few files under /etc
  that libraries read (`ETC`), the installation of its own program (its interpreter and
  packages: a virtualenv, pyenv, uv or system Python, a node_modules tree, found by asking the
  interpreter, `program_paths`), the paths given with `read_only`; its episode's workspace
  read-write; a private /tmp. Nothing else: no other episode, no home directory, no host
  secrets. No network unless the task or the sandbox allows it. Killed with the episode.
  Run as root, it runs as a uid of its own per episode (claimed host-wide, as servers.coding's
  sandboxes are), with no capabilities and no way to make user namespaces; otherwise as the
  server's uid inside a user namespace that cannot nest.
- `none`: a plain child process in its own session, resource limits only.

Resource limits (`prlimit`, when present) in both modes: CPU seconds, file size, open files.
Run as root: each workspace is a tmpfs of its own (a quota in bytes and files), and each
episode's processes share a memory cgroup (memory the kernel counts, tmpfs pages included).
RLIMIT_AS is not used (it breaks JavaScript engines, which reserve large virtual ranges).
rfcs/0015-wrapping-mcp-servers.md and rfcs/0003-security.md.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mcpgym._isolation import cgroups
from mcpgym._isolation.tmpfs import workspace_quota_works

Isolation = Literal["auto", "bwrap", "none"]

_TOP = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Top-level system directories: links into /usr on most systems (made as links), else bound."""
ETC = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "crypto-policies",
    "gai.conf",
    "group",
    "host.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "pki",
    "protocols",
    "python3",
    "resolv.conf",
    "services",
    "ssl",
    "timezone",
)
"""What a wrapped server sees of /etc: what the C library, TLS, time zones and interpreters read.
An allowlist, so a host secret (shadow files, keys, tokens a deployment drops in /etc) is never
visible, whatever its name."""
_SYSTEM = ("/usr", *_TOP)


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
    """Extra host paths the server may read (its program's own installation is added for it)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables for the server; values may hold `{workspace}` and `{instance}`."""
    network: bool = False
    """Every episode may reach the network (a task file's `"network": true` allows it per task)."""
    workspace_bytes: int = 256 << 20
    """Total size of a workspace (its own tmpfs; root only)."""
    workspace_files: int = 16384
    """Files and directories in a workspace (the tmpfs's inodes; root only)."""
    memory_bytes: int | None = 2 << 30
    """Memory of an episode's processes together (a memory cgroup; root only)."""

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

    @functools.cached_property
    def own_uid(self) -> bool:
        """Each episode runs as a uid of its own (a root host under bubblewrap)."""
        return self.mode == "bwrap" and os.geteuid() == 0

    @functools.cached_property
    def quota(self) -> bool:
        """Each workspace is a tmpfs of `workspace_bytes` and `workspace_files`."""
        return os.geteuid() == 0 and workspace_quota_works()

    @functools.cached_property
    def cgroups(self) -> cgroups.Hierarchy | str:
        """The memory cgroup hierarchy episodes get a group in, or why there is none."""
        if self.memory_bytes is None:
            return "no memory limit was asked for"
        return cgroups.detect()

    def report(self) -> dict[str, Any]:
        """Which protections are active (shown at start-up, in the first observation and state)."""
        bwrap = self.mode == "bwrap"
        hierarchy = self.cgroups
        return {
            "isolation": self.mode,
            "filesystem": "workspace (read-write); /usr, an /etc allowlist, its own program (read-only)"
            if bwrap
            else "host (unrestricted)",
            "network": ("on" if self.network else "off unless the task allows it") if bwrap else "host network",
            "pid_namespace": bwrap,
            "user_namespaces_disabled": bwrap,
            "uid": "own uid per episode, no capabilities" if self.own_uid else "the host's (unprivileged or none)",
            "workspace": f"tmpfs of {self.workspace_bytes} bytes, {self.workspace_files} files"
            if self.quota
            else "no total size limit",
            "limits": self._limits() if _prlimit() else {},
            "memory": hierarchy.describe(self.memory_bytes or 0)
            if isinstance(hierarchy, cgroups.Hierarchy)
            else f"not limited ({hierarchy})",
        }

    def warnings(self) -> list[str]:
        found = []
        if self.mode != "bwrap":
            found.append("bubblewrap is not available: wrapped servers run without namespaces (host files, network)")
        if not _prlimit():
            found.append("prlimit (util-linux) is not installed: wrapped servers run without resource limits")
        if not self.quota:
            found.append("workspaces have no total size limit (a tmpfs per workspace needs a root host)")
        if isinstance(self.cgroups, str) and self.memory_bytes is not None:
            found.append(f"no memory cgroup per episode ({self.cgroups}): the server's memory is not limited")
        return found

    def command(
        self,
        argv: Sequence[str],
        workspace: Path,
        *,
        network: bool,
        uid: int | None = None,
        programs: Sequence[str] | None = None,
    ) -> list[str]:
        """The full command line that starts `argv` for one episode whose workspace is `workspace`
        (as `uid` when given: a root host under bubblewrap). `programs`: the command whose
        installation the sandbox shows (default `argv`; a task's set-up command sees the server's)."""
        inner = list(argv)
        if self.mode == "bwrap":
            view = self._view(list(argv if programs is None else programs), workspace)
            inner = self._bwrap(inner, view, workspace, network=network or self.network, uid=uid)
        if _prlimit():
            limits = [f"--{name}={value}" for name, value in self._limits().items()]
            inner = [_prlimit() or "prlimit", *limits, "--", *inner]
        return inner

    def _limits(self) -> dict[str, int]:
        named = {"cpu": self.cpu_seconds, "fsize": self.file_size_bytes, "nofile": self.open_files}
        return {name: value for name, value in named.items() if value is not None}

    def _bwrap(self, argv: list[str], view: list[str], workspace: Path, *, network: bool, uid: int | None) -> list[str]:
        cmd = [_bwrap() or "bwrap", "--die-with-parent", "--new-session"]
        if uid is None:
            cmd += ["--unshare-all", "--unshare-user", "--disable-userns"]
            if network:
                cmd.append("--share-net")
        else:
            # Root: no user namespace (it would map the sandbox to host uid 0); every capability
            # but the two that `setpriv` needs to become `uid`, which then drops them too.
            cmd += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
            cmd += [] if network else ["--unshare-net"]
            cmd += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        cmd += view
        cmd += ["--setenv", "HOME", str(workspace), "--setenv", "TMPDIR", "/tmp", "--"]
        if uid is not None:
            # As `uid`, with no capabilities, then a user namespace that cannot nest: an unprivileged
            # uid may otherwise make user namespaces of its own (kernel attack surface).
            cmd += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
            cmd += [_bwrap() or "bwrap", "--unshare-user", "--disable-userns", "--bind", "/", "/"]
            cmd += ["--proc", "/proc", "--dev", "/dev", "--"]
        return [*cmd, *argv]

    def _view(self, argv: list[str], workspace: Path) -> list[str]:
        """The allowlist, as bubblewrap mounts. A dropped uid must pass through every directory
        bwrap makes on the way to a bound one (it makes them 0700): each is made 0755 first."""
        args = ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
        for top in _TOP:
            if os.path.islink(top):
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
        args += ["--ro-bind", "/usr", "/usr", "--perms", "0755", "--dir", "/etc"]
        for name in ETC:
            if os.path.exists(f"/etc/{name}"):
                args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        made: set[Path] = {Path("/"), Path("/tmp"), Path("/etc")}
        trees = _outermost({*self.read_only, *program_paths(argv, exclude=workspace)})
        for tree in trees:
            args += _parents(Path(tree), made, trees)
            args += ["--ro-bind", tree, tree]
        # Then an empty directory over the parent of every episode's workspace (a program
        # directory bound above may contain it), and this episode's workspace alone inside it.
        ws = str(workspace)
        args += _parents(workspace.parent, made, trees)
        args += ["--perms", "0755", "--tmpfs", str(workspace.parent), "--bind", ws, ws, "--chdir", ws]
        return args

    def unreadable(self, argv: Sequence[str]) -> list[str]:
        """The program paths a per-episode uid cannot read (not world-readable): named when such
        a server fails to start."""
        if not self.own_uid:
            return []
        trees = _outermost({*self.read_only, *program_paths(argv)})
        return [tree for tree in trees if os.stat(tree).st_mode & 0o005 != 0o005]


def _outermost(paths: set[str]) -> list[str]:
    """The paths that exist, less those inside another (bound with it) or inside the system trees."""
    real = sorted(p for p in paths if os.path.exists(p))
    kept: list[str] = []
    for path in real:
        if any(path == s or path.startswith(s.rstrip("/") + "/") for s in (*_SYSTEM, *kept)):
            continue
        kept.append(path)
    return kept


def _parents(path: Path, made: set[Path], trees: list[str]) -> list[str]:
    """Directories (0755) for every ancestor of `path` that nothing bound or made yet provides."""
    args: list[str] = []
    for parent in reversed(path.parents):
        if parent in made or any(parent.is_relative_to(tree) for tree in trees):
            continue
        made.add(parent)
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


def program_paths(argv: Sequence[str], *, exclude: Path | None = None) -> set[str]:
    """The host paths a command needs to read to run: for its program and each argument that is an
    existing path, the package it belongs to (a `node_modules` tree, a virtualenv, else its
    directory) and the installation of the interpreter that runs it (a `#!` line's, or the
    program itself when it is Python or Node): Python is asked where its prefixes and `sys.path`
    are, so a virtualenv on any base (system, pyenv, uv) brings its site-packages and its base.
    Arguments at or under `exclude` (the workspace, whose parent holds every other episode's)
    are not programs. `env VAR=... PROGRAM` counts as PROGRAM."""
    words = list(argv)
    if words and Path(words[0]).name == "env":
        words = words[1:]
        while words and ("=" in words[0] or words[0].startswith("-")):
            words = words[1:]
    found: set[str] = set()
    for i, word in enumerate(words):
        path = shutil.which(word) if i == 0 else word if word.startswith("/") and os.path.exists(word) else None
        if path is None or (exclude is not None and Path(path).is_relative_to(exclude)):
            continue
        found |= _installation(Path(path))
    return found


def _installation(path: Path) -> set[str]:
    found = _owning_dirs(path)
    interpreter = _shebang(path)
    if interpreter is not None:
        found |= _owning_dirs(interpreter) | _runtime(interpreter)
    return found | _runtime(path)


def _owning_dirs(path: Path) -> set[str]:
    dirs: set[str] = set()
    for candidate in (path, path.resolve()):
        dirs.add(str(candidate.parent))
        parts = candidate.parts
        if "node_modules" in parts:
            dirs.add(str(Path(*parts[: parts.index("node_modules") + 1])))
        if (candidate.parent.parent / "pyvenv.cfg").is_file():  # a virtualenv's bin/: all of it
            dirs.add(str(candidate.parent.parent))
    return dirs


def _runtime(exe: Path) -> set[str]:
    """The installation an interpreter runs from (nothing for other programs)."""
    name = exe.name
    if name.startswith("python") or name.startswith("pypy"):
        return set(_python_paths(str(exe)))
    if name in ("node", "nodejs", "npx", "npm", "bun", "deno"):
        real = exe.resolve()
        return {str(real.parent.parent)} if real.parent.name == "bin" else {str(real.parent)}
    return set()


_PROBE = (
    "import json, sys, sysconfig; paths = sysconfig.get_paths(); print(json.dumps([sys.prefix, sys.base_prefix, "
    "sys.exec_prefix, sys.base_exec_prefix, sysconfig.get_config_var('LIBDIR') or '', paths['purelib'], "
    "paths['platlib'], *sys.path]))"
)


@functools.cache
def _python_paths(exe: str) -> tuple[str, ...]:
    """Where this Python's prefixes, libraries and packages are (asked once per interpreter). With
    `-I -S`: `site` would run the package's own `.pth` files, and the package is untrusted code
    that must run in the sandbox only; so the `.pth` files' directories (editable installs) are
    read here instead, never run."""
    try:
        done = subprocess.run([exe, "-I", "-S", "-c", _PROBE], capture_output=True, timeout=30, check=True)
        said = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return ()
    paths = [p for p in said if isinstance(p, str) and p.startswith("/")]
    sites = [p for p in said[5:7] if isinstance(p, str)]
    venv = Path(exe).parent.parent  # without `site`, Python 3.11 does not know it is in a virtualenv
    if (venv / "pyvenv.cfg").is_file():
        sites += [str(site) for site in sorted(venv.glob("lib*/python*/site-packages"))]
    return (*paths, *_pth_directories(sites))


def _pth_directories(site_dirs: list[str]) -> list[str]:
    """The directories `.pth` files in `site_dirs` name (lines that are paths, not `import`s)."""
    found = []
    for site in site_dirs:
        for pth in sorted(Path(site).glob("*.pth")) if os.path.isdir(site) else ():
            try:
                lines = pth.read_text(errors="replace").splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    path = line if line.startswith("/") else os.path.join(site, line)
                    if os.path.isdir(path):
                        found.append(os.path.normpath(path))
    return found


def _shebang(path: Path) -> Path | None:
    """The interpreter a script's `#!` line names (through `env`, and pip's `'''exec'` form for
    long paths), or None for a binary or a file that cannot be read."""
    try:
        with path.open("rb") as file:
            head = file.read(1024)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    lines = head.decode(errors="replace").splitlines()
    words = lines[0][2:].split()
    if words and words[0] == "/bin/sh" and len(lines) > 1 and lines[1].startswith("'''exec' "):
        words = lines[1].split()[1:]
        words[0] = words[0].strip("'\"")
    if words and Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        found = shutil.which(words[0]) if words else None
        return Path(found) if found else None
    return Path(words[0]) if words else None


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
