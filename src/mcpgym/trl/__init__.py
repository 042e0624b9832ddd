"""mcpgym.trl: train on any mcpgym (or plain MCP) environment with TRL's GRPOTrainer.

```python
from trl import GRPOConfig, GRPOTrainer
import mcpgym.trl
from mcpgym.servers.echo import Echo

Env = mcpgym.trl.environment_class(Echo)         # or "python -m mcpgym.servers.echo", "http://host:port/mcp"
trainer = GRPOTrainer(
    model=model, processing_class=tokenizer,
    environment_factory=Env,                      # one instance per rollout, one episode per reset
    train_dataset=mcpgym.trl.dataset(Env, seeds=64),
    args=GRPOConfig(max_tool_calling_iterations=Echo.max_steps, ...),
)
```

The generated class has one method per MCP tool (same name, signature and docstring built
from its `inputSchema`), `reset(**row)` and `get_reward()`; see `_tool_class` for the
contract and `rfcs/0004-trl-integration.md` for the decisions. Needs `pip install
'mcpgym[trl]'` to train; importing this module imports neither trl nor torch.
"""

from mcpgym.trl._factory import EnvironmentFactory, dataset
from mcpgym.trl._rollout import episode_return, rollout_func
from mcpgym.trl._runtime import runtime as _runtime
from mcpgym.trl._tool_class import (
    EnvironmentToolError,
    EpisodeOverError,
    MCPEnvironment,
    ToolCallError,
    component_rewards,
    environment_class,
    multimodal_content,
    tool_text,
)


def close() -> None:
    """Close every generated instance's connection and the shared loop (also done at exit)."""
    _runtime.close()


__all__ = [
    "EnvironmentFactory",
    "EnvironmentToolError",
    "EpisodeOverError",
    "MCPEnvironment",
    "ToolCallError",
    "close",
    "component_rewards",
    "dataset",
    "environment_class",
    "episode_return",
    "multimodal_content",
    "rollout_func",
    "tool_text",
]
