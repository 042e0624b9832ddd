"""Helpers for the mcpgym.servers.coding tests: a quick-limits environment factory and host probes."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Literal

from mcpgym.servers.coding import Coding, Limits, Sandbox
from mcpgym.servers.coding._host.sandbox import Isolation

# Short limits keep the tests quick; each test that needs another limit builds its own. The CPU
# limit is above the wall-clock one so a busy loop deterministically meets the timeout first (a
# single thread's CPU time never exceeds its wall time); the CPU limit has its own test.
QUICK = Limits(
    timeout=4.0,
    cpu_seconds=8,
    memory_bytes=512 << 20,
    max_processes=32,
    file_size_bytes=1 << 20,
    output_bytes=4096,
    flood_bytes=1 << 20,
)


ISOLATION: Isolation | Literal["auto"] = os.environ.get("MCPGYM_TEST_ISOLATION", "auto")  # type: ignore[assignment]
"""The sandbox mode the coding tests run under (tests/test_coding_modes.py runs them under each)."""


def new_sandbox(limits: Limits = QUICK, **options: Any) -> Sandbox:
    return Sandbox(limits, ISOLATION, **options)


def coding(limits: Limits = QUICK, **options: object) -> functools.partial[Coding]:
    return functools.partial(Coding, sandbox=new_sandbox(limits), **options)  # type: ignore[arg-type]


def processes_of(uid: int) -> list[int]:
    """Host pids owned by `uid` (the sandbox's own uid when the server is root)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    found.append(int(entry.name))
            except FileNotFoundError:
                continue  # exited while we looked
    return found


def is_root() -> bool:
    return os.geteuid() == 0
