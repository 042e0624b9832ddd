"""`mcpgym eval` (#27): pass@k checked against brute force, the report's fields from a real run
against the scripted chat-completions endpoint, the success rule, and `--compare`."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import random
import sys
from collections.abc import AsyncIterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import anyio
import pytest

import mcpgym
from mcpgym import harness, rubrics
from mcpgym.harness import _scripted, compare, report, stats
from mcpgym.harness.evaluation import EvalError, evaluate
from mcpgym.harness.types import Trajectory
from tests.conftest import serve_app

pytestmark = pytest.mark.anyio

FAST = harness.Backoff(attempts=4, base=0.001, cap=0.01)


def brute_force_pass_at_k(n: int, c: int, k: int) -> Fraction:
    """The share of all k-subsets of n samples (c of them successes) holding a success."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(samples[i] for i in chosen) for chosen in subsets), len(subsets))


def test_pass_at_k_equals_the_brute_force_count_over_every_subset() -> None:
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert stats.pass_at_k(n, c, k) == pytest.approx(float(brute_force_pass_at_k(n, c, k)), abs=1e-12)
    assert stats.pass_at_k(200, 3, 100) == pytest.approx(1 - (100 * 99 * 98) / (200 * 199 * 198))  # no overflow
    with pytest.raises(ValueError):
        stats.pass_at_k(3, 1, 4)


def test_the_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    rng = random.Random(1)
    values = [rng.random() for _ in range(30)]
    first = stats.bootstrap_interval(values, random.Random(7))
    assert first == stats.bootstrap_interval(values, random.Random(7))
    assert first[0] < stats.mean(values) < first[1]
    assert stats.bootstrap_interval([0.5] * 5, random.Random(0)) == (0.5, 0.5)
    assert all(math.isnan(x) for x in stats.bootstrap_interval([], random.Random(0)))


@contextlib.asynccontextmanager
async def scripted() -> AsyncIterator[str]:
    endpoint = _scripted.ScriptedEndpoint()
    async with serve_app(endpoint.app()) as base:
        try:
            yield f"{base}/v1"
        finally:
            endpoint.release.set()


