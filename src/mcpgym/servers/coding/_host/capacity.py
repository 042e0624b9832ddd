"""How many live coding episodes this machine holds: the default of `--max-episodes`.

Layer: OS facts only (/proc, rlimits, the memory cgroup the server runs in), no package imports.
One open episode costs the server ~1 MiB and its sandbox 3 processes (launcher, namespace init,
interpreter) and ~16 MiB RSS once it has run code (`benchmarks/bench_episode.py`), plus a few
descriptors in the server. The default is the least of what memory, open files and processes
allow, so that a server at its limit refuses resets instead of taking the host's memory.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

EPISODE_BYTES = 16 << 20  # resident memory of one episode's sandbox, measured
EPISODE_FILES = 8  # descriptors the server holds per episode (pipes, directory, locks), with room
EPISODE_PROCESSES = 4  # processes per episode (3) with room for one grading
CEILING = 10_000  # the framework's own default


@dataclass(frozen=True)
class Capacity:
    episodes: int
    why: str


def machine_capacity() -> Capacity:
    memory = _memory_bytes()
    files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    processes = _process_limit()
    bounds = {
        f"{memory >> 20} MiB of memory / {EPISODE_BYTES >> 20} MiB per episode": memory // EPISODE_BYTES,
        f"open-file limit {files} / {EPISODE_FILES} per episode": files // EPISODE_FILES,
        f"process limit {processes} / {EPISODE_PROCESSES} per episode": processes // EPISODE_PROCESSES,
    }
    reason, episodes = min(bounds.items(), key=lambda item: item[1])
    episodes = max(1, min(episodes, CEILING))
    return Capacity(episodes, f"the least of {', '.join(bounds)} (here: {reason})")


def _memory_bytes() -> int:
    """Available memory, or less if the server's own memory cgroup is limited."""
    available = _meminfo("MemAvailable")
    for limit_file in _cgroup_limit_files():
        text = _read(limit_file)
        if text.isdigit():
            available = min(available, int(text))
    return available


def _meminfo(key: str) -> int:
    for line in _read(Path("/proc/meminfo")).splitlines():
        name, _, value = line.partition(":")
        if name == key:
            return int(value.split()[0]) << 10
    return 1 << 30


def _cgroup_limit_files() -> list[Path]:
    files = []
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            files.append(Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "memory.limit_in_bytes")
        elif controllers == "":
            files.append(Path("/sys/fs/cgroup") / path.lstrip("/") / "memory.max")
    return files


def _process_limit() -> int:
    soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    limits = [int(_read(Path(f"/proc/sys/kernel/{name}")) or 32768) for name in ("pid_max", "threads-max")]
    if soft != resource.RLIM_INFINITY:
        limits.append(soft)
    return min(limits)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""
