"""Maze: a visual navigation task whose observations are images.

Each episode is a maze carved from the seed. The agent sees it only as a PNG (MCP
`ImageContent`): dark walls, a blue square for itself, a green square for the goal. `move`
steps one tile and returns the new picture; reaching the goal ends the episode with reward
1.0. `--text` (or `Maze(show_text=True)`) adds the grid as text too, for models without vision.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

import mcp_types as types
from pydantic import Field

import mcpgym
from mcpgym.servers.maze._maze import Maze as Grid

__all__ = ["Maze"]

Direction = Literal["up", "down", "left", "right"]


class Maze(mcpgym.Environment):
    """Find the way through a maze shown as an image: you are the blue square, the goal is the green
    square, dark tiles are walls. `move` steps one tile up, down, left or right and shows the maze
    again; `look` shows it without moving. Reaching the goal earns reward 1.0 and ends the episode."""

    max_reward = 1.0
    max_steps = 200

    def __init__(self, size: int = 4, show_text: bool = False) -> None:
        self.size = size
        self.show_text = show_text

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Options: `size` (rooms per side, 2-12) overrides the server's."""
        size = int((options or {}).get("size", self.size))
        if not 2 <= size <= 12:
            raise ValueError(f"size must be 2-12, not {size}")
        self.maze = Grid.generate(size, self.rng)
        first: dict[str, Any] = {"prompt": f"{_rules(type(self))} Call `look` to see the maze.", "size": size}
        return first | ({"grid": self.maze.tiles()} if self.show_text else {})

    @mcpgym.tool(inline=True)
    def look(self) -> types.CallToolResult:
        """Show the maze: you are blue, the goal is green, walls are dark."""
        return self._picture("Here is the maze.")

    @mcpgym.tool(inline=True)
    def move(
        self, direction: Annotated[Direction, Field(description="up, down, left or right")]
    ) -> types.CallToolResult:
        """Step one tile in `direction` and show the maze again. A wall blocks the move."""
        if not self.maze.move(direction):
            return self._picture(f"A wall blocks the way {direction}; you did not move.")
        if self.maze.agent == self.maze.goal:
            self.finish(reward=1.0)
            return self._picture("You reached the goal!")
        return self._picture(f"You moved {direction}.")

    def _picture(self, message: str) -> types.CallToolResult:
        text = message + ("\n" + "\n".join(self.maze.tiles()) if self.show_text else "")
        image = base64.b64encode(self.maze.render()).decode()
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text=text),
                types.ImageContent(type="image", data=image, mime_type="image/png"),
            ]
        )

    def render(self) -> mcpgym.Render | None:
        """The maze as the agent last saw it: the picture, and its tiles as text."""
        if not hasattr(self, "maze"):
            return None
        return mcpgym.Render(text="\n".join(self.maze.tiles()), image=self.maze.render())

    def state_info(self) -> dict[str, Any]:
        if not hasattr(self, "maze"):
            return {}
        return {"agent": list(self.maze.agent), "goal": list(self.maze.goal)}

    def catalog(self) -> list[mcpgym.Task]:
        """The first 100 seeds at the server's size, as named mazes."""
        prompt = f"{_rules(type(self))} Call `look` to see the maze."
        return [
            mcpgym.Task(
                id=f"maze/{self.size}/seed/{seed}",
                prompt=prompt,
                title=f"Maze {self.size}x{self.size}, seed {seed}",
                seed=seed,
            )
            for seed in range(100)
        ]


def _rules(cls: type) -> str:
    return " ".join((cls.__doc__ or "").split())
