"""The gateway's added latency per call and its memory per 1,000 recorded turns.

    python -m benchmarks.bench_gateway [--calls 2000] [--turns 1000]

Four processes on this machine: an engine (a Starlette route answering every chat completion
at once with a fixed reply carrying vLLM's token fields: the engine's own time is ~0, so the
difference is all proxy), `mcpgym gateway --record DIR` in front of it, the same gateway
without `--record`, and this client (httpx2, one request at a time). Calls rotate between the
engine directly and the two gateways, in one run, and the p50 of each is reported with the
difference (the target: under 1 ms added, p50).
Then `--turns` calls spread over 100 episodes are recorded and the gateway's RSS growth is
reported, with the size on disk and what `read_traces` holds to read them back.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import httpx2

PROMPT = list(range(400))
COMPLETION = list(range(60))


def engine_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

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
            reply["prompt_token_ids"] = PROMPT
            choice["token_ids"] = COMPLETION
        reply["usage"] = {"prompt_tokens": len(PROMPT), "completion_tokens": len(COMPLETION), "total_tokens": 460}
        return Response(json.dumps(reply), media_type="application/json")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def serve_engine() -> None:
    import anyio

    from mcpgym._server.http import serve_http

    anyio.run(lambda: serve_http(engine_app(), "127.0.0.1", 0, on_ready=lambda url: print(url, flush=True)))


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
    parser.add_argument("--serve-engine", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_engine:
        serve_engine()
        return
    record = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    engine, engine_url = start([sys.executable, "-m", "benchmarks.bench_gateway", "--serve-engine"], "stdout")
    gateway_cmd = [sys.executable, "-m", "mcpgym", "gateway", "--upstream", engine_url + "/v1", "--port", "0"]
    gateway, gateway_url = start([*gateway_cmd, "--record", str(record)], "stderr")
    bare, bare_url = start(gateway_cmd, "stderr")
    try:
        run(args, engine_url, gateway_url, bare_url, gateway.pid, record)
    finally:
        for process in (bare, gateway, engine):
            process.terminate()
            process.wait(10)


def run(
    args: argparse.Namespace, engine_url: str, gateway_url: str, bare_url: str, gateway_pid: int, record: Path
) -> None:
    direct: list[float] = []
    proxied: list[float] = []
    unrecorded: list[float] = []
    with httpx2.Client(timeout=30) as client:
        for n in range(200):  # warm both paths (connections, caches) before measuring
            client.post(f"{engine_url}/v1/chat/completions", json=body(n))
            client.post(f"{gateway_url}/episodes/warm/v1/chat/completions", json=body(n))
            client.post(f"{bare_url}/episodes/warm/v1/chat/completions", json=body(n))
        for n in range(args.calls):
            paths = (
                (f"{engine_url}/v1", direct),
                (f"{gateway_url}/episodes/b{n % 50}/v1", proxied),
                (f"{bare_url}/episodes/b{n % 50}/v1", unrecorded),
            )
            for url, times in paths:
                started = time.perf_counter()
                response = client.post(url + "/chat/completions", json=body(n))
                times.append(time.perf_counter() - started)
                assert response.status_code == 200, response.text
        p50_direct, p50_proxy = statistics.median(direct) * 1e3, statistics.median(proxied) * 1e3
        p50_bare = statistics.median(unrecorded) * 1e3
        print(f"latency p50 over {args.calls} calls each (one run, interleaved):")
        print(f"  engine directly             {p50_direct:.3f} ms")
        print(f"  through gateway, recording  {p50_proxy:.3f} ms  (+{p50_proxy - p50_direct:.3f} ms; target < 1 ms)")
        print(f"  through gateway, no record  {p50_bare:.3f} ms  (+{p50_bare - p50_direct:.3f} ms)")

        before = rss_kib(gateway_pid)
        for n in range(args.turns):
            client.post(f"{gateway_url}/episodes/mem{n % 100}/v1/chat/completions", json=body(n))
        grown = rss_kib(gateway_pid) - before
    size = sum(p.stat().st_size for p in record.glob("mem*.jsonl"))
    scale = 1000 / args.turns
    print(f"memory per 1,000 recorded turns ({args.turns} over 100 episodes, 460 tokens each):")
    print(f"  gateway RSS growth  {grown * scale / 1024:.2f} MiB  (it keeps a turn count per episode, not the calls)")
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
