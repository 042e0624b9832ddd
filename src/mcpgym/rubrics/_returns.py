"""Per-step returns for trainers that want them, from an episode's per-step rewards.

Layer: bottom (pure functions). A trajectory reward arrives on the last step, so a trainer
that credits each step with its return-to-go gets it spread back with the discount stated.
"""

from __future__ import annotations

from collections.abc import Sequence


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """G_t = r_t + gamma * G_{t+1}: each step's discounted return-to-go (gamma in [0, 1]).
    A NaN reward (unscored) makes every return up to it NaN, as it should: nothing is known."""
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    returns = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def final_only(rewards: Sequence[float]) -> list[float]:
    """The episode's return credited to every step (gamma = 1, no per-step shaping): what an
    outcome-reward trainer (GRPO and kin) uses."""
    total = sum(rewards)
    return [total] * len(rewards)
