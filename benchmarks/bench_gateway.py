"""The gateway's added latency per call and its memory per 1,000 recorded turns.

    python -m benchmarks.bench_gateway [--calls 2000] [--turns 1000] [--prompt-tokens 400]

Four processes on this machine: an engine (a Starlette route answering every chat completion
at once with a fixed reply carrying vLLM's token fields: the engine's own time is ~0, so the
difference is all proxy), `mcpgym gateway --record DIR` in front of it, the same gateway
without `--record`, and this client (httpx2, one request at a time). Calls rotate between the
engine directly and the two gateways, in one run, and the p50 of each is reported with the
difference (the target: under 1 ms added, p50), and each gateway's CPU time per call (less
sensitive than latency to the other work on a shared box).
Then `--turns` calls spread over 100 episodes are recorded and the gateway's RSS growth is
reported, with the size on disk and what `read_traces` holds to read them back.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import httpx2

PROMPT_TOKENS = 400
COMPLETION = list(range(60))


def engine_app(prompt_tokens: int) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    prompt = list(range(prompt_tokens))

    async def chat(request: Request) -> Response:
        body = json.loads(await request.body())
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": "x" * 200},
            "finish_reason": "stop",
            "logprobs": {"content": [{"token": "x", "logprob": -0.1, "top_logprobs": []} for _ in COMPLETION]}
            if body.get("logprobs")
            else None,
        }
        reply: dict[str, Any] = {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [choice],
        }
        if body.get("return_token_ids"):
            reply["prompt_token_ids"] = prompt
            choice["token_ids"] = COMPLETION
        total = prompt_tokens + len(COMPLETION)
        reply["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": len(COMPLETION), "total_tokens": total}
        return Response(json.dumps(reply), media_type="application/json")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def serve_engine(prompt_tokens: int) -> None:
    import anyio

    from mcpgym._server.http import serve_http

    anyio.run(
        lambda: serve_http(engine_app(prompt_tokens), "127.0.0.1", 0, on_ready=lambda url: print(url, flush=True))
    )


def start(argv: list[str], banner: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stream = process.stdout if banner == "stdout" else process.stderr
    assert stream is not None
    line = stream.readline()
    if "http://" not in line:
        process.kill()
        raise SystemExit(f"{argv} did not start: {line}{stream.read()}")
    url = line[line.index("http://") :].split()[0]
    return process, url.removesuffix("/v1")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def body(n: int) -> dict[str, Any]:
    messages = [{"role": "system", "content": "s" * 300}, {"role": "user", "content": f"task {n} " + "u" * 500}]
    return {"model": "m", "messages": messages, "temperature": 1.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls to each of engine and gateway")
    parser.add_argument("--turns", type=int, default=1000, help="turns recorded for the memory figures")
    parser.add_argument(
        "--prompt-tokens", type=int, default=PROMPT_TOKENS, help="prompt ids in each reply (%(default)s)"
    )
    parser.add_argument("--serve-engine", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_engine:
        serve_engine(args.prompt_tokens)
        return
    record = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    engine_cmd = [sys.executable, "-m", "benchmarks.bench_gateway", "--serve-engine"]
    engine, engine_url = start([*engine_cmd, "--prompt-tokens", str(args.prompt_tokens)], "stdout")
    gateway_cmd = [sys.executable, "-m", "mcpgym", "gateway", "--upstream", engine_url + "/v1", "--port", "0"]
    gateway, gateway_url = start([*gateway_cmd, "--record", str(record)], "stderr")
    bare, bare_url = start(gateway_cmd, "stderr")
    try:
        run(args, engine_url, gateway_url, bare_url, (gateway.pid, bare.pid), record)
    finally:
        for process in (bare, gateway, engine):
            process.terminate()
            process.wait(10)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(
    args: argparse.Namespace, engine_url: str, gateway_url: str, bare_url: str, pids: tuple[int, int], record: Path
) -> None:
    gateway_pid = pids[0]
    direct: list[float] = []
    proxied: list[float] = []
    unrecorded: list[float] = []
    with httpx2.Client(timeout=30) as client:
        for n in range(200):  # warm both paths (connections, caches) before measuring
            client.post(f"{engine_url}/v1/chat/completions", json=body(n))
            client.post(f"{gateway_url}/episodes/warm/v1/chat/completions", json=body(n))
            client.post(f"{bare_url}/episodes/warm/v1/chat/completions", json=body(n))
        cpu = [cpu_seconds(pid) for pid in pids]
        for n in range(args.calls):
            paths = (
                (f"{engine_url}/v1", direct),
                (f"{gateway_url}/episodes/b{n % 50}/v1", proxied),
                (f"{bare_url}/episodes/b{n % 50}/v1", unrecorded),
            )
            # The order turns each round: a call's place in the round shifts its time by ~30 us
            # on this box, which would otherwise land on one path only.
            for url, times in paths[n % 3 :] + paths[: n % 3]:
                started = time.perf_counter()
                response = client.post(url + "/chat/completions", json=body(n))
                times.append(time.perf_counter() - started)
                assert response.status_code == 200, response.text
        p50_direct, p50_proxy = statistics.median(direct) * 1e3, statistics.median(proxied) * 1e3
        p50_bare = statistics.median(unrecorded) * 1e3
        used = [(cpu_seconds(pid) - before) / args.calls * 1e6 for pid, before in zip(pids, cpu, strict=True)]
        print(f"latency p50 over {args.calls} calls each (one run, interleaved):")
        print(f"  engine directly             {p50_direct:.3f} ms")
        print(
            f"  through gateway, recording  {p50_proxy:.3f} ms  (+{p50_proxy - p50_direct:.3f} ms; target < 1 ms)"
            f"  gateway CPU {used[0]:.0f} us/call"
        )
        print(
            f"  through gateway, no record  {p50_bare:.3f} ms  (+{p50_bare - p50_direct:.3f} ms)"
            f"                 gateway CPU {used[1]:.0f} us/call"
        )

        before = rss_kib(gateway_pid)
        for n in range(args.turns):
            client.post(f"{gateway_url}/episodes/mem{n % 100}/v1/chat/completions", json=body(n))
        grown = rss_kib(gateway_pid) - before
    size = sum(p.stat().st_size for p in record.glob("mem*.jsonl"))
    scale = 1000 / args.turns
    tokens = args.prompt_tokens + len(COMPLETION)
    print(f"memory per 1,000 recorded turns ({args.turns} over 100 episodes, {tokens} tokens each):")
    print(
        f"  gateway RSS growth  {grown * scale / 1024:.2f} MiB  (per episode a turn count, for the 64 most recent"
        " the last prompt; not the calls)"
    )
    print(f"  on disk             {size * scale / 2**20:.2f} MiB")
    tracemalloc.start()
    from mcpgym.gateway import read_traces

    traces = read_traces(record)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    turns = sum(len(t.calls) for t in traces)
    print(
        f"  read_traces peak    {peak * 1000 / max(turns, 1) / 2**20:.2f} MiB  (all {turns} turns of the run read back)"
    )


if __name__ == "__main__":
    main()
