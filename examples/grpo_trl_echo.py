"""GRPO on mcpgym.servers.echo with TRL, end to end on a CPU, with nothing downloaded.

    pip install 'mcpgym[trl]'        # torch==2.13.0 first on the CI machines (see the README)
    python examples/grpo_trl_echo.py --steps 2

The model is a random-initialised 2-layer Qwen2 (about 100k parameters) and the tokenizer a
byte-level BPE trained here in a second, carrying TRL's Qwen2.5 chat template (so TRL knows
how to parse its tool calls). A random model never writes a well-formed tool call, so a short
warm-up first overfits it on one transcript that calls `echo_message`; GRPO then trains it
against the environment, rewards coming from `get_reward()` (the episode return in
`_meta`). The same three lines drive a real model: build the class, the dataset, the trainer.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in this example comes from a hub
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is marked experimental

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from trl.chat_template_utils import qwen2_5_chat_template
from trl.trainer.grpo_config import GRPOConfig
from trl.trainer.grpo_trainer import GRPOTrainer

import mcpgym.trl
from mcpgym.servers.echo import Echo

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TAGS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
TARGET = "apple"


def tool_schemas(Env: type[mcpgym.trl.MCPEnvironment]) -> list[Any]:
    """The environment's tool methods, as TRL hands them to the chat template."""
    env = Env()
    return [getattr(env, name) for name in ("echo_message", "repeat")]


def transcript(prompt: list[dict[str, str]], first: str) -> list[dict[str, Any]]:
    """The rollout the warm-up teaches: call echo_message with the target word, then stop."""
    call = {"type": "function", "function": {"name": "echo_message", "arguments": {"message": TARGET}}}
    user = {**prompt[-1], "content": prompt[-1]["content"] + first}
    return [
        *prompt[:-1],
        user,
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "echo_message", "content": TARGET},
        {"role": "assistant", "content": "Done."},
    ]


def build_tokenizer(corpus: list[str], vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on `corpus` (every byte stays encodable) with Qwen2.5's template."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(corpus, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )
    tokenizer.add_tokens(TAGS)
    tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer


def build_model(tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def render(tokenizer: PreTrainedTokenizerFast, messages: list[dict[str, Any]], tools: list[Any], **options: Any) -> str:
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, **options)
    assert isinstance(text, str)
    return text


def warm_up(
    model: Qwen2ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    conversation: list[dict[str, Any]],
    tools: list[Any],
    steps: int,
    prompt_messages: int,
) -> float:
    """Overfit on one transcript, loss on everything after the prompt; returns the last loss."""
    prefix = render(tokenizer, conversation[:prompt_messages], tools, add_generation_prompt=True)
    full = render(tokenizer, conversation, tools)
    ids = torch.tensor([tokenizer(full, add_special_tokens=False)["input_ids"]])
    labels = ids.clone()
    labels[0, : len(tokenizer(prefix, add_special_tokens=False)["input_ids"])] = -100
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    loss = torch.tensor(0.0)
    for _ in range(steps):
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return loss.item()


def build(steps: int = 2, warmup_steps: int = 150, output_dir: str | None = None, seed: int = 0) -> GRPOTrainer:
    """Build everything and warm up; returns a trainer that `train()`s for `steps` GRPO steps."""
    # One intra-op thread: for a model this small, threading costs more than it saves, and on
    # a busy 2-core machine two threads measured 20x slower per step than one.
    torch.set_num_threads(1)
    Env = mcpgym.trl.environment_class(Echo)  # in-process: no transport between trainer and environment
    dataset = mcpgym.trl.dataset(Env, 16, options={"target": TARGET})
    prompt = dataset[0]["prompt"]
    first = Env().reset(**dataset[0])
    assert first is not None
    conversation = transcript(prompt, first)
    tools = tool_schemas(Env)
    probe = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()))  # type: ignore[no-untyped-call]
    probe.chat_template = qwen2_5_chat_template
    corpus = [render(probe, conversation, tools)] * 8
    tokenizer = build_tokenizer(corpus + [json.dumps({"message": w}) for w in ("hi", TARGET)])
    model = build_model(tokenizer, seed)
    warm_up(model, tokenizer, conversation, tools, warmup_steps, prompt_messages=len(prompt))
    args = GRPOConfig(
        output_dir=output_dir or tempfile.mkdtemp(prefix="grpo-echo-"),
        max_steps=steps,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=96,
        max_tool_calling_iterations=Echo.max_steps,
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
    parser.add_argument("--warmup-steps", type=int, default=150, help="supervised warm-up steps (0: none)")
    args = parser.parse_args()
    trainer = build(args.steps, args.warmup_steps)
    trainer.train()
    for entry in trainer.state.log_history:
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in entry.items()})
    mcpgym.trl.close()


if __name__ == "__main__":
    main()
