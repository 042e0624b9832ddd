"""Server throughput at N concurrent episodes over HTTP: our server vs a bare SDK server.

    python -m benchmarks.bench_throughput [--clients 64] [--seconds 8] [--rounds 3] [--workers 2]

The clients here must not be the bottleneck: a full `mcp.Client` spends more CPU per call
(~1.5 ms) than either server does, so on 2 cores it would measure the client. Instead
`--workers` load-generator processes replay pre-built 2026-07-28 `tools/call` requests over
raw keep-alive HTTP/1.1 connections (a few tens of µs of client CPU per request), `--clients`
connections in all, each one episode doing sequential echo steps. Both servers run in child
processes with the same uvicorn settings (`benchmarks.echo_servers`): ours with its defaults (JSON
responses), the bare `MCPServer` with the SDK's defaults (SSE responses). Every response is
checked (a result, not an error). Rounds alternate bare/ours; reports steps/s, server CPU per
step, and the ratio (targets: >= 1.0x, issue 2; >= 1.15x, issue 5).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import time
from typing import Any
from urllib.parse import urlsplit

from benchmarks.echo_servers import ServerSettings, cpu_seconds, http_server, until_ready
from mcpgym._core.protocol import EPISODE_KEY, new_episode_id

ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def _request(host: str, path: str, method: str, params: dict[str, Any], name: str | None = None) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    head = [
        f"POST {path} HTTP/1.1",
        f"Host: {host}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        "MCP-Protocol-Version: 2026-07-28",
        f"Mcp-Method: {method}",
        *([f"Mcp-Name: {name}"] if name else []),
        f"Content-Length: {len(body)}",
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bytes:
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = head.split(b" ", 2)[1]
    if status != b"200":
        raise RuntimeError(f"HTTP {status.decode()}: {head[:200]!r}")
    lowered = head.lower()
    if b"content-length:" in lowered:
        length = int(lowered.split(b"content-length:")[1].split(b"\r\n")[0])
        return await reader.readexactly(length)
    body = b""  # chunked (the SSE answer): read chunks until the empty one
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        chunk = await reader.readexactly(size + 2)
        if size == 0:
            return body
        body += chunk[:-2]


async def _load(url: str, kind: str, clients: int, seconds: float, start_at: float) -> int:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    done = 0

    async def client() -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection(host, port)
        meta = dict(ENVELOPE)
        if kind == "ours":
            meta[EPISODE_KEY] = new_episode_id()
            reset = _request(
                f"{host}:{port}", parts.path, "mcpgym/reset", {"options": {"target": "zzz"}, "_meta": meta}
            )
            assert b'"result"' in await _exchange(reader, writer, reset)
        call = _request(
            f"{host}:{port}",
            parts.path,
            "tools/call",
            {"name": "echo_message", "arguments": {"message": "hi"}, "_meta": meta},
            name="echo_message",
        )
        await asyncio.sleep(max(0.0, start_at - time.time()))
        deadline = start_at + seconds
        while time.time() < deadline:
            reply = await _exchange(reader, writer, call)
            if b'"result"' not in reply or b'"isError":true' in reply:
                raise RuntimeError(f"bad reply: {reply[:200]!r}")
            done += 1
        writer.close()

    await asyncio.gather(*(client() for _ in range(clients)))
    return done


def _worker(url: str, kind: str, clients: int, seconds: float, start_at: float, out: Any) -> None:
    out.put(asyncio.run(_load(url, kind, clients, seconds, start_at)))


def one_round(kind: str, clients: int, workers: int, seconds: float) -> tuple[float, float]:
    with http_server(kind, ServerSettings()) as (url, proc):
        _wait_ready(url)
        ctx = multiprocessing.get_context("spawn")
        out = ctx.Queue()
        start_at = time.time() + 2.0  # time for every connection (and our resets) to be made
        shares = [clients // workers + (i < clients % workers) for i in range(workers)]
        procs = [ctx.Process(target=_worker, args=(url, kind, n, seconds, start_at, out)) for n in shares]
        for p in procs:
            p.start()
        while time.time() < start_at:
            time.sleep(0.01)  # benchmark only: start measuring server CPU when the clients start
        cpu0 = cpu_seconds(proc.pid)
        steps = sum(out.get(timeout=seconds + 60) for _ in procs)
        cpu = cpu_seconds(proc.pid) - cpu0
        for p in procs:
            p.join()
    return steps / seconds, cpu / steps * 1e6


def _wait_ready(url: str) -> None:
    import anyio

    anyio.run(until_ready, url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {"bare": [], "ours": []}
    for _ in range(args.rounds):
        for kind in ("bare", "ours"):
            rate, cpu = one_round(kind, args.clients, args.workers, args.seconds)
            results[kind].append((rate, cpu))
            print(f"  {kind}: {rate:,.0f} steps/s, server {cpu:,.0f} µs CPU/step", file=sys.stderr)
    rates = {k: statistics.median(r for r, _ in v) for k, v in results.items()}
    cpus = {k: statistics.median(c for _, c in v) for k, v in results.items()}
    print(
        f"{args.clients} concurrent episodes, {args.workers} raw load-generator processes, "
        f"{args.seconds:g}s x {args.rounds} rounds (median)"
    )
    print("| server | steps/s | server CPU µs/step |\n|---|---:|---:|")
    print(f"| bare SDK MCPServer (defaults: SSE) | {rates['bare']:,.0f} | {cpus['bare']:,.0f} |")
    print(f"| mcpgym GymServer (defaults: JSON) | {rates['ours']:,.0f} | {cpus['ours']:,.0f} |")
    ratio = rates["ours"] / rates["bare"]
    print(
        f"ratio ours/bare steps/s: {ratio:.2f}x  (>= 1.0: {'PASS' if ratio >= 1 else 'FAIL'}; "
        f">= 1.15: {'PASS' if ratio >= 1.15 else 'FAIL'});  CPU/step bare/ours: {cpus['bare'] / cpus['ours']:.2f}x"
    )


if __name__ == "__main__":
    main()
