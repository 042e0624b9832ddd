"""Rewards beyond a scalar: rubrics of named components, trajectory rewards, an LLM judge.

An environment declares `rubric = Rubric({...})`; the server scores every step and, when the
episode ends, the whole trajectory; components travel in each step's `_meta` stamp, `state()`
and recordings (rfcs/0007-rewards.md). `mcpgym rescore` re-scores recordings offline.
"""

from mcpgym.rubrics._core import (
    Component,
    Rubric,
    Step,
    StepRubric,
    TrajectoryRubric,
    Transcript,
    env_reward,
    final,
    progress,
    signal,
    step_rubric,
    trajectory_rubric,
)
from mcpgym.rubrics._judge import LLMJudge, parse_score
from mcpgym.rubrics._returns import discounted_returns, final_only

__all__ = [
    "Component",
    "LLMJudge",
    "Rubric",
    "Step",
    "StepRubric",
    "TrajectoryRubric",
    "Transcript",
    "discounted_returns",
    "env_reward",
    "final",
    "final_only",
    "parse_score",
    "progress",
    "signal",
    "step_rubric",
    "trajectory_rubric",
]
