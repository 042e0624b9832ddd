"""Idle RSS of our HTTP server against the bare SDK server with the same tool, in one run (#22 item 7).

    python -m benchmarks.bench_idle_rss               # ~15 s
    python -m benchmarks.bench_idle_rss --rounds 5

Each round starts `benchmarks.echo_servers ours` and `... bare` (the same uvicorn settings),
sends one `tools/list` (so both have served a request), and reads their `VmRSS`; the table is
the median over rounds, and the ratio ours / bare.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import anyio

from benchmarks.echo_servers import ServerSettings, http_server, until_ready


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _idle_rss(kind: str) -> float:
    with http_server(kind, ServerSettings()) as (url, proc):
        anyio.run(until_ready, url)
        return _rss_mb(proc.pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="alternating starts of each server (%(default)s)")
    args = parser.parse_args()
    rss: dict[str, list[float]] = {"ours": [], "bare": []}
    for _ in range(args.rounds):
        for kind in rss:
            rss[kind].append(_idle_rss(kind))
    ours, bare = (statistics.median(rss[k]) for k in ("ours", "bare"))
    print("| server | idle RSS (MB) |\n|---|---|")
    print(f"| mcpgym GymServer(UnboundedEcho) | {ours:.1f} |\n| bare SDK MCPServer | {bare:.1f} |")
    print(f"\nours / bare: {ours / bare:.2f}x")


if __name__ == "__main__":
    main()
