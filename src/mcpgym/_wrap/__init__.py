"""Any MCP server as an environment: `mcpgym.wrap(command, tasks=..., rubric=...)`.

Layer: an application of the public Environment API (plus `Host`, for what an episode holds
across requests). Nothing in the core imports it except `mcpgym/__init__` and the CLI.
"""

from mcpgym._wrap._proxy import WrappedEnvironment, wrap
from mcpgym._wrap._rubric import CallRecord, WrapContext
from mcpgym._wrap._sandbox import Sandbox
from mcpgym._wrap._tasks import FileCheck, TaskFileError, TaskSpec, Verify, load_tasks
from mcpgym._wrap._verify import Check, Score, verify

__all__ = [
    "CallRecord",
    "Check",
    "FileCheck",
    "Sandbox",
    "Score",
    "TaskFileError",
    "TaskSpec",
    "Verify",
    "WrapContext",
    "WrappedEnvironment",
    "load_tasks",
    "verify",
    "wrap",
]
