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

One rollout is one sample, and a sample is one token sequence: when an episode's prompts
diverged (the chat template re-rendered history, e.g. dropped earlier reasoning; the harness
compacted its context), its tokens are several branches (`gateway.merge`) and only one can be
the sample. Joining them would put later turns after text the model never saw there, so the
trainer's logprobs (and its importance ratios) would be for another context. The sample is the
last branch the model generated in: its prompt holds the earlier turns as re-rendered (mask 0),
its model tokens are exactly what the engine sampled in that context. `branches` and
`untrained_tokens` (the model tokens of the other branches) say per rollout what was left out.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from mcpgym.gateway import GatewayConfig, TokenSequence, running
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
    that is masked out (`env_mask` 0). Its `episode_return` is the episode's return, which still
    counts in its group's baseline, or None when the episode failed (an error is not an outcome
    of the policy: TRL leaves a rollout that every reward function scores None out of the
    baseline and gives it no advantage). When an episode's prompts diverged, its last
    branch that has model tokens is the sample (see the module docstring), a warning says so
    once, and the extra fields `branches` and `untrained_tokens` count what was left out. A model
    token the engine gave no logprob for gets `None`, which TRL leaves out of its
    importance-sampling correction.
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


DIVERGED = (
    "mcpgym.trl.rollout_func: an episode's prompts diverged from the tokens the model generated (the chat "
    "template re-rendered earlier turns, or the harness compacted its context), so its tokens are several "
    "branches; each such rollout trains on its last branch only. The `branches` and `untrained_tokens` fields "
    "count what was left out (docs/traces.md, 'Training with TRL')."
)


def _batch(trajectories: list[Trajectory], tokenizer: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {
        "prompt_ids": [],
        "completion_ids": [],
        "logprobs": [],
        "env_mask": [],
        "episode_return": [],
        "branches": [],
        "untrained_tokens": [],
    }
    filler = getattr(tokenizer, "eos_token_id", None)
    filler = 0 if filler is None else filler
    for trajectory in trajectories:
        sequence = _sample(trajectory.tokens)
        out["branches"].append(len(trajectory.tokens))
        out["untrained_tokens"].append(sum(sum(s.mask) for s in trajectory.tokens if s is not sequence))
        out["episode_return"].append(None if trajectory.failed else float(trajectory.reward))
        if sequence is None or trajectory.failed:
            out["prompt_ids"].append([filler])
            out["completion_ids"].append([filler])
            out["logprobs"].append([0.0])
            out["env_mask"].append([0])
            continue
        ids, mask, logprobs = sequence.completion
        out["prompt_ids"].append(sequence.token_ids[: sequence.prompt_length])
        out["completion_ids"].append(ids)
        # Observation tokens (mask 0) get 0.0, as TRL's own tool loop gives them; a model token
        # without a logprob keeps None (TRL: no importance-sampling correction for it), never a 0.0
        # that would stand for probability 1.
        out["logprobs"].append([lp if m else 0.0 for lp, m in zip(logprobs, mask, strict=True)])
        out["env_mask"].append(mask)
    if any(n > 1 for n in out["branches"]):
        warnings.warn(DIVERGED, stacklevel=3)
    return out


def _sample(branches: list[TokenSequence]) -> TokenSequence | None:
    """The branch a rollout trains on: the last one with a model token (None: no branch has one)."""
    return next((s for s in reversed(branches) if any(s.mask)), None)
