"""`python -m mcpgym.servers.maze [--size N] [--text] [--http --port N]`: serve Maze over stdio or HTTP."""

from __future__ import annotations

import argparse
import functools

import mcpgym
from mcpgym.servers.maze import Maze


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mcpgym.servers.maze", description="Serve the Maze environment (image observations)."
    )
    p.add_argument("--size", type=int, default=4, help="rooms per side, 2-12 (default: %(default)s)")
    p.add_argument("--text", action="store_true", help="also show the grid as text (for models without vision)")
    return p


def configure(args: argparse.Namespace) -> functools.partial[Maze]:
    if not 2 <= args.size <= 12:
        raise SystemExit("mcpgym.servers.maze: --size must be 2-12")
    return functools.partial(Maze, size=args.size, show_text=args.text)


def main() -> None:
    mcpgym.run(Maze, parser=parser(), configure=configure)


if __name__ == "__main__":
    main()
