"""harness: agent harnesses over mcpgym environments.

Two halves, one record:

- **Policy side** (`rollout`, `run_episode`, `OpenAIPolicy`): a tool-calling agent loop that
  plays any mcpgym environment target with any async policy, e.g. an OpenAI-compatible
  chat-completions endpoint (vLLM, SGLang, llama.cpp, hosted APIs), many episodes at once,
  every episode kept as a typed `Trajectory`.
- **Existing harnesses** (`harness.config`): the configuration block that makes Claude Code,
  Claude Desktop or any `mcpServers`-style client launch or reach an environment server.

```python
async with harness.OpenAIPolicy("http://127.0.0.1:8000/v1", "Qwen/Qwen3-8B") as policy:
    trajectories = await harness.rollout("mcpgym.servers.coding", policy, episodes=32, concurrency=8)
```

CLI: `mcpgym rollout ...` and `mcpgym harness config ...`. See rfcs/0005-harness.md.

Names: a rollout's `Trajectory` is the policy's side of an episode (conversation, turns, usage);
the server's own record of it is `mcpgym.Recording`. A policy gets the tools as `ChatTool`s
(formerly `ToolSpec`); each tool call's outcome is a `CallOutcome` (formerly `Step`, the name of
`mcpgym.rubrics.Step`). The old names still import, with a `DeprecationWarning`, until 0.2.
"""

import typing as _typing

from mcpgym._core.deprecated import deprecated_names as _deprecated_names
from mcpgym.harness.errors import ConfigError, EndpointError, EndpointTimeout, HarnessError
from mcpgym.harness.evaluation import EvalError, evaluate
from mcpgym.harness.openai import OpenAIPolicy
from mcpgym.harness.policy import Policy, openai_tools, tool_call
from mcpgym.harness.report import Report
from mcpgym.harness.retry import Backoff
from mcpgym.harness.rollout import SYSTEM_PROMPT, read_rollout, rollout, run_episode
from mcpgym.harness.types import DEPRECATED as _DEPRECATED
from mcpgym.harness.types import AssistantTurn, CallOutcome, ChatTool, Message, ToolCall, Trajectory, Turn, Usage

__all__ = [
    "SYSTEM_PROMPT",
    "AssistantTurn",
    "Backoff",
    "CallOutcome",
    "ChatTool",
    "ConfigError",
    "EndpointError",
    "EndpointTimeout",
    "EvalError",
    "HarnessError",
    "Message",
    "OpenAIPolicy",
    "Policy",
    "Report",
    "ToolCall",
    "Trajectory",
    "Turn",
    "Usage",
    "evaluate",
    "openai_tools",
    "read_rollout",
    "rollout",
    "run_episode",
    "tool_call",
]

if _typing.TYPE_CHECKING:  # the deprecated names, typed; at run time `__getattr__` resolves them and warns
    ToolSpec = ChatTool
    Step = CallOutcome
else:
    __getattr__ = _deprecated_names(__name__, _DEPRECATED)
