"""A real GRPO run against servers.echo: tiny local model, rewards from the environment.

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
pytest.importorskip("trl")

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
