"""Any MCP server as an environment: the types around `mcpgym.wrap()`.

```python
import mcpgym
from mcpgym.wrapping import TaskSpec, Verify, FileCheck

Env = mcpgym.wrap(["npx", "@modelcontextprotocol/server-filesystem", "{workspace}"], tasks="tasks.jsonl")
```
See rfcs/0015-wrapping-mcp-servers.md.
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
