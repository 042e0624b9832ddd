"""mcpgym.trl with rubrics: `get_reward()` closes the episode so a trajectory rubric scores it,
an unscorable episode is None (never 0), and components reach TRL as reward functions."""

from __future__ import annotations

import math
from typing import Any

import pytest

import mcpgym.trl
from mcpgym import rubrics
from tests.envs import Graded


class Unjudgeable(Graded):
    """Graded, whose only component is a trajectory rubric that cannot score (a failed judge)."""

    rubric = rubrics.Rubric({"judge": rubrics.trajectory_rubric(lambda transcript: None)})


def _episode(cls: type[Any], *guesses: str) -> Any:
    env: Any = mcpgym.trl.environment_class(cls)()
    env.reset(seed=0)
    for text in guesses:
        env.guess(text=text)
    return env


def test_get_reward_includes_the_trajectory_score_of_an_episode_the_model_stopped() -> None:
    env = _episode(Graded, "or")  # never finished: the model simply stopped calling tools
    step_return = env.episode_return
    assert step_return == pytest.approx(0.25 + 0.4 - 0.01) and "solved" not in env.components
    assert env.get_reward() == pytest.approx(step_return + 2 * 0.4)  # closing scored the trajectory
    assert env.components["solved"] == pytest.approx(0.4) and not env.terminated
    assert env.get_reward() == pytest.approx(step_return + 2 * 0.4)  # asked again: the same, no second close


def test_get_reward_of_a_finished_episode_is_its_return_with_the_final_step() -> None:
    env = _episode(Graded, "o", "orbit")
    assert env.terminated and env.components["solved"] == 1.0
    assert env.get_reward() == pytest.approx(env.episode_return) == pytest.approx(0.445 + 3.025)


def test_an_unscorable_trajectory_is_none_for_trl_never_zero() -> None:
    env = _episode(Unjudgeable, "o")
    assert env.get_reward() is None and env.components == {"judge": None}
    finished = _episode(Unjudgeable, "orbit")
    assert math.isnan(finished.episode_return) and finished.get_reward() is None


class PartlyJudged(Graded):
    """A scored step component beside a judge that fails."""

    rubric = rubrics.Rubric({"own": rubrics.env_reward(), "judge": rubrics.trajectory_rubric(lambda transcript: None)})


def test_component_columns_are_none_too_when_the_episode_is_unscored() -> None:
    # TRL leaves a completion unscored only if every reward column is None: a weight-0 "own"
    # column saying 0.25 would make the failed judge's episode a scored 0.
    (own, judge) = mcpgym.trl.component_rewards(PartlyJudged)
    env = _episode(PartlyJudged, "o")
    assert env.components["own"] == 0.25  # the premise: the component itself did score
    assert own(environments=[env]) == [None] and judge(environments=[env]) == [None]
    assert env.get_reward() is None


@pytest.mark.trl  # imports trl, to name the columns exactly as the trainer does
def test_component_rewards_are_named_reward_functions_over_the_rollouts() -> None:
    import pickle

    from trl.trainer.utils import get_callable_name  # how TRL names a reward column

    funcs = mcpgym.trl.component_rewards(mcpgym.trl.environment_class(Graded))
    assert [get_callable_name(f) for f in funcs] == ["correct", "brevity", "well_formed", "own", "solved"]
    assert pickle.loads(pickle.dumps(funcs[0])).__name__ == "correct"
    envs = [_episode(Graded, "or"), _episode(Graded, "orbit")]
    solved = funcs[-1](environments=envs, prompts=["p", "p"])
    assert solved == [pytest.approx(0.4), 1.0]
    assert [e.get_reward() for e in envs] == [pytest.approx(1.44), pytest.approx(3.225)]
