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
    trajectories = await harness.rollout("servers.coding", policy, episodes=32, concurrency=8)
```

CLI: `mcpgym rollout ...` and `mcpgym harness config ...`. See rfcs/0005-harness.md.
"""

from mcpgym.harness.errors import ConfigError, EndpointError, EndpointTimeout, HarnessError
from mcpgym.harness.openai import OpenAIPolicy
from mcpgym.harness.policy import Policy, openai_tools, tool_call
from mcpgym.harness.retry import Backoff
from mcpgym.harness.rollout import SYSTEM_PROMPT, read_rollout, rollout, run_episode
from mcpgym.harness.types import AssistantTurn, Message, Step, ToolCall, ToolSpec, Trajectory, Turn, Usage

__all__ = [
    "SYSTEM_PROMPT",
    "AssistantTurn",
    "Backoff",
    "ConfigError",
    "EndpointError",
    "EndpointTimeout",
    "HarnessError",
    "Message",
    "OpenAIPolicy",
    "Policy",
    "Step",
    "ToolCall",
    "ToolSpec",
    "Trajectory",
    "Turn",
    "Usage",
    "openai_tools",
    "read_rollout",
    "rollout",
    "run_episode",
    "tool_call",
]
