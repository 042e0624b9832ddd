"""`mcpgym play TARGET [--seed N] [--task ID]`: play one episode by hand, in a terminal or from a pipe.

Layer: CLI, over the public client API only (`connect`, `AsyncEnv`, `list_tasks`): what it shows
is what any client gets. It prints the opening observation and the tools with their argument
types, then reads one action a line, `TOOL {json arguments}` (on a terminal, a bare `TOOL` asks
for each argument in turn), and after each step prints the result, the reward and done, and the
environment's `render()` of the new state when it offers one. Images are written to files and
their paths printed. The episode ends when the environment says done, or at end of input.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from mcpgym._cli.options import TARGETS, add_client_options, client_headers, json_object
from mcpgym._cli.tools import first_sentence, signature, type_name
from mcpgym._core.types import Rendering, StepResult
from mcpgym._targets.connect import connect
from mcpgym._targets.task_list import list_tasks

if TYPE_CHECKING:
    from mcpgym import AsyncEnv

NAME = "play"
QUIT = {"quit", "exit", "q"}
_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


def register(sub: Any) -> None:
    play = sub.add_parser(
        "play",
        help="play one episode by hand: type TOOL {json} lines (or pipe them in)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog=TARGETS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    play.add_argument("target", metavar="TARGET")
    play.add_argument("--seed", type=int, default=None, help="seed for reset()")
    play.add_argument("--task", default=None, metavar="ID", help="play this task of the target's catalog")
    play.add_argument("--options", default=None, metavar="JSON", help="options object for reset()")
    play.add_argument("--images", default=None, metavar="DIR", help="where to save images (default: a new temp dir)")
    add_client_options(play)


def dispatch(args: argparse.Namespace) -> None:
    try:
        sys.exit(anyio.run(_play, args))
    except KeyboardInterrupt:
        sys.exit(130)


class Screen:
    """Everything `play` prints, and where images go."""

    def __init__(self, images: str | None, interactive: bool) -> None:
        self.images = Path(images) if images else None
        self.interactive = interactive
        self.saved = 0
        self.last_render: Rendering | None = None

    def show(self, text: str = "") -> None:
        print(text, flush=True)

    def save_image(self, data: str, mime_type: str, name: str) -> str:
        if self.images is None:
            self.images = Path(tempfile.mkdtemp(prefix="mcpgym-play-"))
        self.images.mkdir(parents=True, exist_ok=True)
        self.saved += 1
        path = self.images / f"{self.saved:03d}-{name}.{_EXTENSIONS.get(mime_type, 'bin')}"
        try:
            path.write_bytes(base64.b64decode(data, validate=True))
        except (binascii.Error, ValueError):
            return f"(an image that is not valid base64, {len(data)} characters)"
        return str(path)

    def value(self, value: Any) -> None:
        """An observation or structured content: text as it is, an object one `key: value` line
        a key (strings as they read), anything else as JSON (never `\\u2665` for a suit)."""
        if isinstance(value, str):
            self.show(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                self.show(f"{key}: {item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)}")
        else:
            self.show(json.dumps(value, indent=2, ensure_ascii=False))

    def result(self, result: types.CallToolResult, step: int) -> None:
        for block in result.content:
            if isinstance(block, types.TextContent):
                self.show(block.text)
            elif isinstance(block, types.ImageContent):
                self.show(f"[image: {self.save_image(block.data, block.mime_type, f'step{step}')}]")
            else:
                self.show(f"[{block.type} content]")
        if not result.content and result.structured_content is not None:
            self.value(result.structured_content)

    def rendering(self, render: Rendering, step: int) -> None:
        if render == self.last_render:
            return  # unchanged (a refused move): shown already
        self.last_render = render
        self.show("-- now --")
        if render.text or render.markdown:
            self.show(render.text or render.markdown or "")
        if render.image is not None:
            path = self.save_image(render.image, render.mime_type or "image/png", f"render{step}")
            self.show(f"[image: {path}]")


async def _play(args: argparse.Namespace) -> int:
    options = json_object(args.options, "--options") if args.options else None
    screen = Screen(args.images, sys.stdin.isatty())
    async with connect(args.target, headers=client_headers(args)) as env:
        seed = args.seed
        if args.task is not None:
            seed, options = await _task(env, args.task)
        first = await env.reset(seed=seed, options=options)
        tools = await env.list_tools()
        screen.show(f"episode started{'' if seed is None else f' (seed {seed})'}:")
        screen.value(first.observation)
        await _show_render(env, screen, 0)
        screen.show()
        _show_tools(screen, tools)
        return await _loop(env, screen, {t.name: t for t in tools})


async def _task(env: AsyncEnv, task_id: str) -> tuple[int | None, dict[str, Any]]:
    tasks = await list_tasks(env, prompts=False)
    for task in tasks:
        if task.id == task_id:
            return task.seed, dict(task.options)
    if not tasks:
        raise SystemExit(f"mcpgym: --task {task_id!r}: this target has no task catalog")
    some = ", ".join(t.id for t in tasks[:5])
    raise SystemExit(f"mcpgym: no task {task_id!r} (of {len(tasks)}; for example {some})")


def _show_tools(screen: Screen, tools: list[types.Tool]) -> None:
    screen.show("tools:")
    for tool in tools:
        about = f"  - {first_sentence(tool.description)}" if tool.description else ""
        screen.show(f"  {signature(tool)}{about}")
    screen.show("type TOOL {json arguments} (e.g. " + _example(tools) + "); quit to stop")


def _example(tools: list[types.Tool]) -> str:
    """A line to type: the first tool that takes arguments, each given a value of its type."""
    tool = next((t for t in tools if t.input_schema.get("properties")), tools[0] if tools else None)
    if tool is None:
        return "no tools"
    props = tool.input_schema.get("properties") or {}
    example = {name: _sample(prop) for name, prop in props.items()}
    return f"{tool.name} {json.dumps(example, ensure_ascii=False)}" if props else tool.name


_SAMPLES: dict[str, Any] = {"integer": 0, "number": 0.5, "boolean": True, "array": [], "object": {}, "null": None}


def _sample(prop: Any) -> Any:
    """A value `prop` accepts, to show the syntax: its default, first option or minimum."""
    if not isinstance(prop, dict):
        return "..."
    for key in ("default", "const"):
        if key in prop:
            return prop[key]
    if prop.get("enum"):
        return prop["enum"][0]
    if prop.get("type") in ("integer", "number") and "minimum" in prop:
        return prop["minimum"]
    return _SAMPLES.get(str(prop.get("type")), "...")


async def _loop(env: AsyncEnv, screen: Screen, tools: dict[str, types.Tool]) -> int:
    step, total = 0, 0.0
    while True:
        line = await _read(screen, "> ")
        if line is None or line.strip() in QUIT:
            screen.show(f"stopped before the episode ended: {step} step(s), total reward {total:g}")
            return 0
        action = await _parse(line, screen, tools)
        if action is None:
            continue
        result = await env.call_tool(*action)
        step, total = step + 1, total + result.reward
        _show_step(screen, result, step)
        await _show_render(env, screen, step)
        if result.done:
            how = "truncated" if result.truncated else "done"
            screen.show(f"episode over ({how}): {step} step(s), total reward {total:g}")
            return 0


def _show_step(screen: Screen, result: StepResult[types.CallToolResult], step: int) -> None:
    screen.show(f"-- step {step}{' (error)' if result.is_error else ''} --")
    screen.result(result.observation, step)
    screen.show(f"reward={result.reward:g} done={result.done} truncated={result.truncated}")


async def _show_render(env: AsyncEnv, screen: Screen, step: int) -> None:
    render = (await env.state()).render
    if render is not None:
        screen.rendering(render, step)


async def _read(screen: Screen, prompt: str) -> str | None:
    """One line of input (None at its end); the prompt only on a terminal."""

    def read() -> str | None:
        try:
            return input(prompt if screen.interactive else "")
        except EOFError:
            return None

    return await anyio.to_thread.run_sync(read)


async def _parse(line: str, screen: Screen, tools: dict[str, types.Tool]) -> tuple[str, dict[str, Any]] | None:
    """`TOOL` or `TOOL {json}` as (name, arguments); None (after saying why) for a line to skip."""
    name, _, rest = line.strip().partition(" ")
    if not name:
        return None
    if rest.strip():
        try:
            arguments = json.loads(rest)
        except json.JSONDecodeError as exc:
            screen.show(f'not JSON after the tool name ({exc.msg}): write e.g. {name} {{"key": "value"}}')
            return None
        if not isinstance(arguments, dict):
            screen.show('the arguments must be a JSON object, e.g. {"key": "value"}')
            return None
        return name, arguments
    tool = tools.get(name)
    if tool is None or not screen.interactive:
        return name, {}  # the environment's own answer says what is wrong (an unknown tool, a missing argument)
    return await _ask(tool, screen)


async def _ask(tool: types.Tool, screen: Screen) -> tuple[str, dict[str, Any]] | None:
    """On a terminal, a bare tool name asks for each argument (Enter skips an optional one)."""
    schema = tool.input_schema
    required = set(schema.get("required") or ())
    arguments: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        optional = "" if name in required else ", Enter to skip"
        text = await _read(screen, f"  {name} ({type_name(prop)}{optional}): ")
        if text is None:
            return None
        if text == "" and name not in required:
            continue
        arguments[name] = _argument(text, prop)
    return tool.name, arguments


def _argument(text: str, prop: Any) -> Any:
    """A typed answer: strings as typed, anything else read as JSON when it parses."""
    if isinstance(prop, dict) and prop.get("type") == "string":
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
