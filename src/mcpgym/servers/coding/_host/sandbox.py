"""The sandbox: which OS protections are available, and the command line that applies them.

Layer: policy, no episode logic. Imports only `_uids`, `_cgroups` and `_workspace` (to probe
its quota) from the package. Protections, strongest first (the first that works is used; anything
missing is reported, never silently skipped):

- `bwrap` (bubblewrap): new pid, network, IPC, UTS and mount namespaces; the sandbox sees
  only the Python installation, /usr, /etc and its own workspace (task files stay hidden);
  it dies with the server.
- `unshare` (util-linux, needs root): the same namespaces and the same private filesystem, which
  the sandboxed program builds itself in its mount namespace (`_sandboxed/confine.private_root`).
- `none`: a plain child process (own session) with resource limits only: the host filesystem,
  hidden tests included, is readable. Never chosen by `auto`, which refuses to start instead.

In every mode the worker (a REPL) and each grading child of the grader zygote apply rlimits
(memory, CPU, processes, file size) and a seccomp filter against user namespaces before any user
code runs and, when the server is root, drop to a uid of their own (see `_worker.py`,
`_trial.py`). A root server with a writable memory cgroup hierarchy also gives each episode a
memory cgroup (`_cgroups.py`). The sandbox runs the server's own interpreter, mounted at its own
path (with its shared libpython's directory, if any).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from mcpgym._isolation import cgroups as _cgroups
from mcpgym._isolation import uids as _uids
from mcpgym._isolation.cgroups import Hierarchy
from mcpgym.servers.coding._host.workspace import workspace_quota_works

logger = logging.getLogger("mcpgym.servers.coding")

Isolation = Literal["bwrap", "unshare", "none"]
ISOLATIONS: tuple[Isolation, ...] = ("bwrap", "unshare", "none")

SANDBOX_WORKSPACE = "/workspace"
_PARTS = {"worker": ("confine", "worker"), "zygote": ("confine", "trial", "zygote")}
# Each program is its modules' sources in a row (stdlib only; see _sandboxed/confine.py), run with `-c`.
_SANDBOXED = Path(__file__).parent.parent / "_sandboxed"
_CONFINE = (_SANDBOXED / "confine.py").read_text()
_PROGRAMS = {
    name: "\n".join((_SANDBOXED / f"{part}.py").read_text() for part in parts) for name, parts in _PARTS.items()
}


@dataclass(frozen=True)
class Limits:
    """Per-sandbox resource limits (all enforced by the OS, not by cooperative checks)."""

    timeout: float = 10.0
    """Wall-clock seconds per call; on expiry the whole process tree is killed."""
    cpu_seconds: int = 10
    """CPU seconds per call (RLIMIT_CPU, re-armed before each call)."""
    cpu_lifetime_seconds: int = 300
    """CPU seconds over one interpreter's life (hard RLIMIT_CPU); then it restarts."""
    memory_bytes: int = 1 << 30
    """Address space per process (RLIMIT_AS)."""
    episode_memory_bytes: int = 1 << 30
    """Memory of an episode's whole sandbox, memfd and tmpfs pages included (a memory cgroup)."""
    max_processes: int = 64
    """Processes and threads of the sandbox (RLIMIT_NPROC, counted per sandbox uid)."""
    file_size_bytes: int = 16 << 20
    """Largest file a sandboxed process may write (RLIMIT_FSIZE)."""
    workspace_bytes: int = 64 << 20
    """Total size of an episode's workspace (a tmpfs of this size when the server is root)."""
    workspace_files: int = 4096
    """Files and directories in an episode's workspace (the tmpfs's inode count)."""
    output_bytes: int = 64 << 10
    """Output shown per call; the rest is cut with a visible marker."""
    flood_bytes: int = 8 << 20
    """Output past this many bytes in one call kills the interpreter (a flood, not a result)."""


