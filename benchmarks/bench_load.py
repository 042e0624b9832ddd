"""Capacity of one HTTP server process: thousands of concurrent episodes on this machine.

    python -m benchmarks.bench_load [--episodes 2048] [--steps 10] [--sleep-ms 20] [--workers 2]

Starts `mcpgym serve tests.envs:Sleepy --http` (a tool that awaits a short sleep) in a child
process, then `--workers` client processes that together open `--episodes` episodes at once
(reset), hold them all open, step each `--steps` times, and close. The parent samples the
server's RSS and its /healthz episode count throughout and reports: peak concurrent episodes
held, failed or lost steps, steps/s, p50/p99 step latency, peak RSS, and RSS once every
episode has closed (vs. the baseline before the run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2

import mcpgym
from benchmarks.bench_throughput import ENVELOPE, _exchange, _request
from mcpgym._core.protocol import EPISODE_KEY, new_episode_id


async def _client_worker(url: str, episodes: int, steps: int, sleep_ms: int, start_at: float) -> dict[str, Any]:
    """`episodes` episodes over raw keep-alive HTTP/1.1 (one connection each): reset, hold until
    every episode is open, `steps` steps, close. Raw requests keep the client's CPU small, so the
    server, not this process, is what is measured."""
    parts = urlsplit(url)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path
    latencies: list[float] = []
    failures: list[str] = []
    last_step_end = 0.0
    opened = 0
    all_open = asyncio.Event()

    async def episode(i: int) -> None:
        nonlocal opened, last_step_end
        counted = False
        try:
            reader, writer = await asyncio.open_connection(host, port)
            meta = {**ENVELOPE, EPISODE_KEY: new_episode_id()}
            reset = _request(f"{host}:{port}", path, "mcpgym/reset", {"seed": i, "_meta": meta})
            if b'"result"' not in await _exchange(reader, writer, reset):
                raise RuntimeError("reset refused")
            opened += 1
            counted = True
            if opened + len(failures) >= episodes:
                all_open.set()
            await all_open.wait()
            # Wall-clock rendezvous across worker processes: every episode is open before any steps.
            await asyncio.sleep(max(0.0, start_at - time.time()))
            call = _request(
                f"{host}:{port}",
                path,
                "tools/call",
                {"name": "wait", "arguments": {"ms": sleep_ms}, "_meta": meta},
                name="wait",
            )
            for expected in range(1, steps + 1):
                t0 = time.perf_counter()
                reply = await _exchange(reader, writer, call)
                latencies.append(time.perf_counter() - t0)
                if f'"structuredContent":{{"result":{expected}}}'.encode() not in reply.replace(b" ", b""):
                    failures.append(f"episode {i} step {expected}: {reply[:200]!r}")
            last_step_end = max(last_step_end, time.time())
            close = _request(f"{host}:{port}", path, "mcpgym/close", {"_meta": meta})
            await _exchange(reader, writer, close)
            writer.close()
        except Exception as exc:  # a failed episode is counted and reported, never hidden
            failures.append(f"episode {i}: {type(exc).__name__}: {exc}")
            if not counted and opened + len(failures) >= episodes:
                all_open.set()

    await asyncio.gather(*(episode(i) for i in range(episodes)))
    return {"latencies": latencies, "failures": failures, "last_step_end": last_step_end}


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _sampler(pid: int, health: str, stop: threading.Event, out: dict[str, int]) -> None:
    with httpx2.Client(timeout=5) as http:
        while not stop.is_set():
            out["peak_rss"] = max(out.get("peak_rss", 0), _rss_kib(pid))
            try:
                out["peak_episodes"] = max(out.get("peak_episodes", 0), http.get(health).json()["episodes"])
            except httpx2.HTTPError:
                pass  # the server is busy; the next sample counts
            stop.wait(0.1)


def _burst(url: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One burst: `--workers` processes open `--episodes` episodes together, step, close."""
    shares = [args.episodes // args.workers + (i < args.episodes % args.workers) for i in range(args.workers)]
    # Opening 2,048 connections takes a while on 2 cores; steps start together after that.
    start_at = time.time() + max(5.0, args.episodes / 200)
    argv = [sys.executable, "-m", "benchmarks.bench_load", "--sleep-ms", str(args.sleep_ms), "--worker"]
    workers = [
        subprocess.Popen([*argv, url, str(n), str(args.steps), str(start_at)], stdout=subprocess.PIPE, text=True)
        for n in shares
    ]
    results = [json.loads(w.communicate()[0]) for w in workers]
    for result in results:
        result["start_at"] = start_at
    return results


def _wait_until_idle(health: str) -> dict[str, int]:
    """Wait (up to 60 s) for the server to hold no episodes; returns its /healthz counters."""
    with httpx2.Client() as http:
        deadline = time.monotonic() + 60
        while http.get(health).json()["episodes"] and time.monotonic() < deadline:
            time.sleep(0.1)  # benchmark only: the server is closing the last episodes
        reply: dict[str, int] = http.get(health).json()
        return reply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--sleep-ms", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--bursts", type=int, default=2, help="repeat the whole burst (a leak grows per burst)")
    parser.add_argument("--worker", nargs=4, metavar=("URL", "N", "STEPS", "START_AT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        url, n, steps, start_at = args.worker
        result = asyncio.run(_client_worker(url, int(n), int(steps), args.sleep_ms, float(start_at)))
        json.dump(result, sys.stdout)
        return

    argv = f"python -m mcpgym serve tests.envs:Sleepy --http --port 0 --max-episodes {args.episodes + 16}"
    with mcpgym.ServerProcess(argv) as server:
        url = server.url
        health = url.replace("/mcp", "/healthz")
        # Warm up (lazy imports, first-request caches) so the baseline is a served server's.
        asyncio.run(_client_worker(url, 64, 2, args.sleep_ms, time.time()))
        blocks_before = _wait_until_idle(health)["allocated_blocks"]
        baseline = _rss_kib(server.pid)
        samples: dict[str, int] = {}
        stop = threading.Event()
        sampler = threading.Thread(target=_sampler, args=(server.pid, health, stop, samples))
        sampler.start()
        results: list[dict[str, Any]] = []
        after_bursts: list[tuple[int, int]] = []  # (RSS KiB, heap blocks) once each burst closed
        for burst in range(args.bursts):
            started = time.perf_counter()
            results = _burst(url, args)
            elapsed = time.perf_counter() - started
            idle = _wait_until_idle(health)
            after_bursts.append((_rss_kib(server.pid), idle["allocated_blocks"]))
            print(
                f"  burst {burst + 1}: RSS {after_bursts[-1][0] / 1024:.0f} MiB, "
                f"{after_bursts[-1][1]:,} heap blocks after close",
                file=sys.stderr,
            )
        left = idle["episodes"]
        after = after_bursts[-1][0]
        stop.set()
        sampler.join()
        server_log = list(server.log)[1:]  # after the banner: anything the server had to say

    latencies = sorted(x for r in results for x in r["latencies"])
    failures = [f for r in results for f in r["failures"]]
    expected = args.episodes * args.steps
    # Steps/s over the stepping phase: from the common start to the last step anywhere.
    step_window = max(1e-9, max(r["last_step_end"] for r in results) - results[0]["start_at"])
    print(f"episodes={args.episodes} steps/episode={args.steps} tool sleep={args.sleep_ms}ms workers={args.workers}")
    print("| metric | value |\n|---|---|")
    print(f"| peak concurrent episodes held | {samples.get('peak_episodes', 0)} |")
    print(f"| steps completed / expected | {len(latencies)} / {expected} |")
    print(f"| failed or lost steps | {expected - len(latencies) + len(failures)} |")
    print(f"| steps/s (stepping phase) | {len(latencies) / step_window:,.0f} |")
    print(f"| wall time incl. connect, reset, close | {elapsed:.1f} s |")
    if latencies:
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
        print(f"| step latency p50 / p99 | {p50:.1f} ms / {p99:.1f} ms |")
    print(
        f"| server RSS baseline / peak / after close | {baseline / 1024:.0f} / "
        f"{samples.get('peak_rss', 0) / 1024:.0f} / {after / 1024:.0f} MiB |"
    )
    print(f"| episodes left after close | {left} |")
    bursts = " / ".join(f"{rss / 1024:.0f} MiB, {blocks:,}" for rss, blocks in after_bursts)
    print(f"| after each burst closed: RSS, Python heap blocks (baseline {blocks_before:,}) | {bursts} |")
    for failure in failures[:10]:
        print("FAIL", failure)
    if server_log:
        print(f"server logged {len(server_log)} lines; the first ones:\n" + "".join(server_log[:20]))


if __name__ == "__main__":
    main()
