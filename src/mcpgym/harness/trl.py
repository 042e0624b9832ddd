"""`rollout_func`: GRPOTrainer(rollout_func=...) playing mcpgym episodes through the gateway.

Layer: harness (it plays episodes with `rollout` and `OpenAIPolicy`); `mcpgym.trl.rollout_func`
forwards here, so the core's TRL adapter imports nothing built on it. Importing this module
imports neither trl nor torch. TRL's contract (trl 1.16, grpo_trainer.py `_generate`): the
function gets the batch's prompts (one entry per rollout) and the trainer, and returns
`prompt_ids`, `completion_ids` and `logprobs` lists (one per rollout); `env_mask` (1: a model
token, 0: a token the environment or template added) becomes the loss mask, and every other key
is handed to the reward functions per rollout (`episode_return` here).

Each prompt becomes one episode: `task(prompt)` names its seed and options (default: a seed
from a stable hash of the prompt, so the G rollouts of one prompt start from the same state, as
GRPO's group baseline needs). The episodes are played by `harness.rollout` with the model behind
`base_url` (a gateway, or an engine that returns vLLM's token fields); default: a gateway
started for the batch in front of the trainer's vLLM server (`GRPOConfig.vllm_server_base_url`,
or its host and port). The tokens trained on are the gateway's: exactly what the engine sampled,
with its logprobs, so TRL's importance-sampling correction sees the sampler's own numbers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from mcpgym.gateway import GatewayConfig, running
from mcpgym.harness.openai import OpenAIPolicy
from mcpgym.harness.rollout import rollout
from mcpgym.harness.types import Trajectory

if TYPE_CHECKING:
    from mcpgym import Target, Task

RolloutFunc = Callable[[list[Any], Any], dict[str, list[Any]]]


def rollout_func(
    target: Target,
    *,
    base_url: str | None = None,
    model: str | None = None,
    task: Callable[[Any], Task] | None = None,
    max_turns: int = 10,
    concurrency: int = 8,
    system_prompt: str | None = None,
    temperature: float | None = 1.0,
    max_tokens: int | None = None,
    record: str | None = None,
    episode_timeout: float | None = None,
) -> RolloutFunc:
    """A `rollout_func` for `GRPOTrainer` that plays `target`'s episodes through the gateway.

    `model` defaults to the trainer's model name; `max_tokens` to `max_completion_length`. A
    rollout whose episode failed, or whose engine gave no token ids, gets a one-token completion
    that is masked out (`env_mask` 0) and reward 0. When an episode's prompts diverged (the
    template re-rendered history), the last branch is the one trained on.
    """

    def run(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        tasks = [(task or _task)(prompt) for prompt in prompts]
        args = trainer.args
        options = {
            "model": model or getattr(trainer.model, "name_or_path", None) or "default",
            "max_tokens": max_tokens or getattr(args, "max_completion_length", None),
        }
        trajectories = anyio.run(_play, target, tasks, base_url or _vllm_url(args), base_url is None, options, settings)
        return _batch(trajectories, trainer.processing_class)

    settings = {
        "max_turns": max_turns,
        "concurrency": concurrency,
        "system_prompt": system_prompt,
        "temperature": temperature,
        "record": record,
        "episode_timeout": episode_timeout,
    }
    return run


def _task(prompt: Any) -> Task:
    from mcpgym import Task

    text = prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
    return Task(id=f"prompt/{seed}", prompt=text, seed=seed)


def _vllm_url(args: Any) -> str:
    base = getattr(args, "vllm_server_base_url", None)
    if not base:
        base = f"http://{getattr(args, 'vllm_server_host', '127.0.0.1')}:{getattr(args, 'vllm_server_port', 8000)}"
    return base.rstrip("/") + "/v1"


async def _play(
    target: Target, tasks: list[Task], url: str, front: bool, options: dict[str, Any], settings: dict[str, Any]
) -> list[Trajectory]:
    async def play(base_url: str) -> list[Trajectory]:
        policy = OpenAIPolicy(
            base_url, options["model"], temperature=settings["temperature"], max_tokens=options["max_tokens"]
        )
        async with policy:
            return await rollout(
                target,
                policy,
                episodes=len(tasks),
                tasks=tasks,
                concurrency=settings["concurrency"],
                max_turns=settings["max_turns"],
                system_prompt=settings["system_prompt"],
                episode_timeout=settings["episode_timeout"],
            )

    if not front:
        return await play(url)
    async with running(GatewayConfig(upstream=url, record=settings["record"])) as served:
        return await play(served + "/v1")


def _batch(trajectories: list[Trajectory], tokenizer: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {
        "prompt_ids": [],
        "completion_ids": [],
        "logprobs": [],
        "env_mask": [],
        "episode_return": [],
    }
    filler = getattr(tokenizer, "eos_token_id", None)
    filler = 0 if filler is None else filler
    for trajectory in trajectories:
        sequence = trajectory.tokens[-1] if trajectory.tokens else None
        if sequence is None or trajectory.failed or sequence.prompt_length == len(sequence.token_ids):
            out["prompt_ids"].append([filler])
            out["completion_ids"].append([filler])
            out["logprobs"].append([0.0])
            out["env_mask"].append([0])
            out["episode_return"].append(0.0)
            continue
        ids, mask, logprobs = sequence.completion
        out["prompt_ids"].append(sequence.token_ids[: sequence.prompt_length])
        out["completion_ids"].append(ids)
        out["logprobs"].append([0.0 if lp is None else lp for lp in logprobs])
        out["env_mask"].append(mask)
        out["episode_return"].append(float(trajectory.reward))
    return out
