"""Two MCP clients play one TextArena match over HTTP: the `textarena:ID` target (docs/bridges.md).

The server serves TicTacToe; each player connects on its own and resets its own episode into the
shared match "final" (`options={"match": ..., "player": seat}`). `reset` returns when it is that
player's turn and `move` when it is its turn again, so turn order needs no code here; each
player sees only its own observations and gets its own reward when the match ends for both.
Player 0 takes the top row; player 1 plays the middle row and loses.

    pip install 'mcpgym[textarena]'
    python examples/textarena_match.py                          # starts its own server
    python examples/textarena_match.py --url http://127.0.0.1:8000/mcp   # or one you started:
    mcpgym serve textarena:TicTacToe-v0 --http --port 8000
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

import mcpgym

PLANS = {0: ["[0]", "[1]", "[2]"], 1: ["[3]", "[4]", "[5]"]}


# --8<-- [start:match]
async def player(url: str, seat: int, moves: list[str]) -> float:
    """One player of the match "final": its own MCP client, its own episode."""
    async with mcpgym.connect(url) as env:
        first = await env.reset(seed=0, options={"match": "final", "player": seat})
        print(f"player {seat} sees:\n{first.observation}\n")  # its own view, once it is its turn
        for move in moves:
            result = await env.call_tool("move", {"action": move})
            if result.done:  # the match is over, for both players
                print(f"player {seat}: {result.text} My reward: {result.reward}")
                return result.reward
    raise RuntimeError(f"player {seat}'s moves ran out before the match ended")


async def match(url: str) -> dict[int, float]:
    """Both players at once, each as a separate client; the server enforces the turns."""
    rewards = await asyncio.gather(*(player(url, seat, moves) for seat, moves in PLANS.items()))
    return dict(zip(PLANS, rewards, strict=True))


# --8<-- [end:match]


def main(argv: Sequence[str] | None = None) -> dict[int, float]:
    parser = argparse.ArgumentParser(description="Two MCP clients play one TextArena match.")
    parser.add_argument("--url", help="a server serving textarena:TicTacToe-v0 (default: start one)")
    args = parser.parse_args(argv)
    if args.url:
        rewards = asyncio.run(match(args.url))
    else:
        with mcpgym.ServerProcess("python -m mcpgym serve textarena:TicTacToe-v0 --http --port 0") as server:
            rewards = asyncio.run(match(server.url))
    print("rewards:", rewards)  # {0: 1.0, 1: -1.0}
    return rewards


if __name__ == "__main__":
    main()
