"""`make(target)`: any mcpgym target as a `gymnasium.Env`, the reverse of `gym:ID`.

Layer: a client of the public doors (`connect_sync`); it drives a target exactly as any other
client does and owns no episode logic. The mapping (rfcs/0017-bridges.md):

    observation_space   `AnyText`: the reset observation (a string as it is, anything else as
                        JSON), then each tool result's text content
    action_space        Dict(tool=Discrete(len(tools)), arguments=AnyText): the index of the
                        tool in `env.tool_names` and its arguments as a JSON object. `step` also
                        takes {"tool": "name", "arguments": {...}} and a `CallToolAction`
    reward, terminated, truncated   the step's, one to one (an unscored step's NaN is 0.0)
    info                the reset's info; for a step, the tool, whether it failed, and the full
                        result (images included) as JSON
    reset(seed=None)    draws the seed from `np_random`, so after one seeded reset every later
                        reset is reproducible (Gymnasium's own contract)

A call that is not an action at all (arguments that are not a JSON object, a tool index out
of range) is answered here with an error observation and reward 0; it reaches no server.
"""

from __future__ import annotations

import contextlib
import json
import math
import string
from typing import Any, SupportsFloat

import gymnasium
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec

from mcpgym._client.sync import SyncEnv, connect_sync
from mcpgym._core.errors import MCPError
from mcpgym._core.types import CallToolAction
from mcpgym._targets.target import Target

ENV_ID = "mcpgym/MCP-v0"
"""Registered with Gymnasium too: `gymnasium.make("mcpgym/MCP-v0", target=...)` is `make(target)`
wrapped as gymnasium.make wraps every environment."""

_PRINTABLE = string.digits + string.ascii_letters + string.punctuation + " "
_SEED_BOUND = 2**31
"""Seeds drawn for an unseeded reset stay in the range every environment accepts."""


class AnyText(spaces.Text):
    """Text of any characters: MCP tool results are Unicode, and a charset would refuse some.
    `sample()` still draws from `charset` (printable ASCII, no control characters, by default)."""

    def __init__(self, max_length: int, *, min_length: int = 0, charset: str = _PRINTABLE) -> None:
        super().__init__(max_length, min_length=min_length, charset=charset)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length


class MCPGymnasiumEnv(gymnasium.Env[str, dict[str, Any]]):
    """A `gymnasium.Env` over an mcpgym target (`make` builds one; `close()` it).

    Observations are text; an action is `{"tool": index into tool_names, "arguments": JSON
    text}`; reward, terminated and truncated are the step's (rfcs/0017-bridges.md has the
    whole mapping). `tools` and `tool_names` are the target's tools, in its order."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's own class attribute

    def __init__(self, target: Target, *, max_text: int = 1 << 20, **options: Any) -> None:
        with contextlib.ExitStack() as stack:
            self._client: SyncEnv = stack.enter_context(connect_sync(target, **options))
            tools = self._client.list_tools()
            if not tools:
                raise ValueError(f"{target!r} has no tools, so a Gymnasium agent would have no actions")
            self._open = stack.pop_all()  # kept open until close()
        self.tools = tools
        self.tool_names = [tool.name for tool in tools]
        # A spec, as gymnasium.make gives its environments, so the checker can remake this one.
        self.spec = EnvSpec(ENV_ID, entry_point=_by_id, kwargs={"target": target, "max_text": max_text, **options})
        self.observation_space = AnyText(max_text)
        self.action_space = spaces.Dict({"tool": spaces.Discrete(len(tools)), "arguments": AnyText(4096)})

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        episode_seed = seed if seed is not None else int(self.np_random.integers(_SEED_BOUND))
        first = self._client.reset(seed=episode_seed, options=options)
        observation = first.observation if isinstance(first.observation, str) else json.dumps(first.observation)
        return observation, dict(first.info)

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        try:
            call = self._call(action)
        except ValueError as exc:
            return f"Error: {exc}", 0.0, False, False, {"tool": None, "is_error": True}
        try:
            result = self._client.step(call)
        except MCPError as exc:  # an unknown tool: a protocol error, still counted by the server
            return f"Error: {exc.message}", 0.0, False, False, {"tool": call.tool_name, "is_error": True}
        reward = float(result.reward)
        info = {
            "tool": call.tool_name,
            "is_error": result.is_error,
            "result": result.observation.model_dump(mode="json", by_alias=True, exclude={"meta"}, exclude_none=True),
        }
        return result.text, 0.0 if math.isnan(reward) else reward, result.terminated, result.truncated, info

    def _call(self, action: Any) -> CallToolAction:
        if isinstance(action, CallToolAction):
            return action
        if not isinstance(action, dict) or not {"tool", "arguments"} <= action.keys():
            raise ValueError('an action is {"tool": index or name, "arguments": a JSON object (or its text)}')
        tool, arguments = action["tool"], action["arguments"]
        if not isinstance(tool, str):
            index = int(tool)
            if not 0 <= index < len(self.tool_names):
                raise ValueError(f"tool {index} is out of range: there are {len(self.tool_names)} tools")
            tool = self.tool_names[index]
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                raise ValueError(f"the arguments are not JSON ({exc.msg})") from None
        if not isinstance(arguments, dict):
            raise ValueError("the arguments must be a JSON object")
        return CallToolAction(tool_name=tool, arguments=arguments)

    def close(self) -> None:
        self._open.close()  # a second close() finds nothing left to exit


def make(target: Target, **options: Any) -> MCPGymnasiumEnv:
    """A `gymnasium.Env` over `target` (any form `mcpgym.connect` takes); `options` go to
    `connect_sync` (e.g. `headers`, `read_timeout`), except `max_text`, the observation space's
    longest text. Close it when done (`env.close()`), as any Gymnasium environment."""
    return MCPGymnasiumEnv(target, **options)


def register() -> None:
    """Register `ENV_ID` with Gymnasium (once; importing the bridge does it)."""
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(ENV_ID, entry_point=_by_id)


def _by_id(**kwargs: Any) -> MCPGymnasiumEnv:
    return MCPGymnasiumEnv(**kwargs)