async def _cli(*argv: str) -> tuple[int, str, str]:
    done = await anyio.run_process([sys.executable, "-m", "mcpgym", *argv], check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_the_cli_writes_a_report_with_every_field(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    async with scripted() as base:
        code, _, err = await _cli(
            "eval", "echo", "--model", "echo-alternate", "--base-url", base, "--episodes", "3", "--samples", "3",
            "--concurrency", "1", "--seed", "5", "--temperature", "0.7", "--out", str(out),
        )  # fmt: skip
        assert code == 0, err
        assert "rollout 9/9" in err  # progress, as rollouts have
        again, _, refused = await _cli("eval", "echo", "--model", "m", "--base-url", base, "--out", str(out))
    assert again != 0 and "already holds an evaluation" in refused  # runs are never mixed

    data = json.loads((out / "report.json").read_text())
    # One episode at a time: conversations 2, 4, 6, 8 say the word. Task 0 plays 1-3, task 1 4-6, task 2 7-9.
    assert [(t["id"], t["samples"], t["successes"]) for t in data["tasks"]] == [
        ("seed/5", 3, 1),
        ("seed/6", 3, 2),
        ("seed/7", 3, 1),
    ]
    assert [p["k"] for p in data["pass_at_k"]] == [1, 2, 3]
    assert [p["value"] for p in data["pass_at_k"]] == pytest.approx([4 / 9, 7 / 9, 1.0])
    assert data["reward"]["value"] == pytest.approx(4 / 9)
    assert data["reward"]["low"] <= data["reward"]["value"] <= data["reward"]["high"]
    assert data["success"] == {"kind": "threshold", "threshold": 1.0, "source": "environment max_reward"}
    run = data["run"]
    assert (run["model"], run["base_url"], run["seed"], run["samples"]) == ("echo-alternate", base, 5, 3)
    assert run["sampling"] == {"temperature": 0.7} and run["tasks"] == ["seed/5", "seed/6", "seed/7"]
    assert data["failures"]["episodes"] == 0 and data["failures"]["stops"] == {"no_tool_calls": 5, "done": 4}
    assert data["usage"]["total_tokens"] > 0 and data["timing"]["wall_seconds"] > 0
    assert len(harness.read_rollout(out / "trajectories.jsonl")) == 9  # what `mcpgym view` shows
    text = (out / "report.md").read_text()
    assert "| pass@2 (3 tasks) | 0.778 |" in text and "| seed/6 | 3 | 2 | 0 | 0.667 | 0.667 |" in text


async def test_a_catalog_is_evaluated_by_task_id_and_unknown_ids_are_refused(tmp_path: Path) -> None:
    async with scripted() as base, harness.OpenAIPolicy(base, "solve", backoff=FAST) as policy:
        result = await evaluate(
            "coding", policy, task_ids=["HumanEval/3", "HumanEval/7"], samples=2, concurrency=2, out=tmp_path / "e"
        )
        with pytest.raises(EvalError, match="unknown task ids: HumanEval/9999"):
            await evaluate("coding", policy, task_ids=["HumanEval/9999"])
    assert [(t.id, t.successes, t.samples) for t in result.tasks] == [("HumanEval/3", 2, 2), ("HumanEval/7", 2, 2)]
    assert result.pass_at_k[0].value == 1.0 and result.pass_at_k[1].value == 1.0


class Rubricked(mcpgym.Environment):
    """Declares its own success: a `success` rubric component, 1 only for the word "yes"."""

    max_reward = 10.0
    rubric = rubrics.Rubric(
        {"points": rubrics.signal("points"), "success": rubrics.signal("success")}, weights={"success": 0.0}
    )

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        return "say yes"

    @mcpgym.tool
    async def say(self, word: str) -> str:
        """Say a word."""
        self.signal("points", 5.0 if word == "yes" else 7.0)  # the reward alone would favour "no"
        self.signal("success", float(word == "yes"))
        self.finish()
        return word


async def test_an_environment_declared_success_component_decides_success() -> None:
    def says(word: str) -> harness.Policy:
        async def policy(messages: list[Any], tools: list[Any]) -> harness.AssistantTurn:
            if any(m["role"] == "assistant" for m in messages):
                return harness.AssistantTurn(content="done")
            call = harness.ToolCall(id="c", name="say", arguments_json="{}", arguments={"word": word})
            return harness.AssistantTurn(tool_calls=[call])

        return policy

    yes = await evaluate(Rubricked, says("yes"), episodes=2, samples=2)
    no = await evaluate(Rubricked, says("no"), episodes=2, samples=2)
    assert yes.success.kind == "component" and yes.pass_at_k[0].value == 1.0
    assert no.pass_at_k[0].value == 0.0 and no.reward.value > yes.reward.value
    assert yes.components == {"points": 5.0, "success": 1.0}


def _played(index: int, reward: float, **fields: Any) -> Trajectory:
    return Trajectory(index=index, reward=reward, status="ok", stop="done", **fields)


def test_the_success_rule_prefers_a_success_component_and_leaves_failures_out() -> None:
    component = report.SuccessRule(kind="component", source="success component")
    assert component.succeeded(_played(0, 0.0, components={"success": 1.0}))
    assert not component.succeeded(_played(0, 99.0, components={"success": 0.0}))  # a high reward is not success
    threshold = report.SuccessRule(kind="threshold", threshold=1.0, source="environment max_reward")
    assert not threshold.succeeded(_played(0, math.nan))
    run = report.RunConfig(target="t", model="m", base_url="u", seed=0, samples=2, tasks=["a"], max_turns=1)
    failed = Trajectory(index=1, status="failed", error="TimeoutError: the episode outlived its timeout")
    built = report.build(run, threshold, [("a", None, {})], [_played(0, 1.0), failed], 1.0)
    assert (built.tasks[0].samples, built.tasks[0].successes, built.tasks[0].failed) == (1, 1, 1)
    assert built.failures.by_kind == {"TimeoutError": 1}
    assert [p.tasks for p in built.pass_at_k] == [1, 0]  # a task with 1 scored sample has no pass@2


def _report(rewards: dict[str, list[float]]) -> report.Report:
    run = report.RunConfig(target="t", model="m", base_url="u", seed=0, samples=4, tasks=list(rewards), max_turns=1)
    rule = report.SuccessRule(kind="threshold", threshold=1.0, source="--threshold")
    played = [_played(i * 4 + j, r) for i, values in enumerate(rewards.values()) for j, r in enumerate(values)]
    return report.build(run, rule, [(t, None, {}) for t in rewards], played, 1.0)


async def test_compare_pairs_tasks_and_says_whether_the_interval_excludes_zero(tmp_path: Path) -> None:
    tasks = [f"t{i}" for i in range(12)]
    base = _report({t: [0.0, 0.0, 1.0, 0.0] for t in tasks})
    better = _report({t: [1.0, 1.0, 1.0, 0.0] for t in tasks})
    result = compare.compare(base, better)
    assert result.common_tasks == 12 and result.reward.mean == pytest.approx(0.5)
    assert result.reward.low > 0 and result.reward.verdict == "B is better" and result.reward.wins == 12
    same = compare.compare(base, base)
    assert same.reward.verdict.startswith("no difference")

    for name, value in (("a", base), ("b", better)):
        report.write(value, tmp_path / name)
    code, out, err = await _cli(
        "eval", "--compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "c")
    )
    assert code == 0, err
    assert "| mean reward | +0.500 |" in out and "B is better" in out
    assert json.loads((tmp_path / "c" / "compare.json").read_text())["common_tasks"] == 12
