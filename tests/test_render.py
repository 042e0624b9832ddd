"""`Environment.render()`: what people see of the current state, the same on every door."""

from __future__ import annotations

import base64
from typing import Any

import pytest

import mcpgym
from mcpgym.servers.blackjack import Blackjack
from mcpgym.servers.maze import Maze
from tests.conftest import DOORS, door


@pytest.mark.anyio
@pytest.mark.parametrize("kind", DOORS)
async def test_render_follows_the_state_on_every_door(kind: str) -> None:
    async with door(kind, Blackjack) as target, mcpgym.connect(target) as env:
        await env.reset(seed=3)
        before = (await env.state()).render
        assert before is not None and before.text is not None
        assert before.text.endswith("Dealer shows: Q♦. Your turn: hit or stand?")
        await env.call_tool("stand")
        after = (await env.state()).render
        assert after is not None and after.text == "Your cards: 3♥ 9♦ (total 12). Dealer shows: Q♦ 9♠. You lose."
        assert after.markdown is not None and "| dealer | Q♦ 9♠ | **19** |" in after.markdown


@pytest.mark.anyio
async def test_an_image_render_travels_as_base64_png() -> None:
    async with mcpgym.connect(Maze) as env:
        await env.reset(seed=3)
        render = (await env.state()).render
    assert render is not None and render.mime_type == "image/png" and render.image is not None
    assert base64.b64decode(render.image).startswith(b"\x89PNG")
    assert render.text is not None and "A" in render.text and "G" in render.text


class Plain(mcpgym.Environment):
    @mcpgym.tool
    async def act(self) -> str:
        """Act."""
        return "ok"


class Broken(Plain):
    def render(self) -> Any:
        return 42  # neither text nor an mcpgym.Render


@pytest.mark.anyio
async def test_no_render_is_none_and_a_wrong_one_says_what_render_returns() -> None:
    async with mcpgym.connect(Plain) as env:
        await env.reset()
        assert (await env.state()).render is None
    async with mcpgym.connect(Broken) as env:
        await env.reset()
        with pytest.raises(mcpgym.MCPError, match="render raised TypeError: render\\(\\) returns a str"):
            await env.state()
