"""Coding: a sandboxed Python coding environment with HumanEval tasks and test-based rewards.

Each episode is one task. Tools: `run_python` (a persistent sandboxed REPL), `write_file`,
`read_file`, `list_files` (the episode's own workspace) and `submit` (hidden tests; reward
1.0 when all pass; ends the episode). See rfcs/0003-coding-sandbox.md for the sandbox.

    python -m mcpgym.servers.coding                 # stdio
    python -m mcpgym.servers.coding --http --port 8000
"""

from mcpgym.servers.coding._environment import Coding, GradedCoding
from mcpgym.servers.coding._host.sandbox import Limits, Protections, Sandbox
from mcpgym.servers.coding._rubrics import CORRECT_AND_CONCISE, PARTIAL_CREDIT
from mcpgym.servers.coding._tasks import Task, TaskFileError, load_tasks

__mcpgym_environment__ = Coding
"""What the target `mcpgym.servers.coding` means (GradedCoding is the same tasks scored by a rubric)."""

__all__ = [
    "CORRECT_AND_CONCISE",
    "PARTIAL_CREDIT",
    "Coding",
    "GradedCoding",
    "Limits",
    "Protections",
    "Sandbox",
    "Task",
    "TaskFileError",
    "load_tasks",
]
