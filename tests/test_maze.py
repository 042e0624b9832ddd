"""mcpgym.servers.maze and image observations: ImageContent on every door, recorded by reference,
shown to models as image parts (harness) and as TRL's multimodal tool content."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

import mcpgym
import mcpgym.trl
from mcpgym import CallToolAction, harness
from mcpgym.harness.policy import tool_call
from mcpgym.harness.types import AssistantTurn, ChatTool, Message
from mcpgym.servers.maze import Maze
from mcpgym.servers.maze._maze import MOVES, TILE
from mcpgym.servers.maze._maze import Maze as Grid
from mcpgym.servers.maze._png import decode_size
from mcpgym.testing import transcripts as _transcripts

pytestmark = pytest.mark.anyio


def solution(seed: int, size: int = 4) -> list[str]:
    """The shortest path to the goal, worked out from the seed alone (as a test oracle)."""
    grid = Grid.generate(size, random.Random(seed))
    goal, here, path = grid.goal, grid.agent, []
    distances = grid.distances(goal)
    while here != goal:
        for name, (dr, dc) in MOVES.items():
            cell = (here[0] + dr, here[1] + dc)
            if distances.get(cell, 1 << 30) == distances[here] - 1:
                path.append(name)
                here = cell
                break
    return path


async def test_following_the_path_reaches_the_goal_and_walls_block() -> None:
    async with mcpgym.connect(Maze) as env:
        for seed in range(5):
            await env.reset(seed=seed)
            path = solution(seed)
            assert len(path) >= 4  # the premise: a real maze, not a corridor of one
            results = [await env.step(CallToolAction(tool_name="move", arguments={"direction": d})) for d in path]
            assert [r.done for r in results] == [False] * (len(path) - 1) + [True]
            assert results[-1].reward == 1.0 and "goal" in results[-1].text
        await env.reset(seed=0)
        state = await env.state()
        blocked = next(d for d, (dr, dc) in MOVES.items() if d == "up")  # the start is in the top row
        result = await env.step(CallToolAction(tool_name="move", arguments={"direction": blocked}))
        assert "wall" in result.text and (await env.state()).info == state.info


async def test_every_observation_is_a_png_image() -> None:
    async with mcpgym.connect(Maze) as env:
        await env.reset(seed=1)
        result = await env.step(CallToolAction(tool_name="look"))
    kinds = [type(block) for block in result.observation.content]
    assert kinds == [types.TextContent, types.ImageContent]
    image = result.observation.content[1]
    assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
    png = base64.b64decode(image.data)
    assert png.startswith(b"\x89PNG") and decode_size(png) == (9 * TILE, 9 * TILE)


async def test_every_door_sends_the_same_images() -> None:
    script: list[tuple[str, dict[str, Any]]] = [("look", {})]
    script += [("move", {"direction": d}) for d in solution(0)]
    script += [("move", {"direction": "sideways"})]  # not a direction: an isError result
    results = await _transcripts(Maze, script)
    reference = results["inprocess"]
    images = [row for row in reference if row[0] == "step" and row[2]["content"][-1]["type"] == "image"]
    assert len(images) == len(script) - 1  # the premise: images were sent
    for kind, transcript in results.items():
        assert transcript == reference, f"{kind} differs from in-process"


async def test_images_are_recorded_once_by_reference_and_read_back_whole(tmp_path: Path) -> None:
    sent: list[types.CallToolResult] = []
    async with mcpgym.connect(mcpgym.GymServer(Maze, record=tmp_path)) as env:
        await env.reset(seed=2)
        for name, args in [("look", {}), ("look", {}), ("move", {"direction": solution(2)[0]})]:
            sent.append((await env.step(CallToolAction(tool_name=name, arguments=args))).observation)
    lines, blobs = _on_disk(tmp_path)
    assert all(len(line) < 1500 for line in lines), "base64 image data was written into the JSONL lines"
    assert len(blobs) == 2 and all(b.suffix == ".png" for b in blobs)  # two looks at one picture, one move
    [recording] = mcpgym.read_recordings(tmp_path)
    for record, original in zip(recording.steps, sent, strict=True):
        assert record.result.content == original.content


def _on_disk(directory: Path) -> tuple[list[str], list[Path]]:
    """The recording's lines and its blob files."""
    lines = next(directory.glob("*.jsonl")).read_text().splitlines()
    return lines, sorted((directory / "blobs").iterdir())


def _written(out: Path) -> tuple[str, list[Path]]:
    return out.read_text(), sorted((out.parent / "blobs").iterdir())


async def test_text_readers_see_each_image_named_not_an_empty_string() -> None:
    async with mcpgym.connect(Maze) as env:
        await env.reset(seed=0)
        result = await env.step(CallToolAction(tool_name="look"))
    text = mcpgym.trl.tool_text(result.observation)
    assert text.startswith("Here is the maze.\n[image: image/png, ") and "sha256:" in text
    only_image = types.CallToolResult(content=[result.observation.content[1]])
    assert mcpgym.trl.tool_text(only_image).startswith("[image: image/png")


async def test_harness_shows_tool_images_as_openai_image_parts(tmp_path: Path) -> None:
    seen: list[list[Message]] = []

    async def look_then_stop(messages: list[Message], tools: list[ChatTool]) -> AssistantTurn:
        seen.append(messages)
        if len(seen) == 1:
            return AssistantTurn(tool_calls=[tool_call("a", "look", {}), tool_call("b", "look", {})])
        return AssistantTurn(content="done looking")

    out = tmp_path / "rollout.jsonl"
    [trajectory] = await harness.rollout(Maze, look_then_stop, seed=0, out=out)
    roles = [m["role"] for m in seen[1]]
    assert roles[-4:] == ["assistant", "tool", "tool", "user"]  # tool messages first, then the pictures
    assert "[image: image/png" in seen[1][-3]["content"]
    parts = seen[1][-1]["content"]
    urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert len(urls) == 2 and all(u.startswith("data:image/png;base64,iVBOR") for u in urls)
    assert trajectory.status == "ok"
    assert "base64" not in json.dumps([t.model_dump() for t in trajectory.turns])  # turns keep references
    line, blobs = _written(out)
    assert "base64" not in line and len(blobs) == 1  # the picture, once, by reference
    [back] = harness.read_rollout(out)
    assert back.messages == trajectory.messages  # read back whole


async def test_trl_gets_pil_images_when_multimodal_and_text_otherwise() -> None:
    Env = mcpgym.trl.environment_class(Maze, multimodal=True)
    env = Env()
    env.reset(seed=0)
    content = env.look()  # type: ignore[attr-defined]
    assert [part["type"] for part in content] == ["image", "text"]
    assert content[0]["image"].size == (9 * TILE, 9 * TILE) and content[1]["text"] == "Here is the maze."
    plain = mcpgym.trl.environment_class(Maze)()
    plain.reset(seed=0)
    assert plain.look().startswith("Here is the maze.\n[image: image/png")  # type: ignore[attr-defined]


async def test_text_mode_adds_the_grid_for_models_without_vision() -> None:
    async with mcpgym.connect(Maze(show_text=True)) as env:
        first = await env.reset(seed=0)
        result = await env.step(CallToolAction(tool_name="look"))
    grid = first.observation["grid"]
    assert len(grid) == 9 and grid[1][1] == "A" and sum(row.count("G") for row in grid) == 1
    assert result.text.splitlines()[1:10] == grid
