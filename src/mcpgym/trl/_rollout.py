"""`rollout_func` and `episode_return`: GRPOTrainer(rollout_func=...) over mcpgym episodes played through the gateway.

Layer: the core's TRL adapter. The episodes are played by the harness (`mcpgym.harness.trl`),
which is built on the core: it is looked up by name when `rollout_func` is called, as the CLI
finds the harness's commands, so importing mcpgym.trl imports neither the harness nor trl.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

RolloutFunc = Callable[[list[Any], Any], dict[str, list[Any]]]


def rollout_func(target: Any, **options: Any) -> RolloutFunc:
    """A `rollout_func` for `GRPOTrainer` that plays `target`'s episodes through `mcpgym gateway`.

    Each prompt of a batch is one episode (its seed a stable hash of the prompt, so the G
    rollouts of a prompt start alike), played by `harness.rollout` through a gateway started in
    front of the trainer's vLLM server (or `base_url=`); returns TRL's `prompt_ids`,
    `completion_ids`, `logprobs` and `env_mask` from the gateway's merged token sequence (an
    episode whose prompts diverged: its last branch), plus `episode_return` (the episode
    return) for the reward functions and `branches` and `untrained_tokens` (what a diverged
    episode's sample left out). Options: see
    `mcpgym.harness.trl.rollout_func` (`base_url`, `model`, `task`, `max_turns`, `concurrency`,
    `system_prompt`, `temperature`, `max_tokens`, `record`, `episode_timeout`).
    """
    play: RolloutFunc = importlib.import_module("mcpgym.harness.trl").rollout_func(target, **options)
    return play


def episode_return(completions: list[Any], episode_return: list[float | None], **_: Any) -> list[float | None]:
    """A reward function for `GRPOTrainer(reward_funcs=...)` with `rollout_func`: each rollout's
    episode return (None for an episode that failed: TRL leaves it out of the group's baseline)."""
    return [None if r is None else float(r) for r in episode_return]
