"""Rubrics: the algebra, a rubric-scored episode's numbers, trajectory scores on finish and on
close, recordings that keep the components, and rescoring that reproduces them exactly."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

import mcpgym
from mcpgym import rubrics
from mcpgym._recording.rescore import load_rubric, rescore, summary
from mcpgym.rubrics import Rubric, Step, Transcript
from tests.envs import GRADED_RUBRIC, Graded

pytestmark = pytest.mark.anyio


def _step(signals: dict[str, Any] | None = None, before: dict[str, Any] | None = None, **kw: Any) -> Step:
    result = types.CallToolResult(content=[types.TextContent(type="text", text=kw.pop("text", "ok"))])
    return Step(
        kw.pop("tool", "t"),
        kw.pop("arguments", {}),
        result,
        kw.pop("reward", 0.0),
        signals or {},
        before or {},
        1,
        False,
        False,
    )


def test_weighted_sum_uses_weights_and_reports_raw_components() -> None:
    rubric = Rubric({"a": rubrics.signal("a"), "b": rubrics.signal("b")}, weights={"b": 0.5})
    total, values = rubric.score_step(_step({"a": 1.0, "b": 4.0}))
    assert (total, values) == (3.0, {"a": 1.0, "b": 4.0})


def test_a_failing_step_gate_zeroes_what_the_step_earned_and_a_gate_earns_nothing_itself() -> None:
    rubric = Rubric({"a": rubrics.signal("a"), "ok": rubrics.signal("ok")}, gates=["ok"])
    assert rubric.score_step(_step({"a": 2.0, "ok": 1.0})) == (2.0, {"a": 2.0, "ok": 1.0})
    assert rubric.score_step(_step({"a": 2.0, "ok": 0.0})) == (0.0, {"a": 2.0, "ok": 0.0})
    # A penalty stands: else failing the gate on purpose would dodge it.
    assert rubric.score_step(_step({"a": -2.0, "ok": 0.0}))[0] == -2.0


@pytest.mark.parametrize(("earned", "expected"), [(2.0, 0.0), (-2.0, -2.0)])
async def test_a_failing_trajectory_gate_caps_the_episode_return_at_zero(earned: float, expected: float) -> None:
    from mcpgym._episode.scoring import EpisodeScore

    rubric = Rubric({"a": rubrics.signal("a"), "safe": rubrics.final("safe")}, gates=["safe"])
    for safe, want in ((1.0, earned), (0.0, expected)):  # the premise: a passing gate changes nothing
        score = EpisodeScore(rubric, None)
        result = types.CallToolResult(content=[])
        score.step("t", {}, result, 0.0, {"a": earned / 2}, 1, False, False)
        score.step("t", {}, result, 0.0, {"a": earned / 2, "safe": safe}, 2, True, False)
        _, values = await score.finish("E", None, True, False)
        assert score.total == want and values["safe"] == safe


def test_progress_pays_only_for_new_progress() -> None:
    rise = rubrics.progress("p")
    assert rise(_step({"p": 0.5}, {"p": 0.2})) == pytest.approx(0.3)
    assert rise(_step({}, {"p": 0.2})) == 0.0  # not reported this step: no change
    assert rise(_step({"p": 0.2}, {"p": 0.5})) == pytest.approx(-0.3)  # going back costs what it earned


def test_rubric_construction_refuses_unknown_names_and_non_rubrics() -> None:
    with pytest.raises(ValueError, match="no component 'c'"):
        Rubric({"a": rubrics.signal("a")}, weights={"c": 1.0})
    with pytest.raises(ValueError, match="no component 'g'"):
        Rubric({"a": rubrics.signal("a")}, gates=["g"])
    with pytest.raises(TypeError, match="StepRubric or TrajectoryRubric"):
        Rubric({"a": lambda s: 1.0})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="finite"):
        Rubric({"a": rubrics.signal("a")}, weights={"a": math.inf})


async def test_trajectory_components_their_gates_and_unscored_values() -> None:
    transcript = Transcript("E", "task", [_step({"x": 0.25}), _step({"x": 0.75})])
    rubric = Rubric(
        {"last": rubrics.final("x"), "count": rubrics.trajectory_rubric(lambda t: len(t.steps))},
        weights={"count": 0.5},
    )
    assert await rubric.score_trajectory(transcript) == (1.75, True, {"last": 0.75, "count": 2.0})
    gated = Rubric({"last": rubrics.final("x"), "safe": rubrics.trajectory_rubric(lambda t: 0.0)}, gates=["safe"])
    assert (await gated.score_trajectory(transcript))[1] is False

    async def unsure(t: Transcript) -> float | None:
        return None

    total, _, values = await Rubric({"judge": rubrics.trajectory_rubric(unsure)}).score_trajectory(transcript)
    assert math.isnan(total) and values == {"judge": None}


def test_returns_helpers_state_their_discount() -> None:
    assert rubrics.discounted_returns([0.0, 0.0, 1.0], 0.5) == [0.25, 0.5, 1.0]
    assert rubrics.discounted_returns([1.0, 1.0], 1.0) == [2.0, 1.0]
    assert rubrics.final_only([0.0, 0.5, 1.0]) == [1.5, 1.5, 1.5]
    with pytest.raises(ValueError, match="gamma"):
        rubrics.discounted_returns([1.0], 1.5)


async def _graded_episode(env: mcpgym.AsyncEnv, calls: list[dict[str, Any]]) -> list[mcpgym.StepResult[Any]]:
    await env.reset(seed=0)
    return [await env.call_tool(str(c.pop("tool", "guess")), c) for c in calls]


async def test_a_rubric_scored_episode_has_the_numbers_the_rubric_says() -> None:
    script = [{"text": "xyz"}, {"text": "o"}, {"tool": "broken"}, {"text": "o"}, {"text": "orbit"}, {"text": "x"}]
    async with mcpgym.connect(Graded) as env:
        steps = await _graded_episode(env, script)
        state = await env.state()
    rewards = [s.reward for s in steps]
    # own 0.25 a guess, brevity -0.01/char at weight 0.5, progress in letters found, gate on errors
    assert rewards == pytest.approx([0.235, 0.445, 0.0, 0.245, 3.025, 0.0])
    assert steps[2].components == {"correct": 0.0, "brevity": -0.0, "well_formed": 0.0, "own": 0.0}
    assert steps[4].components["solved"] == 1.0 and steps[4].terminated and not steps[4].truncated
    assert steps[5].components == {} and steps[5].is_error  # after the end: nothing scored
    assert state.total_reward == pytest.approx(sum(rewards)) and state.components["solved"] == 1.0
    assert state.components["own"] == pytest.approx(1.0) and state.terminated


async def test_an_episode_closed_early_gets_its_trajectory_score_at_close() -> None:
    async with mcpgym.connect(Graded) as env:
        await _graded_episode(env, [{"text": "or"}])
        assert "solved" not in (await env.state()).components  # not scored before the end
        final = await env.close_episode()
    assert final is not None and final.components["solved"] == pytest.approx(0.4)
    assert final.total_reward == pytest.approx(0.25 + 0.4 - 0.01 + 2 * 0.4) and not final.done


async def test_a_rubric_that_raises_leaves_the_step_unscored_never_zero() -> None:
    class Fragile(Graded):
        rubric = Rubric({"boom": rubrics.step_rubric(lambda s: 1 / 0)})

    async with mcpgym.connect(Fragile) as env:
        (step,) = await _graded_episode(env, [{"text": "o"}])
        state = await env.state()
    assert math.isnan(step.reward) and step.components == {"boom": None}
    assert math.isnan(state.total_reward)


async def test_recording_keeps_components_and_rescoring_reproduces_them(tmp_path: Path) -> None:
    server = mcpgym.GymServer(Graded, record=tmp_path)
    live: list[list[mcpgym.StepResult[Any]]] = []
    async with mcpgym.connect(server) as env:
        live.append(await _graded_episode(env, [{"text": "o"}, {"tool": "broken"}, {"text": "orbit"}, {"text": "x"}]))
        live.append(await _graded_episode(env, [{"text": "orb"}]))  # closed early by the next reset
        await env.reset(seed=1)
    recorded = {len(t.steps): t for t in mcpgym.read_recordings(tmp_path) if t.steps}
    # The call after the episode ended ("x") was refused: not a step, so not in the record.
    first, second = recorded[3], recorded[1]
    live[0] = live[0][:3]
    assert [s.components for s in first.steps] == [s.components for s in live[0]]
    assert first.steps[2].terminated and first.steps[0].signals == {"found": 0.2}
    assert first.steps[0].env_reward == 0.25 and first.steps[0].reward == live[0][0].reward
    assert second.closed and second.components["solved"] == pytest.approx(0.6)

    for recording, steps in ((first, live[0]), (second, live[1])):
        again = await rescore(recording, GRADED_RUBRIC)
        assert again.rewards == [s.reward for s in steps]  # exactly, not approximately
        assert again.components == [s.components for s in steps]
        assert again.total == recording.total_reward and again.episode_components == recording.components

    # A rubric with trajectory components only: its steps earn 0, yet the record keeps what the
    # environment itself gave, so another rubric can still read it.
    class Late(Graded):
        rubric = Rubric({"solved": rubrics.final("found")})

    late = mcpgym.GymServer(Late, record=tmp_path / "late")
    async with mcpgym.connect(late) as env:
        steps = await _graded_episode(env, [{"text": "o"}, {"text": "orbit"}])
    assert [s.reward for s in steps] == [0.0, 1.0]
    (recorded_late,) = mcpgym.read_recordings(tmp_path / "late")
    own = Rubric({"own": rubrics.env_reward()})
    assert (await rescore(recorded_late, own)).rewards == [0.25, 0.25]

    # A different rubric scores the same record differently, offline.
    brevity_only = Rubric({"brevity": rubrics.step_rubric(lambda s: -len(str(s.arguments.get("text", ""))))})
    assert (await rescore(first, brevity_only)).rewards == [-1.0, -0.0, -5.0]
    table = summary([await rescore(t, GRADED_RUBRIC) for t in (first, second)])
    assert table["total"]["n"] == 2 and table["solved"]["max"] == 1.0


def test_schema_1_recordings_still_read(tmp_path: Path) -> None:
    old = [
        '{"event": "reset", "episode_id": "e", "environment": "Echo", "seed": 0, "options": null,'
        ' "observation": null, "implicit": false, "time": 1.0}',
        '{"event": "step", "tool": "t", "arguments": {}, "result": {"content": []}, "reward": 1.0, "done": true,'
        ' "truncated": false, "step": 1, "time": 1.0, "duration": 0.1}',
        '{"event": "close", "step_count": 1, "total_reward": 1.0, "done": true, "truncated": false, "time": 2.0}',
    ]
    (tmp_path / "e.jsonl").write_text("\n".join(old) + "\n")
    (recording,) = mcpgym.read_recordings(tmp_path)
    assert recording.steps[0].terminated and recording.steps[0].components == {}
    assert recording.total_reward == 1.0 and recording.steps[0].own_reward == 1.0


def test_rescore_loads_a_rubric_an_environment_class_or_a_factory() -> None:
    assert load_rubric("tests.envs:GRADED_RUBRIC") is GRADED_RUBRIC
    assert load_rubric("tests.envs:Graded") is GRADED_RUBRIC
    with pytest.raises(TypeError, match=r"not a mcpgym\.rubrics\.Rubric"):
        load_rubric("tests.envs:CLOSED")


def test_rescore_command_writes_scores_and_a_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from mcpgym._cli.main import main

    async def record() -> list[mcpgym.StepResult[Any]]:
        async with mcpgym.connect(mcpgym.GymServer(Graded, record=tmp_path / "runs")) as env:
            return await _graded_episode(env, [{"text": "orbit"}])

    live = anyio.run(record)
    out = tmp_path / "scores.jsonl"
    with pytest.raises(SystemExit) as exit_:
        main(["rescore", str(tmp_path / "runs"), "--rubric", "tests.envs:Graded", "--out", str(out)])
    assert exit_.value.code == 0
    (line,) = out.read_text().splitlines()
    assert json.loads(line)["rewards"] == [live[0].reward]
    captured = capsys.readouterr()
    assert json.loads(captured.out)["solved"]["mean"] == 1.0 and "rescored 1/1 episodes" in captured.err


async def test_harness_trajectories_carry_components_and_the_score_made_at_close() -> None:
    from mcpgym import harness
    from mcpgym.harness.policy import tool_call

    async def guess_then_stop(messages: list[harness.Message], tools: list[harness.ChatTool]) -> harness.AssistantTurn:
        if any(m["role"] == "tool" for m in messages):
            return harness.AssistantTurn(content="done")  # stops before the episode ends
        return harness.AssistantTurn(content=None, tool_calls=[tool_call("c0", "guess", {"text": "or"})])

    async with mcpgym.connect(mcpgym.GymServer(Graded)) as env:
        trajectory = await harness.run_episode(env, guess_then_stop, seed=0)
    (step,) = trajectory.turns[0].steps
    assert step.components == {"correct": 0.4, "brevity": -0.02, "well_formed": 1.0, "own": 0.25}
    assert trajectory.stop == "no_tool_calls" and not trajectory.done
    assert trajectory.components["solved"] == pytest.approx(0.4)  # scored when the harness closed it
    assert trajectory.reward == pytest.approx(step.reward + 0.8)


def test_a_rubric_that_is_not_one_fails_where_it_is_written() -> None:
    with pytest.raises(TypeError, match=r"Wrong\.rubric must be an mcpgym\.rubrics\.Rubric"):

        class Wrong(Graded):
            rubric = "correct"  # type: ignore[assignment]

    assert mcpgym.check_environment(Graded, raise_on_error=False) == []


async def test_a_constructor_rubric_that_is_not_one_fails_the_reset_clearly() -> None:
    import functools

    class Configurable(Graded):
        def __init__(self, rubric: object) -> None:
            self.rubric = rubric  # type: ignore[assignment]

    async with mcpgym.connect(functools.partial(Configurable, "nope")) as env:
        with pytest.raises(mcpgym.MCPError, match=r"is not an mcpgym\.rubrics\.Rubric"):
            await env.reset()
