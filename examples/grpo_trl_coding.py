"""GRPO on mcpgym.servers.coding (HumanEval in a sandbox) with TRL and a real model.

    pip install 'mcpgym[trl]'
    python examples/grpo_trl_coding.py --model Qwen/Qwen3-0.6B --steps 100     # needs the model locally or a hub

Not run in CI: it needs a real instruction-tuned model with a tool-calling chat template TRL
can parse (Qwen2.5/Qwen3, Llama 3.x, ... see trl.chat_template_utils.add_response_schema) and
hours of compute. The recipe is the same as examples/grpo_trl_echo.py:

1. `environment_class(Coding)`: one TRL environment instance per rollout, in-process (pass
   `"python -m mcpgym.servers.coding"` or an `http://.../mcp` URL to put the sandboxes elsewhere).
   Its tools are run_python, write_file, read_file, list_files and submit, with their MCP
   descriptions and schemas; reward is 1.0 when `submit`'s hidden tests pass.
2. A dataset with one row per task: `options={"task_id": ...}` so the G rollouts of a group
   all get the same task, and a `seed` per row.
3. `max_tool_calling_iterations` bounds the turns (the environment truncates at
   `Coding.max_steps` too; a call after that raises, which TRL counts as a failed call).
"""

from __future__ import annotations

import argparse
from typing import Any

from datasets import Dataset  # type: ignore[import-untyped]
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl.trainer.grpo_config import GRPOConfig
from trl.trainer.grpo_trainer import GRPOTrainer

import mcpgym.trl
from mcpgym.servers.coding import Coding, load_tasks


def task_text(observation: Any) -> str:
    """The first observation as the model should read it: instructions, then the prompt as code."""
    return f"{observation['instructions']}\n\n```python\n{observation['prompt']}```"


def environment_and_dataset(held_out: int = 32) -> tuple[type[mcpgym.trl.MCPEnvironment], Dataset]:
    """The TRL environment class for Coding and one dataset row per training task."""
    task_ids = sorted(load_tasks())
    train_ids = task_ids[:-held_out]  # keep the last tasks for evaluation
    Env = mcpgym.trl.environment_class(Coding, observation=task_text)
    dataset = mcpgym.trl.dataset(
        Env,
        seeds=range(len(train_ids)),
        prompt="Solve the coding task below with the tools you have.",
        options=[{"task_id": task_id} for task_id in train_ids],
    )
    return Env, dataset


def build(model_name: str, steps: int, output_dir: str = "grpo-coding") -> GRPOTrainer:
    Env, dataset = environment_and_dataset()
    args = GRPOConfig(
        output_dir=output_dir,
        max_steps=steps,
        per_device_train_batch_size=8,
        num_generations=8,
        max_completion_length=2048,
        max_tool_calling_iterations=12,
        learning_rate=1e-6,
        logging_steps=1,
        report_to="none",
    )
    return GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_name),
        processing_class=AutoTokenizer.from_pretrained(model_name),
        environment_factory=Env,
        train_dataset=dataset.shuffle(seed=0),
        args=args,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="Qwen/Qwen3-0.6B", help="a tool-calling chat model (name or local path)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--output-dir", default="grpo-coding")
    args = parser.parse_args()
    trainer = build(args.model, args.steps, output_dir=args.output_dir)
    trainer.train()
    trainer.save_model()
    mcpgym.trl.close()


if __name__ == "__main__":
    main()
