"""Rewards beyond a scalar: rubrics of named components, trajectory rewards, an LLM judge.

An environment declares `rubric = Rubric({...})`; the server scores every step and, when the
episode ends, the whole trajectory; components travel in each step's `_meta` stamp, `state()`
and recordings (rfcs/0007-rewards.md). `mcpgym rescore` re-scores recordings offline.
"""

import typing as _typing

from mcpgym._core.deprecated import deprecated_names as _module_names
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
from mcpgym.rubrics._returns import discounted_returns, final_only

if _typing.TYPE_CHECKING:
    from mcpgym.rubrics._judge import LLMJudge, parse_score
else:  # the judge (and its HTTP client) loads when it is first named: most environments never use it
    __getattr__ = _module_names(
        __name__, {}, lazy={"LLMJudge": "mcpgym.rubrics._judge", "parse_score": "mcpgym.rubrics._judge"}
    )

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