@dataclass(frozen=True)
class Protections:
    """What is actually enforced, as reported at startup and in every first observation."""

    isolation: Isolation
    own_uid: bool
    namespaces: tuple[str, ...]
    filesystem: str
    limits: Limits
    warnings: tuple[str, ...] = field(default=())
    workspace_quota: bool = False
    """Each workspace is a tmpfs of `limits.workspace_bytes` (root servers that may mount)."""
    cgroups: Hierarchy | None = None
    """A memory cgroup per episode (and one for the grader), when the machine gives one."""

    def describe(self) -> dict[str, Any]:
        return {
            "process": "separate sandboxed process per episode (never the server process)",
            "isolation": self.isolation,
            "namespaces": list(self.namespaces),
            "network": "none (empty network namespace)" if "net" in self.namespaces else "HOST NETWORK REACHABLE",
            "server_process": "invisible (own pid namespace)" if "pid" in self.namespaces else "VISIBLE",
            "filesystem": self.filesystem,
            "own_uid": self.own_uid,
            "workspace": "tmpfs with a size and file quota" if self.workspace_quota else "NO TOTAL SIZE LIMIT",
            "memory": (
                self.cgroups.describe(self.limits.episode_memory_bytes)
                if self.cgroups is not None
                else "RLIMIT_AS per process only (memfd and tmpfs pages NOT COUNTED)"
            ),
            "background_processes": (
                "killed when the run_python call that started them ends (cgroup)"
                if self.cgroups is not None
                else "KEPT until the interpreter restarts or the episode ends (no cgroup)"
            ),
            "user_namespaces": "blocked (seccomp filter on unshare/clone/setns)",
            "grading": (
                "tests in a process of their own; each submission in its own pid, IPC and network namespaces "
                "and tmpfs; every assert runs, the policy sees a fixed reason"
                if self.own_uid
                else "tests in a process of their own; a fresh sandbox per submission"
            ),
            "limits": asdict(self.limits),
            "warnings": list(self.warnings),
        }


