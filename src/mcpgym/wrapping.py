"""Any MCP server as an environment: the types around `mcpgym.wrap()`.

The sandbox has no network, so install the server first (`npm install
@modelcontextprotocol/server-filesystem`, or a virtualenv for a Python server) and wrap what was
installed; its interpreter and packages are found and shown to it read-only:

```python
import mcpgym
from mcpgym.wrapping import FileCheck, Sandbox, TaskSpec, Verify

Env = mcpgym.wrap(["node_modules/.bin/mcp-server-filesystem", "{workspace}"], tasks="tasks.jsonl")
Memory = mcpgym.wrap(
    ["node_modules/.bin/mcp-server-memory"],
    sandbox=Sandbox(env={"MEMORY_FILE_PATH": "{workspace}/memory.jsonl"}),  # its state, per episode
)
```
`Sandbox(read_only=..., env=..., network=...)` adds host paths, environment variables and
network access; a task's `setup` commands run before its server starts. See docs/wrapping.md
and rfcs/0015-wrapping-mcp-servers.md.
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
