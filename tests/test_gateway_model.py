"""The gateway in front of a model that really generates: the GRPO examples' random-initialised
Qwen2 and byte-level tokenizer behind a small OpenAI-compatible server returning vLLM's token
fields (tests/gateway_engines.py). The recorded ids are the model's own: they decode to the text
the client saw, the prompt ids are the chat template's, and the merge follows the tokens exactly
(one sequence when re-tokenising history reproduces them, a branch where it does not). Then
`mcpgym.trl.rollout_func` feeds GRPOTrainer through a gateway it starts itself.

Needs the `mcpgym[trl]` extra (torch, transformers, trl), hence the `trl` marker.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import httpx2
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

import mcpgym
import mcpgym.trl
from mcpgym.gateway import Gateway, GatewayConfig, merge, read_calls
from mcpgym.servers.echo import Echo
from tests.conftest import serve_app
from tests.gateway_engines import ModelEngine

pytestmark = [
    pytest.mark.trl,
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"),
]


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    recipe = importlib.import_module("examples.grpo_trl_echo")
    torch.set_num_threads(1)
    corpus = ["Say the word 'apple' using echo_message. You are an agent acting in an environment."] * 4
    tokenizer = recipe.build_tokenizer(corpus)
    return tokenizer, recipe.build_model(tokenizer, seed=0)


@contextlib.contextmanager
def engine_in_thread(engine: ModelEngine) -> Iterator[str]:
    """The engine on loopback from a thread of its own (a trainer's main thread blocks on it)."""
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(serve_app(engine.app())) as url,
    ):
        yield url


@pytest.mark.anyio
async def test_recorded_ids_are_the_models_and_the_merge_follows_them(tiny: tuple[Any, Any], tmp_path: Path) -> None:
    tokenizer, model = tiny
    engine = ModelEngine(tokenizer, model, max_new_tokens=12)
    async with serve_app(engine.app()) as upstream:
        app = Gateway(GatewayConfig(upstream=upstream + "/v1", record=tmp_path)).app()
        async with serve_app(app) as url, httpx2.AsyncClient(base_url=url, timeout=60) as client:
            messages: list[dict[str, Any]] = [{"role": "user", "content": "Say the word 'apple'."}]
            replies = []
            for turn in range(2):
                response = await client.post("/episodes/real/v1/chat/completions", json={"messages": messages})
                assert response.status_code == 200, response.text
                reply = response.json()
                assert "prompt_token_ids" not in reply and "token_ids" not in reply["choices"][0]
                replies.append(reply["choices"][0]["message"])
                messages += [replies[-1], {"role": "user", "content": f"again {turn}"}]
    calls = read_calls(tmp_path)["real"]
    for call, seen in zip(calls, replies, strict=True):
        ids = call.choices[0].completion_token_ids
        assert ids and tokenizer.decode(ids, skip_special_tokens=True) == seen["content"]
        assert call.choices[0].logprobs and all(lp is not None and lp <= 0 for lp in call.choices[0].logprobs)
        rendered = tokenizer.apply_chat_template(call.messages, add_generation_prompt=True, tokenize=False)
        assert call.prompt_token_ids == tokenizer(rendered, add_special_tokens=False)["input_ids"]
    first, second = calls
    assert first.prompt_token_ids is not None and second.prompt_token_ids is not None
    produced = first.prompt_token_ids + (first.choices[0].completion_token_ids or [])
    sequences = merge(calls)
    if second.prompt_token_ids[: len(produced)] == produced:  # re-rendering history gave the model's tokens back
        [sequence] = sequences
        assert sequence.token_ids[: len(produced)] == produced and sequence.turns == [0, 1]
    else:  # it did not (a random model's text re-tokenises differently): the merge says so
        assert len(sequences) == 2 and sequences[1].parent == 0 and sequences[1].diverged_at is not None
        assert sequences[1].diverged_at < len(produced)
    for sequence in sequences:  # either way every model token is one the engine sampled, with its logprob
        sampled = {i for c in calls for i in (c.choices[0].completion_token_ids or [])}
        assert {t for t, m in zip(sequence.token_ids, sequence.mask, strict=True) if m} <= sampled
        assert all((lp is not None) == bool(m) for lp, m in zip(sequence.logprobs, sequence.mask, strict=True))


def length_bonus(completion_ids: list[list[int]], **_: Any) -> list[float | None]:
    return [len(ids) / 10 for ids in completion_ids]


def test_rollout_func_trains_grpo_on_the_gateways_tokens(
    tiny: tuple[Any, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datasets import Dataset  # type: ignore[import-untyped]
    from trl.trainer.grpo_config import GRPOConfig
    from trl.trainer.grpo_trainer import GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer, model = tiny
    engine = ModelEngine(tokenizer, model, max_new_tokens=8)
    seen: list[dict[str, list[Any]]] = []
    with engine_in_thread(engine) as upstream:
        play = mcpgym.trl.rollout_func(Echo, max_turns=2, record=str(tmp_path))

        def rollout(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
            seen.append(play(prompts, trainer))
            return seen[-1]

        args = GRPOConfig(
            output_dir=str(tmp_path / "out"),
            max_steps=1,
            per_device_train_batch_size=4,
            num_generations=4,
            max_completion_length=8,
            learning_rate=1e-3,
            logging_steps=1,
            use_cpu=True,
            bf16=False,
            activation_checkpointing=False,
            report_to="none",
            save_strategy="no",
            seed=0,
            dataloader_num_workers=0,
            disable_tqdm=True,
            vllm_server_base_url=upstream,  # the "trainer's vLLM server": rollout_func fronts it with a gateway
        )
        dataset = Dataset.from_dict({"prompt": ["say apple", "say river"] * 4})
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            # A random model earns no episode reward; a length bonus gives the group a spread to learn from.
            reward_funcs=[mcpgym.trl.episode_return, length_bonus],
            rollout_func=rollout,
            train_dataset=dataset,
            args=args,
        )
        assert trainer.model is not None
        before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
        trainer.train()
    [batch] = seen
    assert len(batch["prompt_ids"]) == 4 and set(batch) >= {"prompt_ids", "completion_ids", "logprobs", "env_mask"}
    for ids, mask, logprobs in zip(batch["completion_ids"], batch["env_mask"], batch["logprobs"], strict=True):
        assert len(ids) == len(mask) == len(logprobs) and sum(mask) > 0
    traces = mcpgym.read_traces(tmp_path)
    assert len(traces) == 4 and all(t.tokens for t in traces)
    first = traces[0].tokens[-1]
    assert any(first.token_ids[: first.prompt_length] == p for p in batch["prompt_ids"])
    assert any(not p.detach().equal(before[name]) for name, p in trainer.model.named_parameters())
    [step] = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert step["rewards/episode_return/mean"] == 0.0 and "rewards/length_bonus/mean" in step
