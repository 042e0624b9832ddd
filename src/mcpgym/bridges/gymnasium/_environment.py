"""A registered Gymnasium environment as an mcpgym `Environment` (what a `gym:ID` target serves).

Layer: episode side: imports Gymnasium and the episode core, never a transport or a client.

One subclass per environment id and keyword arguments (`environment_class`), because a tool's
input schema is fixed per class and here it follows the action space. Each mcpgym episode is
one instance holding one `gymnasium.make(...)` environment, so a seeded reset replays
Gymnasium's own trajectory exactly (the same `reset(seed=...)`, the same actions in order):

    reset(seed, options)  -> env.reset(seed=seed, options=options); the first observation is
                             {"observation": obs, "text": ansi render?}, `info` the reset info
    tool `step(action)`   -> env.step(action): reward as the step's reward, terminated ->
                             finish(), truncated -> finish(truncated=True) (terminated wins
                             when both are set, as Gymnasium's bootstrapping reads them); the
                             result is {"observation", "info"} as structured content and JSON
                             text, then the `ansi` render as text and the `rgb_array` frame as
                             a PNG image, for the render modes the environment supports
    render()              -> the same two renders of the current state, for people (the web
                             page, `mcpgym play`, the viewer)
"""

from __future__ import annotations

import base64
import inspect
import json
from typing import Any, ClassVar

import anyio.to_thread
import gymnasium
import mcp_types as types
from gymnasium import spaces

from mcpgym._episode.environment import Environment, Reset
from mcpgym._episode.render import Render
from mcpgym._episode.tools import tool
from mcpgym.bridges.gymnasium._png import encode
from mcpgym.bridges.gymnasium._spaces import action_names, annotation, to_action, to_json

RENDER_MODES = ("ansi", "rgb_array")
"""The render modes shown to agents, in this order (text first), when the environment has them."""


class GymnasiumEnvironment(Environment):
    """Base of the per-id classes `environment_class` builds; not served by itself."""

    gym_id: ClassVar[str]
    gym_kwargs: ClassVar[dict[str, Any]]
    action_space: ClassVar[spaces.Space[Any]]
    render_modes: ClassVar[tuple[str, ...]] = ()
    __mcpgym_target__: ClassVar[str]
    """The target text naming this class in another process (`gym:ID?key=value`)."""

    def __init__(self) -> None:
        self._env: gymnasium.Env[Any, Any] | None = None

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Reset:
        return await anyio.to_thread.run_sync(self._reset, seed, options)

    def _reset(self, seed: int | None, options: dict[str, Any] | None) -> Reset:
        if self._env is None:
            self._env = make_gymnasium(self.gym_id, self.gym_kwargs, self.render_modes)
        observation, info = self._env.reset(seed=seed, options=options)
        first: dict[str, Any] = {"observation": to_json(observation)}
        if "ansi" in self.render_modes:
            first["text"] = str(self._render("ansi"))
        return Reset(first, to_json(info))

    def _step(self, action: Any) -> types.CallToolResult:
        if self._env is None:
            raise RuntimeError("step before reset")  # the episode core resets first; a guard, not a path
        observation, reward, terminated, truncated, info = self._env.step(to_action(self.action_space, action))
        self.reward(float(reward))
        if terminated or truncated:
            self.finish(truncated=bool(truncated and not terminated))
        structured = {"observation": to_json(observation), "info": to_json(info)}
        content: list[types.ContentBlock] = [types.TextContent(type="text", text=json.dumps(structured))]
        content += [self._content(mode) for mode in self.render_modes]
        return types.CallToolResult(content=content, structured_content=structured)

    def _content(self, mode: str) -> types.ContentBlock:
        frame = self._render(mode)
        if mode == "ansi":
            return types.TextContent(type="text", text=str(frame))
        return types.ImageContent(type="image", data=base64.b64encode(encode(frame)).decode(), mime_type="image/png")

    def _render(self, mode: str) -> Any:
        """Render in `mode`. The environment was made in the first supported mode; the others are
        drawn by switching `render_mode` for the one call (Gymnasium environments read it when
        they render; rendering draws no random numbers, so trajectories are unchanged)."""
        assert self._env is not None
        base = self._env.unwrapped
        made = base.render_mode
        base.render_mode = mode
        try:
            return self._env.render()
        finally:
            base.render_mode = made

    def render(self) -> Render | None:
        """The current state as the environment renders it: `ansi` text, `rgb_array` image."""
        if self._env is None or not self.render_modes:
            return None
        text = str(self._render("ansi")) if "ansi" in self.render_modes else None
        image = encode(self._render("rgb_array")) if "rgb_array" in self.render_modes else None
        return Render(text=text, image=image)

    async def close(self) -> None:
        if self._env is not None:
            self._env.close()

    def state_info(self) -> dict[str, Any]:
        return {"gymnasium": {"id": self.gym_id, "kwargs": self.gym_kwargs}}


def make_gymnasium(env_id: str, kwargs: dict[str, Any], render_modes: tuple[str, ...]) -> gymnasium.Env[Any, Any]:
    made = dict(kwargs)
    if render_modes and "render_mode" not in made:
        made["render_mode"] = render_modes[0]
    return gymnasium.make(env_id, **made)


def environment_class(env_id: str, kwargs: dict[str, Any], text: str) -> type[GymnasiumEnvironment]:
    """A `GymnasiumEnvironment` subclass for `gymnasium.make(env_id, **kwargs)`, its `step` tool's
    schema following the action space (made once here to read the spaces, then closed)."""
    probe = gymnasium.make(env_id, **kwargs)
    try:
        space = probe.action_space
        supported = probe.metadata.get("render_modes", [])
        doc = inspect.getdoc(type(probe.unwrapped))
    finally:
        probe.close()
    chosen = kwargs.get("render_mode")
    modes = tuple(m for m in RENDER_MODES if m in supported and chosen in (None, m))
    names = action_names(doc, space)
    namespace = {
        "__doc__": _instructions(env_id, doc, modes),
        "__module__": __name__,
        "__mcpgym_target__": text,
        "gym_id": env_id,
        "gym_kwargs": dict(kwargs),
        "action_space": space,
        "render_modes": modes,
        "step": tool(_step_method(space, names, env_id)),
    }
    name = "Gymnasium_" + "".join(c if c.isalnum() else "_" for c in env_id)
    return type(name, (GymnasiumEnvironment,), namespace)


def _step_method(space: spaces.Space[Any], names: dict[int, str], env_id: str) -> Any:
    def step(self: GymnasiumEnvironment, action: Any) -> types.CallToolResult:
        return self._step(action)

    parameters = [
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("action", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation(space, names)),
    ]
    # The SDK reads the schema from the signature (inspect.signature honours __signature__).
    step.__signature__ = inspect.Signature(parameters, return_annotation=types.CallToolResult)  # type: ignore[attr-defined]
    step.__doc__ = (
        f"Take one step of {env_id} with `action`, in its action space {space}. Returns the new "
        "observation (JSON) and the environment's renders; reward and done come with the result."
    )
    return step


def _instructions(env_id: str, doc: str | None, modes: tuple[str, ...]) -> str:
    paragraphs = [p.strip() for p in (doc or "").split("\n\n")]
    summary = next((p for p in paragraphs if p and not p.startswith("#")), "")
    shown = " and ".join({"ansi": "its text render", "rgb_array": "an image"}[m] for m in modes)
    return (
        f"The Gymnasium environment {env_id}. {summary}\n\nCall `step` with an action; each result "
        f"holds the observation as JSON{' and ' + shown if shown else ''}."
    )
