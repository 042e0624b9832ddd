"""A rollout of mcpgym.servers.coding against a local OpenAI-compatible chat-completions endpoint.

Point it at a model server you run (vLLM, SGLang, llama.cpp's server, ...):

    vllm serve Qwen/Qwen3-8B --enable-auto-tool-choice --tool-call-parser hermes --port 8001
    python examples/rollout_local_endpoint.py --base-url http://127.0.0.1:8001/v1 --model Qwen/Qwen3-8B

Without --base-url it starts harness's scripted endpoint in this process (a real HTTP server
replaying tool calls that write and submit each task's canonical solution), so the example
runs anywhere, with no model and no network beyond loopback:

    python examples/rollout_local_endpoint.py [--episodes 8] [--concurrency 4] [--out runs/demo.jsonl]
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from mcpgym import harness
from mcpgym.harness import _scripted


@contextlib.asynccontextmanager
async def endpoint(base_url: str | None) -> AsyncIterator[str]:
    if base_url is not None:
        yield base_url
        return
    async with _scripted.serve() as url:
        print(f"started the scripted endpoint at {url} (pass --base-url to use a real model)")
        yield url


async def main(args: argparse.Namespace) -> None:
    tasks = [{"task_id": f"HumanEval/{i}"} for i in range(args.episodes)]  # one task per episode
    async with endpoint(args.base_url) as base_url:
        async with harness.OpenAIPolicy(base_url, args.model, temperature=0.0, timeout=args.timeout) as policy:
            trajectories = await harness.rollout(
                "mcpgym.servers.coding",
                policy,
                episodes=args.episodes,
                concurrency=args.concurrency,
                options=tasks,
                max_turns=args.max_turns,
                out=args.out,
                progress=True,
            )
    for t in trajectories:
        calls = [s.tool for turn in t.turns for s in turn.steps]
        print(
            f"episode {t.index} {t.options and t.options['task_id']}: reward={t.reward:.1f} stop={t.stop} "
            f"tools={calls} tokens={t.usage.total_tokens}" + (f" error={t.error}" if t.error else "")
        )
    ok = [t for t in trajectories if not t.failed]
    print(
        f"mean reward {sum(t.reward for t in ok) / max(1, len(ok)):.3f}; {len(trajectories) - len(ok)} failed; "
        f"trajectories in {args.out} (read them with harness.read_rollout)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible endpoint (default: the scripted demo)")
    parser.add_argument("--model", default="solve", help="model name (the scripted endpoint's script: 'solve')")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-turns", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per model reply")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "mcpgym-rollout-demo.jsonl")
    anyio.run(main, parser.parse_args())
