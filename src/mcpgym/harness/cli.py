"""`mcpgym rollout` and `mcpgym harness config`: the harness's commands.

Layer: top. This module is an `mcpgym.commands` entry point (pyproject.toml): `mcpgym`'s CLI
loads it when building its parser, calls `register` to add the subcommands and `dispatch` to
run them. The core never imports the harness.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio

import mcpgym
from mcpgym._cli.options import add_client_options, client_headers
from mcpgym.harness import target as targets
from mcpgym.harness.errors import HarnessError
from mcpgym.harness.openai import API_KEY_ENV, OpenAIPolicy
from mcpgym.harness.retry import Backoff
from mcpgym.harness.rollout import SYSTEM_PROMPT, rollout
from mcpgym.harness.types import Trajectory

COMMANDS = ("rollout", "harness", "eval")

_ROLLOUT_EPILOG = """\
TARGET is an environment: mcpgym.servers.coding (a module with one Environment class),
mcpgym.servers.echo:Echo, http://127.0.0.1:8000/mcp, or a command such as
"python -m mcpgym.servers.coding".

example (a vLLM server started with `vllm serve Qwen/Qwen3-8B --enable-auto-tool-choice --tool-call-parser hermes`):
  mcpgym rollout mcpgym.servers.coding --model Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1 \\
      --episodes 32 --concurrency 8 --out runs/x.jsonl
"""


def register(sub: Any) -> None:
    """Add the harness's subcommands to `mcpgym`'s subparsers."""
    _register_rollout(sub)
    from mcpgym.harness import eval_cli
    from mcpgym.harness.config import register as register_config

    eval_cli.register(sub)

    register_config(sub)


def dispatch(args: argparse.Namespace) -> None:
    """Run a harness subcommand (exits with its status)."""
    try:
        if args.command == "eval":
            from mcpgym.harness import eval_cli

            eval_cli.dispatch(args)
        if args.command == "rollout":
            finished: list[Trajectory] = []
            try:
                sys.exit(anyio.run(_rollout, args, finished))
            except KeyboardInterrupt:  # the episodes that finished are written; say what they were
                print(summary(finished, args.out) + "\ninterrupted", file=sys.stderr)
                sys.exit(130)
        from mcpgym.harness.config import run as run_config

        sys.exit(run_config(args))
    except HarnessError as exc:
        sys.exit(f"mcpgym: {exc}")


def _register_rollout(sub: Any) -> None:
    p = sub.add_parser(
        "rollout",
        help="play episodes with a model behind an OpenAI-compatible endpoint",
        description="Run a tool-calling agent loop: the model behind --base-url plays TARGET's "
        "episodes; each trajectory is appended to --out as one JSON line when it finishes.",
        epilog=_ROLLOUT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="TARGET")
    p.add_argument("--model", required=True, help="model name sent to the endpoint")
    p.add_argument("--base-url", required=True, help="chat-completions base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--api-key", default=None, help=f"bearer token (default: ${API_KEY_ENV}; local servers need none)")
    p.add_argument("--episodes", type=_positive, default=1, help="episodes to play (%(default)s)")
    p.add_argument("--concurrency", type=_positive, default=8, help="episodes played at once (%(default)s)")
    p.add_argument("--max-turns", type=int, default=20, help="model replies per episode before it is cut (%(default)s)")
    p.add_argument("--seed", type=int, default=None, help="episode i is reset with seed SEED+i")
    p.add_argument(
        "--options",
        default=None,
        metavar="JSON",
        help="reset options: an object for every episode, or a list cycled through by episode",
    )
    p.add_argument(
        "--tasks",
        action="store_true",
        help="play the target's task catalog in order (episode i plays task i, cycling); not with --seed/--options",
    )
    p.add_argument(
        "--curriculum",
        type=_positive,
        default=None,
        metavar="G",
        help="the server's task sampler picks the tasks, one per group of G episodes (docs/curriculum.md)",
    )
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--max-tokens", type=int, default=None, help="completion tokens per model reply")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for one model reply (%(default)s)")
    p.add_argument("--episode-timeout", type=float, default=None, help="seconds one episode may take in all")
    p.add_argument(
        "--retries",
        type=_non_negative,
        default=6,
        help="extra attempts per request on connect errors, 429 and 5xx (%(default)s; 0: try once)",
    )
    p.add_argument("--system", default=SYSTEM_PROMPT, help="system prompt ('' for none)")
    p.add_argument("--out", default=None, metavar="FILE.jsonl", help="append each trajectory here as it finishes")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    add_client_options(p)  # --token / --header for an HTTP environment target


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


async def _rollout(args: argparse.Namespace, finished: list[Trajectory]) -> int:
    options = _options(args.options)
    tasks = None
    if args.tasks:
        if args.seed is not None or options is not None:
            raise SystemExit("mcpgym: --tasks sets each episode's seed and options: drop --seed and --options")
        tasks = await mcpgym.list_tasks(targets.resolve(args.target), prompts=False)
        if not tasks:
            raise SystemExit(f"mcpgym: {args.target} lists no tasks (its environment has no catalog())")
    if args.curriculum is not None and (tasks is not None or args.seed is not None or options is not None):
        raise SystemExit("mcpgym: --curriculum draws each group's task: drop --tasks, --seed and --options")
    policy = OpenAIPolicy(
        args.base_url,
        args.model,
        api_key=args.api_key,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        timeout=args.timeout,
        backoff=Backoff(attempts=args.retries + 1),  # retries are extra attempts
    )
    async with policy:
        trajectories = await rollout(
            args.target,
            policy,
            episodes=args.episodes,
            concurrency=args.concurrency,
            max_turns=args.max_turns,
            seed=args.seed,
            options=options,
            system_prompt=args.system or None,
            episode_timeout=args.episode_timeout,
            out=args.out,
            on_trajectory=finished.append,
            progress=not args.no_progress,
            tasks=tasks,
            headers=client_headers(args),
            curriculum=args.curriculum,
        )
    print(summary(trajectories, args.out), file=sys.stderr)
    # Some failed episodes are data; a run where every episode failed is a broken set-up.
    return 1 if trajectories and all(t.failed for t in trajectories) else 0


def summary(trajectories: list[Trajectory], out: str | None) -> str:
    ok = [t for t in trajectories if not t.failed]
    mean = sum(t.reward for t in ok) / len(ok) if ok else 0.0
    failures = len(trajectories) - len(ok)
    line = f"{len(trajectories)} episodes: mean reward {mean:.3f} over {len(ok)} ok, {failures} failed"
    if out:
        line += f"; trajectories appended to {out}"
    failed = next((t for t in trajectories if t.failed), None)
    if failed is not None:
        line += f"\nfirst failure (episode {failed.index}): {failed.error}"
    return line


def _options(text: str | None) -> dict[str, Any] | list[dict[str, Any]] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"mcpgym: --options is not valid JSON: {exc}") from None
    if isinstance(value, dict) or (isinstance(value, list) and value and all(isinstance(v, dict) for v in value)):
        return value
    raise SystemExit("mcpgym: --options must be a JSON object or a non-empty list of objects")
