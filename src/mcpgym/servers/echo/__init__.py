"""Echo: the smallest complete mcpgym environment, and a tested example.

Each episode draws a target word from the seeded RNG. `echo_message` echoes what it is
given; saying the target word earns reward 1.0 and ends the episode. `repeat` shows a typed,
bounded argument. After `max_steps` tool calls the episode is truncated.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

import mcpgym

WORDS = ("apple", "river", "stone", "cloud", "ember", "maple", "orbit", "tiger")


class Echo(mcpgym.Environment):
    """Echo messages back. Say the target word from the first observation to earn reward 1.0."""

    max_reward = 1.0
    max_steps = 8

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> dict[str, str]:
        self.target = str((options or {}).get("target") or self.rng.choice(WORDS))
        return {"prompt": f"Say the word {self.target!r} using echo_message.", "target": self.target}

    @mcpgym.tool
    async def echo_message(self, message: str) -> str:
        """Echo the message back. Saying the target word ends the episode with reward 1.0."""
        if message.strip().lower() == self.target:
            self.finish(reward=1.0)
        return message

    @mcpgym.tool
    async def repeat(self, message: str, times: Annotated[int, Field(ge=1, le=10)] = 2) -> str:
        """Repeat the message `times` times (1-10), separated by spaces."""
        return " ".join([message] * times)
