"""`mcpgym eval`: evaluate a model on an environment's tasks, or compare two evaluations.

Layer: top (one of the harness's commands, registered through `harness.cli`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anyio

from mcpgym._cli.options import add_client_options, client_headers
from mcpgym.harness import compare, report
from mcpgym.harness.evaluation import evaluate
from mcpgym.harness.openai import API_KEY_ENV, OpenAIPolicy
from mcpgym.harness.retry import Backoff
from mcpgym.harness.rollout import SYSTEM_PROMPT

NAME = "eval"

_EPILOG = """\
The report (DIR/report.json, DIR/report.md) has pass@k for k = 1..K (the unbiased estimator
per task), the mean reward with a 95% bootstrap interval, per-component means, a per-task
table, failures by kind, tokens and wall time, and the exact run. An episode succeeds when
its reward reaches the environment's max_reward (or --threshold), or when the environment's
rubric reports a `success` component > 0. See docs/evaluation.md.

examples:
  mcpgym eval coding --model Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1 --samples 4 --out evals/qwen
  mcpgym eval blackjack --model M --base-url U --episodes 50 --samples 8 --temperature 1.0 --out evals/m
  mcpgym eval --compare evals/base evals/new           # paired per-task differences, B - A
"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="evaluate a model on TARGET's tasks (pass@k, intervals) or --compare two evaluations",
        description="Play K samples of each task with the model behind --base-url and write a report.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="TARGET", nargs="?", help="the environment (any target form, e.g. coding)")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two evaluations (their DIRs or report.json)")
    p.add_argument("--model", help="model name sent to the endpoint")
    p.add_argument("--base-url", help="chat-completions base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--api-key", default=None, help=f"bearer token (default: ${API_KEY_ENV})")
    p.add_argument("--tasks", nargs="+", metavar="ID", help="task ids from the catalog (default: the first --episodes)")
    p.add_argument(
        "--episodes", type=int, default=None, help="tasks to evaluate (default: the whole catalog, or 10 seeds)"
    )
    p.add_argument("--samples", type=int, default=1, help="samples per task, K of pass@1..K (%(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seeds catalog-less tasks and the bootstrap (%(default)s)")
    p.add_argument("--threshold", type=float, default=None, help="success: reward >= this (default: the env's max)")
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--max-tokens", type=int, default=None, help="completion tokens per model reply")
    p.add_argument("--max-turns", type=int, default=20, help="model replies per episode (%(default)s)")
    p.add_argument("--concurrency", type=int, default=8, help="episodes played at once (%(default)s)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for one model reply (%(default)s)")
    p.add_argument("--episode-timeout", type=float, default=None, help="seconds one episode may take in all")
    p.add_argument("--retries", type=int, default=6, help="extra attempts per request on 429/5xx (%(default)s)")
    p.add_argument("--system", default=SYSTEM_PROMPT, help="system prompt ('' for none)")
    p.add_argument("--out", default=None, metavar="DIR", help="where to write the report (default: eval-MODEL)")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    add_client_options(p)


def dispatch(args: argparse.Namespace) -> None:
    if args.compare:
        sys.exit(_compare(args))
    missing = [
        flag
        for flag, value in (("TARGET", args.target), ("--model", args.model), ("--base-url", args.base_url))
        if not value
    ]
    if missing:
        sys.exit(f"mcpgym eval: give {', '.join(missing)} (or --compare A B)")
    if args.samples < 1 or (args.episodes is not None and args.episodes < 1):
        sys.exit("mcpgym eval: --samples and --episodes must be at least 1")
    sys.exit(anyio.run(_evaluate, args))


async def _evaluate(args: argparse.Namespace) -> int:
    sampling = {"temperature": args.temperature, "top_p": args.top_p, "max_tokens": args.max_tokens}
    sampling = {k: v for k, v in sampling.items() if v is not None}
    extra = {"top_p": args.top_p} if args.top_p is not None else None
    out = Path(args.out if args.out is not None else f"eval-{args.model.replace('/', '_')}")
    policy = OpenAIPolicy(
        args.base_url,
        args.model,
        api_key=args.api_key,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        timeout=args.timeout,
        backoff=Backoff(attempts=args.retries + 1),
        extra_body=extra,
    )
    async with policy:
        result = await evaluate(
            args.target,
            policy,
            model=args.model,
            base_url=args.base_url,
            sampling=sampling,
            task_ids=args.tasks,
            episodes=args.episodes,
            samples=args.samples,
            seed=args.seed,
            threshold=args.threshold,
            max_turns=args.max_turns,
            concurrency=args.concurrency,
            system_prompt=args.system or None,
            episode_timeout=args.episode_timeout,
            out=out,
            progress=not args.no_progress,
            headers=client_headers(args),
        )
    first = result.pass_at_k[0]
    print(
        f"{len(result.tasks)} tasks x {args.samples}: pass@1 {first.value:.3f} [{first.low:.3f}, {first.high:.3f}], "
        f"mean reward {result.reward.value:.3f}; {result.failures.episodes} failed; report in {out}/report.md",
        file=sys.stderr,
    )
    played = len(result.tasks) * args.samples
    return 1 if played and result.failures.episodes == played else 0  # every episode failed: a broken set-up


def _compare(args: argparse.Namespace) -> int:
    first, second = args.compare
    try:
        comparison = compare.compare(
            report.read(first), report.read(second), a_name=first, b_name=second, seed=args.seed
        )
    except (OSError, ValueError) as exc:
        print(f"mcpgym eval --compare: {exc}", file=sys.stderr)
        return 2
    text = compare.markdown(comparison)
    print(text, end="")
    if args.out is not None:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.json").write_text(json.dumps(comparison.model_dump(mode="json"), indent=2) + "\n")
        (out / "compare.md").write_text(text)
    return 0
