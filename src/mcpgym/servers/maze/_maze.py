"""Maze generation, moves and rendering, free of any framework.

Layer: plain game logic. A maze of `size` x `size` rooms is carved by a depth-first walk from
the seeded RNG (so every room is reachable and the seed fixes the maze), laid out on a
(2*size+1)-tile square grid. The agent starts in the top-left room, the goal is the room
farthest from it (ties broken by position).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from mcpgym.servers.maze._png import RGB, encode

WALL, FLOOR = "#", "."
MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
COLOURS: dict[str, RGB] = {"#": (30, 30, 30), ".": (245, 245, 245), "A": (40, 90, 220), "G": (30, 170, 60)}
TILE = 16


@dataclass
class Maze:
    grid: list[list[str]]
    agent: tuple[int, int]
    goal: tuple[int, int]

    @classmethod
    def generate(cls, size: int, rng: random.Random) -> Maze:
        n = 2 * size + 1
        grid = [[WALL] * n for _ in range(n)]
        start = (1, 1)
        grid[1][1] = FLOOR
        stack = [start]
        while stack:
            r, c = stack[-1]
            options = [(r + 2 * dr, c + 2 * dc) for dr, dc in MOVES.values()]
            options = [(nr, nc) for nr, nc in options if 0 < nr < n and 0 < nc < n and grid[nr][nc] == WALL]
            if not options:
                stack.pop()
                continue
            nr, nc = rng.choice(options)
            grid[(r + nr) // 2][(c + nc) // 2] = grid[nr][nc] = FLOOR
            stack.append((nr, nc))
        maze = cls(grid, start, start)
        distances = maze.distances(start)
        maze.goal = max(distances, key=lambda cell: (distances[cell], cell))
        return maze

    def move(self, direction: str) -> bool:
        """Step one tile; False (and no move) into a wall."""
        dr, dc = MOVES[direction]
        r, c = self.agent[0] + dr, self.agent[1] + dc
        if self.grid[r][c] == WALL:
            return False
        self.agent = (r, c)
        return True

    def distances(self, source: tuple[int, int]) -> dict[tuple[int, int], int]:
        """Moves from `source` to every reachable floor tile (breadth-first)."""
        seen = {source: 0}
        queue = deque([source])
        while queue:
            r, c = queue.popleft()
            for dr, dc in MOVES.values():
                cell = (r + dr, c + dc)
                if self.grid[cell[0]][cell[1]] != WALL and cell not in seen:
                    seen[cell] = seen[(r, c)] + 1
                    queue.append(cell)
        return seen

    def tiles(self) -> list[str]:
        """The grid as text rows, agent `A` and goal `G` marked."""
        rows = [list(row) for row in self.grid]
        rows[self.goal[0]][self.goal[1]] = "G"
        rows[self.agent[0]][self.agent[1]] = "A"
        return ["".join(row) for row in rows]

    def render(self) -> bytes:
        """The grid as a PNG, `TILE` pixels per tile."""
        pixels = []
        for row in self.tiles():
            line = [COLOURS[tile] for tile in row for _ in range(TILE)]
            pixels += [line] * TILE
        return encode(pixels)
