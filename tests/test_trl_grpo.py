"""A real GRPO run against mcpgym.servers.echo: tiny local model, rewards from the environment.

Slow-ish (about 20 s on 2 cores: mostly importing torch/trl and the warm-up) and needs the
`mcpgym[trl]` extra, hence the `trl` marker. Drives `examples/grpo_trl_echo.py`, so the
example is tested too. Nothing is downloaded (HF_HUB_OFFLINE=1; model and tokenizer are
built in memory).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import trl  # noqa: F401 - not importorskip: a missing extra fails the suite (see tests/test_suite.py)

import mcpgym.trl

pytestmark = [
    pytest.mark.trl,
    pytest.mark.timeout(600),
    # transformers 5.24 deprecates `is_gradient_checkpointing`, which TRL 1.16's GRPOTrainer
    # still calls every step (we pass activation_checkpointing=False; the call remains).
    pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"),
]


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory's "experimental" UserWarning
    yield importlib.import_module("examples.grpo_trl_echo")
    mcpgym.trl.close()


def test_grpo_trains_against_echo_with_rewards_from_the_environment(example: Any, tmp_path: Path) -> None:
    trainer = example.build(steps=2, warmup_steps=150, output_dir=str(tmp_path))
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()

    steps = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(steps) == 2
    assert trainer.reward_func_names == ["EchoEnv"]  # get_reward() is the only reward source
    for entry in steps:
        assert entry["tools/call_frequency"] > 0
        assert entry["rewards/EchoEnv/mean"] > 0
    # The last batch's environments are still there: their returns are what was logged.
    returns = [env.get_reward() for env in trainer.environments]
    assert sum(returns) / len(returns) == pytest.approx(steps[-1]["rewards/EchoEnv/mean"])
    assert all(env.done for env, r in zip(trainer.environments, returns, strict=True) if r == 1.0)
    changed = [name for name, p in trainer.model.named_parameters() if not p.detach().equal(before[name])]
    assert len(changed) == len(before)


def test_the_coding_recipe_up_to_the_model() -> None:
    """examples/grpo_trl_coding.py without its model: one task's rollout as TRL would drive it."""
    recipe = importlib.import_module("examples.grpo_trl_coding")
    from mcpgym.servers.coding import load_tasks

    Env, dataset = recipe.environment_and_dataset()
    row = dataset[0]
    task = load_tasks()[row["options"]["task_id"]]
    assert set(dataset.column_names) == {"prompt", "seed", "options"}
    env = Env()
    first = env.reset(**row)
    assert first is not None and first.startswith("\n\nImplement `") and task.prompt in first
    assert env.get_reward() == 0.0
    env.submit(code=task.prompt + (task.canonical_solution or ""))
    assert (env.get_reward(), env.done) == (1.0, True)
    with pytest.raises(mcpgym.trl.EpisodeOverError):
        env.run_python(code="1")
    env._close()


def test_grpo_trains_against_blackjack(tmp_path: Path) -> None:
    """examples/grpo_trl_blackjack.py: rewards are the games' +1 / 0 / -1, from the environment."""
    recipe = importlib.import_module("examples.grpo_trl_blackjack")
    try:
        trainer = recipe.build(steps=2, output_dir=str(tmp_path))
        before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
        trainer.train()
        steps = [entry for entry in trainer.state.log_history if "loss" in entry]
        assert len(steps) == 2 and trainer.reward_func_names == ["BlackjackEnv"]
        assert all(entry["tools/call_frequency"] > 0 for entry in steps)
        returns = [env.get_reward() for env in trainer.environments]
        assert set(returns) <= {-1.0, 0.0, 1.0} and any(env.done for env in trainer.environments)
        assert sum(returns) / len(returns) == pytest.approx(steps[-1]["rewards/BlackjackEnv/mean"])
        changed = [name for name, p in trainer.model.named_parameters() if not p.detach().equal(before[name])]
        assert len(changed) == len(before)
    finally:
        mcpgym.trl.close()