class Sandbox:
    """Builds sandboxed worker command lines under one isolation mode and set of limits."""

    def __init__(
        self,
        limits: Limits | None = None,
        isolation: Isolation | Literal["auto"] = "auto",
        hidden_paths: tuple[Path, ...] = (),
        python: Path | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.hidden_paths = tuple(p.resolve() for p in hidden_paths)
        self.protections = detect(self.limits, isolation)
        # The base interpreter, not a venv shim: the sandbox mounts its prefix (and the directory
        # of a shared libpython) at their own paths, so the very same interpreter runs inside.
        self.python, self.prefix, self.libdir = _interpreter(python)

    def new_uid(self) -> int | None:
        """A uid no sandbox on this host uses (root servers only; otherwise None: the server's own).

        Claimed host-wide until `release_uid(uid)`, which is for once nothing of it runs."""
        return _uids.claim() if self.protections.own_uid else None

    def release_uid(self, uid: int | None) -> None:
        if uid is not None:
            _uids.release(uid)

    def command(
        self,
        workspace: Path,
        uid: int | None,
        program: Literal["worker", "zygote"] = "worker",
        seccomp_fd: int | None = None,
    ) -> list[str]:
        """The argv that starts a worker or a grader zygote (run it with the workspace as working
        directory). Under bwrap, `seccomp_fd` (a pipe holding `seccomp_program()`, passed to the
        child) has bwrap install the filter, so the worker need not load ctypes to do it."""
        isolation = self.protections.isolation
        # The worker enters the workspace itself, after dropping to `uid`: the workspace is
        # 0700 and owned by that uid, so even bwrap (root without CAP_DAC_OVERRIDE) cannot.
        config: dict[str, Any] = {"limits": asdict(self.limits), "uid": uid, "cwd": self.workdir(workspace)}
        if isolation == "bwrap" and seccomp_fd is not None:
            config["seccomp_applied"] = True
        if program == "zygote":
            config["spare"] = self.protections.own_uid  # a zygote shared by submissions (`_grader.py`)
        if isolation == "unshare":
            config["view"] = self.view(workspace)  # the sandboxed program builds it (`_confine.private_root`)
        elif isolation == "none" and self.protections.own_uid:
            config["hold_imports"] = True
        if isolation == "none" and program == "worker":
            config["parent"] = os.getpid()
        if isolation == "bwrap":
            python = str(self.python)
            # Not the zygote: it is started from a worker thread, and --die-with-parent
            # (PR_SET_PDEATHSIG) fires when that *thread* exits. It ends when its stdin closes.
            # Root server: the zygote (which runs no user code) gives each submission its own
            # pid and IPC namespaces, and kills a submission's pid namespace on a timeout.
            caps = ("CAP_SYS_ADMIN", "CAP_KILL") if program == "zygote" and self.protections.own_uid else ()
            argv = [*self._bwrap(workspace, die_with_parent=program == "worker", caps=caps)]
            if seccomp_fd is not None:
                argv += ["--seccomp", str(seccomp_fd)]
            argv.append(python)
        else:
            argv = []
            if isolation == "unshare":
                # A worker dies with the thread that started it, as under bwrap (`unshare --kill-child`
                # passes that on to the namespace); not the zygote (see above).
                argv = [*(_DIE_WITH_PARENT if program == "worker" else ()), *_UNSHARE]
            argv.append(str(self.python))
        # -S: no site-packages. Sandboxed code gets the standard library only, and the
        # interpreter starts in a fifth of the time (site processing dominates startup).
        # The worker reads a Python literal (json's import is milliseconds of its start-up).
        return [
            *argv,
            "-I",
            "-S",
            "-c",
            _PROGRAMS[program],
            repr(config) if program == "worker" else json.dumps(config),
        ]

    def workdir(self, workspace: Path) -> str:
        """`workspace` as sandboxed code sees it (also its TMPDIR and HOME)."""
        return SANDBOX_WORKSPACE if self.protections.isolation != "none" else str(workspace)

    def view(self, workspace: Path) -> dict[str, Any]:
        """The private filesystem the sandbox sees (both launchers build the same one): the Python
        installation, /usr and /etc read-only at their own paths, the workspace at /workspace, task
        files under those trees covered by /dev/null. Parents made for a tree are 0755 (a dropped
        uid must pass through them), and so is what bwrap makes (`--perms 0755 --dir`)."""
        links: list[list[str]] = []
        trees: list[Path] = [Path("/usr"), Path("/etc")]
        for name in ("bin", "lib", "lib64", "sbin"):
            link = Path("/") / name
            if link.is_symlink():
                links.append([os.readlink(link), str(link)])
            elif link.is_dir():
                trees.append(link)
        for tree in (self.prefix, self.python.parent, self.libdir):
            if tree is not None and not any(tree.is_relative_to(done) for done in trees):
                trees.append(tree)
        masks = [str(hidden) for hidden in self.hidden_paths if any(hidden.is_relative_to(t) for t in trees)]
        return {
            "ro": [[str(tree), str(tree)] for tree in trees],
            "links": links,
            "masks": masks,
            "workspace": [str(workspace), SANDBOX_WORKSPACE],
        }

    def _bwrap(self, workspace: Path, *, die_with_parent: bool, caps: tuple[str, ...] = ()) -> list[str]:
        view = self.view(workspace)
        args = [
            "bwrap",
            *(["--die-with-parent"] if die_with_parent else []),
            "--new-session",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--cap-drop",
            "ALL",
            "--cap-add",
            "CAP_SETUID",
            "--cap-add",
            "CAP_SETGID",
            *(arg for cap in caps for arg in ("--cap-add", cap)),
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            # A read-only /tmp: a writable tmpfs is RAM that no rlimit counts (bwrap sizes it at
            # half the host's). Sandboxed code writes to its workspace (TMPDIR), which is bounded.
            "--perms",
            "0755",
            "--tmpfs",
            "/tmp",
            "--remount-ro",
            "/tmp",
            "--bind",
            *view["workspace"],
        ]
        for target, path in view["links"]:
            args += ["--symlink", target, path]
        bound: list[Path] = []
        made: set[Path] = set()
        for source, path in view["ro"]:
            tree = Path(path)
            # At its own path (a shared libpython is found through the interpreter's rpath). bwrap
            # makes missing parents 0700, which a dropped uid cannot enter: make them 0755 first.
            for parent in reversed(tree.parents[:-1]):
                if parent not in made and not any(parent.is_relative_to(done) for done in bound):
                    args += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
            args += ["--ro-bind", source, path]
            bound.append(tree)
        for hidden in view["masks"]:
            args += ["--ro-bind", "/dev/null", hidden]
        return args


def _interpreter(python: Path | None) -> tuple[Path, Path, Path | None]:
    """(executable, prefix, directory of its shared libpython or None) of `python` (default: ours)."""
    if python is None:
        executable = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
        libdir = sysconfig.get_config_var("LIBDIR") if sysconfig.get_config_var("Py_ENABLE_SHARED") else None
        return executable, Path(sys.base_prefix).resolve(), Path(libdir).resolve() if libdir else None
    probe = (
        "import sys, sysconfig, json; shared = sysconfig.get_config_var('Py_ENABLE_SHARED'); "
        "print(json.dumps([getattr(sys, '_base_executable', sys.executable), sys.base_prefix, "
        "sysconfig.get_config_var('LIBDIR') if shared else None]))"
    )
    executable, prefix, libdir = json.loads(
        subprocess.run([python, "-I", "-c", probe], capture_output=True, check=True).stdout
    )
    return Path(executable).resolve(), Path(prefix).resolve(), Path(libdir).resolve() if libdir else None


_DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL", "--"]
# Slave propagation: mounts the server makes later under a bound directory (each submission's
# tmpfs) show inside; nothing mounted inside is seen outside.
_UNSHARE = [
    "unshare",
    "--pid",
    "--net",
    "--ipc",
    "--uts",
    "--mount",
    "--propagation",
    "slave",
    "--fork",
    "--kill-child",
    "--mount-proc",
]


AUTO: tuple[Isolation, ...] = ("bwrap", "unshare")
"""What `auto` tries: only modes whose sandboxed code sees a private filesystem (never the hidden tests)."""

REFUSAL = (
    "no sandbox with a private filesystem works here; install bubblewrap (apt-get install bubblewrap), "
    "or run the server as root so it can build one itself in a mount namespace (--isolation unshare), or pass "
    "--isolation none to accept a sandbox whose code can read the host filesystem, the hidden tests included"
)


@functools.cache
def detect(limits: Limits, wanted: Isolation | Literal["auto"] = "auto") -> Protections:
    """Probe the strongest isolation that works here (or check the one asked for). `auto` never
    falls back to `none`: it refuses, saying what would work (`REFUSAL`)."""
    own_uid = os.geteuid() == 0
    warnings: list[str] = []
    if not own_uid:
        warnings.append(
            "server is not root: sandboxes share the server's uid (process limit counted per user namespace)"
        )
    candidates = AUTO if wanted == "auto" else (wanted,)
    problems: list[str] = []
    for isolation in candidates:
        problem = _probe(isolation)
        if problem is None:
            return _protections(isolation, own_uid, limits, warnings + problems)
        problems.append(f"{isolation} unavailable: {problem}")
    if wanted == "auto":
        raise RuntimeError(f"{REFUSAL} ({'; '.join(problems)})")
    raise RuntimeError(f"sandbox isolation {wanted!r} does not work here: {'; '.join(problems)}")


def _protections(isolation: Isolation, own_uid: bool, limits: Limits, warnings: list[str]) -> Protections:
    if isolation == "none":
        warnings.append(
            "no namespaces: sandboxed code can reach the network and see/signal host processes; "
            "install bubblewrap (apt-get install bubblewrap) for full isolation"
        )
        namespaces: tuple[str, ...] = ()
    else:
        namespaces = ("pid", "net", "ipc", "uts", "mount")
    if isolation != "none":
        builder = "bubblewrap" if isolation == "bwrap" else "the sandbox itself, in its own mount namespace"
        filesystem = (
            "restricted: Python installation, /usr and /etc read-only; workspace read-write; /tmp read-only "
            f"(built by {builder})"
        )
    else:
        filesystem = "HOST FILESYSTEM READABLE (as permissions allow), HIDDEN TESTS INCLUDED; workspace read-write"
        warnings.append("none: the host filesystem is visible to sandboxed code (task files included)")
    cgroups = _cgroups.detect()
    if isinstance(cgroups, str):
        warnings.append(
            f"no memory cgroup ({cgroups}): memory is bounded per process only (RLIMIT_AS; memfd and tmpfs pages "
            "are not counted), and processes a run_python call leaves running survive until the episode ends"
        )
    quota = own_uid and workspace_quota_works()
    if not quota:
        warnings.append(
            "workspaces have no total size limit (only RLIMIT_FSIZE per file): "
            "a size-limited tmpfs per workspace needs a root server allowed to mount"
        )
    for text in warnings:
        logger.warning("coding sandbox: %s", text)
    hierarchy = None if isinstance(cgroups, str) else cgroups
    return Protections(isolation, own_uid, namespaces, filesystem, limits, tuple(warnings), quota, hierarchy)


def _probe(isolation: Isolation) -> str | None:
    """None if a trivial command runs under `isolation`, else why not."""
    if isolation == "none":
        return None
    for tool in ("bwrap",) if isolation == "bwrap" else ("unshare", "setpriv"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed"
    if isolation == "bwrap":
        argv = [
            "bwrap",
            "--unshare-pid",
            "--unshare-net",
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "true",
        ]
    else:  # the namespaces, and the private filesystem the sandboxed programs build in them
        workspace = tempfile.mkdtemp(prefix="mcpgym-probe-")
        view = {"ro": [["/usr", "/usr"]], "links": [], "masks": [], "workspace": [workspace, SANDBOX_WORKSPACE]}
        source = f"{_CONFINE}\nprivate_root({view!r})\nos.stat('/workspace')"
        argv = [*_DIE_WITH_PARENT, *_UNSHARE, str(_interpreter(None)[0]), "-I", "-S", "-c", source]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    finally:
        if isolation == "unshare":
            os.rmdir(workspace)
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else f"exit status {done.returncode}"
    return None
