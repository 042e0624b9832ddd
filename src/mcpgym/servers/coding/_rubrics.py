"""Rubrics for `Coding`: partial credit as a component, and correctness with a length penalty.

Layer: reward definitions over the signals `Coding.submit` reports (never the live sandbox,
so `mcpgym rescore` reproduces them from a recording):

    tests_passed    fraction of the hidden asserts that pass (0/1 without partial credit)
    all_passed      1.0 when every hidden test passes
    code_chars      length of the submitted code
    hack.<name>     1.0 when a reward-hacking check named <name> fired on the submission

How a policy could farm each component, and why it cannot:
- `length` is a penalty only (<= 0): an empty submission scores 0 on it and 0 on the tests,
  so shortness can never outbid correctness.
- `clean` is a gate over every `hack.*` signal: a submission caught gaming the grader earns
  nothing at all, not "tests minus a fine". With no hack checks wired it always passes.
- `tests_passed` counts the server's own asserts (a forged `partial k/M` is refused upstream).
"""

from __future__ import annotations

from mcpgym import rubrics
from mcpgym.rubrics import Rubric, Transcript

HACK_PREFIX = "hack."


def clean(transcript: Transcript) -> float:
    """1.0 unless a `hack.*` signal fired during the episode (the gate's pass/fail)."""
    return 0.0 if any(name.startswith(HACK_PREFIX) and value for name, value in transcript.signals.items()) else 1.0


def length_penalty(budget: int) -> rubrics.TrajectoryRubric:
    """-(chars over `budget`) / budget, floored at -1: long code costs, short code earns nothing."""

    def penalty(transcript: Transcript) -> float:
        chars = float(transcript.signals.get("code_chars", 0))
        return -min(1.0, max(0.0, chars - budget) / budget)

    return rubrics.trajectory_rubric(penalty)


PARTIAL_CREDIT = Rubric(
    {"tests_passed": rubrics.final("tests_passed"), "clean": rubrics.trajectory_rubric(clean)}, gates=["clean"]
)
"""The fraction of hidden asserts passed, as a named component (serve with partial_credit=True)."""

CORRECT_AND_CONCISE = Rubric(
    {
        "tests_passed": rubrics.final("tests_passed"),
        "length": length_penalty(budget=600),
        "clean": rubrics.trajectory_rubric(clean),
    },
    weights={"length": 0.2},
    gates=["clean"],
)
"""Correctness (fraction of hidden asserts) minus up to 0.2 for code far over 600 characters;
zero if a reward-hacking check fired."""
