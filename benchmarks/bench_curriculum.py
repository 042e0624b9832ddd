"""Curriculum benchmark (#27): how many GRPO groups carry a gradient under uniform and
learnability task sampling, for a simulated population of policies (benchmarks/README.md).

    python -m benchmarks.bench_curriculum                 # a few seconds
    python -m benchmarks.bench_curriculum --policies 16 --rollouts 40000 --seed 3

The simulation (every number from one `random.Random(seed)`, so a run repeats exactly):

- A catalog of `--tasks` tasks. A policy is a success probability per task: `sigmoid(skill +
  difficulty)`, where each task's difficulty is drawn from a mixture chosen to look like what
  an OpenEnv study of uniform sampling found (~80% of groups with zero reward variance): 50% of
  tasks far too hard (logit around -6), 30% already solved (around +6), 20% in reach (-2..+2).
  Each policy of the population gets its own skill offset (N(0, 1)), so tasks sit differently
  for each.
- Two scenarios, in the same run: a *static* population (the probabilities never change) and a
  *learning* one, where a group that carries a gradient (rewards not all equal) raises that
  task's logit by `--learning-rate` (0.05: about 120 useful groups take a task from p = 0.05 to
  p = 0.95), so tasks drift from "in reach" to "solved" and a sampler must track a moving
  target (learnability's `decay`). Learning on a task moves only that task: no transfer.
- Each policy is trained twice from the same start, once per sampler: the real
  `mcpgym._episode.sampler` classes, fed every episode's outcome as the server feeds them. One
  draw is one group of `--group` episodes of the drawn task (a GRPO group: one task, one seed).

Reported per sampler, over the population: the fraction of groups with zero reward variance,
useful (non-zero-variance) groups per 1,000 rollouts, and the mean success probability over
tasks at the end. Target: learnability's zero-variance fraction below half of uniform's.
"""

from __future__ import annotations

import argparse
import math
import random
from dataclasses import dataclass

from mcpgym._episode.catalog import Task
from mcpgym._episode.sampler import Learnability, Sampler, SamplerConfig, SamplerKind

SHARES = ((0.5, -6.0, 1.0), (0.3, 6.0, 1.0), (0.2, 0.0, 1.2))
"""(share of tasks, mean logit, spread): too hard, already solved, in reach."""


@dataclass
class Outcome:
    groups: int = 0
    zero_variance: int = 0
    rollouts: int = 0
    final_success: float = 0.0


def difficulties(rng: random.Random, count: int) -> list[float]:
    found = []
    for _ in range(count):
        pick, total = rng.random(), 0.0
        for share, centre, spread in SHARES:
            total += share
            if pick <= total:
                found.append(rng.gauss(centre, spread))
                break
        else:
            found.append(rng.gauss(SHARES[-1][1], SHARES[-1][2]))
    return found


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def train(sampler: Sampler, logits: list[float], rollouts: int, group: int, rate: float, rng: random.Random) -> Outcome:
    outcome = Outcome()
    index = {task.id: i for i, task in enumerate(sampler.tasks)}
    while outcome.rollouts + group <= rollouts:
        task = sampler.draw()
        i = index[task.id]
        p = sigmoid(logits[i])
        rewards = [rng.random() < p for _ in range(group)]
        for success in rewards:
            sampler.observe(task.id, success)
        outcome.groups += 1
        outcome.rollouts += group
        if all(rewards) or not any(rewards):
            outcome.zero_variance += 1
        else:
            logits[i] += rate  # a gradient: the policy gets better at what it practised
    outcome.final_success = sum(sigmoid(x) for x in logits) / len(logits)
    return outcome


def run(args: argparse.Namespace, learning_rate: float) -> dict[str, Outcome]:
    rng = random.Random(args.seed)
    tasks = [Task(id=f"task/{i}", prompt="", seed=i) for i in range(args.tasks)]
    base = difficulties(rng, args.tasks)
    totals = {"uniform": Outcome(), "learnability": Outcome()}
    for policy in range(args.policies):
        skill = rng.gauss(0.0, 1.0)
        start = [d + skill for d in base]
        samplers: tuple[tuple[SamplerKind, type[Sampler]], ...] = (("uniform", Sampler), ("learnability", Learnability))
        for kind, cls in samplers:
            config = SamplerConfig(sampler=kind, explore=args.explore, decay=args.decay, seed=args.seed * 1000 + policy)
            played = train(cls(tasks, config), list(start), args.rollouts, args.group, learning_rate, rng)
            total = totals[kind]
            total.groups += played.groups
            total.zero_variance += played.zero_variance
            total.rollouts += played.rollouts
            total.final_success += played.final_success / args.policies
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--policies", type=int, default=8, help="the population's size")
    parser.add_argument("--rollouts", type=int, default=20_000, help="rollouts per policy and sampler")
    parser.add_argument("--group", type=int, default=8, help="samples per GRPO group")
    parser.add_argument("--learning-rate", type=float, default=0.05, help="logit gained per useful group")
    parser.add_argument("--explore", type=float, default=SamplerConfig().explore)
    parser.add_argument("--decay", type=float, default=SamplerConfig().decay)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(
        f"{args.policies} policies x {args.tasks} tasks, {args.rollouts:,} rollouts per policy and sampler, "
        f"groups of {args.group}, explore {args.explore}, decay {args.decay}, seed {args.seed}\n"
    )
    print("| population | sampler | zero-variance groups | useful groups / 1,000 rollouts | mean success at the end |")
    print("|---|---|---|---|---|")
    ratios = {}
    for scenario, rate in (("static", 0.0), (f"learning ({args.learning_rate:g})", args.learning_rate)):
        fractions = {}
        for kind, total in run(args, rate).items():
            fractions[kind] = total.zero_variance / total.groups
            useful = (total.groups - total.zero_variance) / (total.rollouts / 1000)
            print(f"| {scenario} | {kind} | {fractions[kind]:.1%} | {useful:.1f} | {total.final_success:.3f} |")
        ratios[scenario] = fractions["learnability"] / fractions["uniform"]
    print()
    for scenario, ratio in ratios.items():
        verdict = "PASS" if ratio < 0.5 else "FAIL"
        print(f"{scenario}: learnability / uniform zero-variance fraction {ratio:.2f} (target < 0.5): {verdict}")


if __name__ == "__main__":
    main()
