"""GRPO on mcpgym.servers.blackjack with TRL (OpenEnv's featured example), on a CPU, nothing downloaded.

    pip install 'mcpgym[trl]'        # torch==2.13.0 first on the CI machines (see the README)
    python examples/grpo_trl_blackjack.py --steps 2

As in examples/grpo_trl_echo.py, the model is a random-initialised 2-layer Qwen2 with a
byte-level tokenizer trained here, warmed up on transcripts (one per dealt game: call `stand`,
then stop; one transcript alone does not carry over to other cards) so it writes well-formed
tool calls; GRPO then trains it against the environment. Every group of
`num_generations` rollouts replays one seeded deal, so the advantages compare hit/stand choices
on the same cards; rewards (+1 / 0 / -1) come from `get_reward()`, never from the model's text.

For a real model on a GPU, change only the model and the scale:

    model = "Qwen/Qwen3-1.7B"                         # any chat model whose template has tool calls
    Env = mcpgym.trl.environment_class(Blackjack, observation=table)   # or "http://host:8000/mcp"
    args = GRPOConfig(num_generations=8, per_device_train_batch_size=8, max_completion_length=512,
                      max_tool_calling_iterations=Blackjack.max_steps, bf16=True, use_vllm=True, ...)
    GRPOTrainer(model=model, environment_factory=Env, train_dataset=mcpgym.trl.dataset(Env, 5000), args=args)

drop `warm_up` (a real model already calls tools), and serve `python -m mcpgym.servers.blackjack --http`
replicas behind `mcpgym.pool.Pool` when rollouts outgrow one process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in this example comes from a hub
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is marked experimental
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python examples/...` from anywhere

import torch
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast
from trl.chat_template_utils import qwen2_5_chat_template
from trl.trainer.grpo_config import GRPOConfig
from trl.trainer.grpo_trainer import GRPOTrainer

import mcpgym.trl
from examples.grpo_trl_echo import build_model, build_tokenizer, render
from mcpgym.servers.blackjack import Blackjack


def table(observation: Any) -> str | None:
    """The first observation as prompt text: only the table line (the rules are the instructions)."""
    return str(observation["prompt"]).rsplit("\n\n", 1)[-1]


def transcript(prompt: list[dict[str, str]], first: str, result: str) -> list[dict[str, Any]]:
    """The rollout the warm-up teaches: stand, read the outcome, stop."""
    call = {"type": "function", "function": {"name": "stand", "arguments": {}}}
    user = {**prompt[-1], "content": prompt[-1]["content"] + first}
    return [
        *prompt[:-1],
        user,
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "stand", "content": result},
        {"role": "assistant", "content": "Done."},
    ]


def warm_up_all(
    model: Any,
    tokenizer: Any,
    conversations: list[list[dict[str, Any]]],
    tools: list[Any],
    steps: int,
    prompt_messages: int,
) -> None:
    """grpo_trl_echo's warm-up, one optimizer step per round over every transcript."""
    batches = []
    for conversation in conversations:
        prefix = render(tokenizer, conversation[:prompt_messages], tools, add_generation_prompt=True)
        ids = torch.tensor([tokenizer(render(tokenizer, conversation, tools), add_special_tokens=False)["input_ids"]])
        labels = ids.clone()
        labels[0, : len(tokenizer(prefix, add_special_tokens=False)["input_ids"])] = -100
        batches.append((ids, labels))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        for ids, labels in batches:
            (model(input_ids=ids, labels=labels).loss / len(batches)).backward()
        optimizer.step()
        optimizer.zero_grad()


def build(steps: int = 2, warmup_steps: int = 100, output_dir: str | None = None, seed: int = 0) -> GRPOTrainer:
    """Build everything and warm up; returns a trainer that `train()`s for `steps` GRPO steps."""
    torch.set_num_threads(1)  # see grpo_trl_echo.build: one thread is faster for a model this small
    Env = mcpgym.trl.environment_class(Blackjack, observation=table)  # in-process
    dataset = mcpgym.trl.dataset(Env, 8)  # seeds 0-7: one deal per GRPO group
    env = Env()
    tools = [env.hit, env.stand]  # type: ignore[attr-defined]
    conversations = []
    for row in dataset:
        first = env.reset(**row)
        assert first is not None
        conversations.append(transcript(row["prompt"], first, env.stand()))  # type: ignore[attr-defined]
    env._close()
    probe = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()))  # type: ignore[no-untyped-call]
    probe.chat_template = qwen2_5_chat_template
    corpus = [render(probe, c, tools) for c in conversations] * 2
    tokenizer = build_tokenizer(corpus + [json.dumps({"name": n, "arguments": {}}) for n in ("hit", "stand")])
    model = build_model(tokenizer, seed)
    prompt_messages = len(dataset[0]["prompt"])
    warm_up_all(model, tokenizer, conversations, tools, warmup_steps, prompt_messages)
    args = GRPOConfig(
        output_dir=output_dir or tempfile.mkdtemp(prefix="grpo-blackjack-"),
        max_steps=steps,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=192,
        max_tool_calling_iterations=Blackjack.max_steps,
        learning_rate=1e-4,
        logging_steps=1,
        use_cpu=True,
        bf16=False,
        activation_checkpointing=False,
        report_to="none",
        save_strategy="no",
        seed=seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    return GRPOTrainer(
        model=model, processing_class=tokenizer, environment_factory=Env, train_dataset=dataset, args=args
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2, help="GRPO optimizer steps")
    parser.add_argument("--warmup-steps", type=int, default=100, help="supervised warm-up steps (0: none)")
    args = parser.parse_args()
    trainer = build(args.steps, args.warmup_steps)
    trainer.train()
    for entry in trainer.state.log_history:
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in entry.items()})
    mcpgym.trl.close()


if __name__ == "__main__":
    main()
