"""A vector env's client CPU per step against OpenEnv's WebSocket client, side by side in one run.

    python -m benchmarks.bench_vector --openenv-python /tmp/oevenv/bin/python [--slots 8,64] [--seconds 2]

The OpenEnv side runs under its own Python (a throwaway venv with `openenv-core`, no dependency
of ours: `python -m venv /tmp/oevenv && /tmp/oevenv/bin/pip install openenv-core==0.3.0`), as
`benchmarks.openenv_echo`: its echo environment on its own server, n `EnvClient` WebSocket
sessions stepping at once. Ours, against our echo server (`benchmarks.echo_servers`), at the same
n: `connect_vector(url, n)` (one `mcpgym/steps` request per batch), the same with `batch=False`
(a request per slot), and one `mcp.Client` per episode (the reference every ratio is taken
against). Client CPU is each client process's CPU over the measured window divided by steps;
server CPU likewise for its server. Every server runs in its own process on this machine's cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import anyio

from benchmarks.bench_client import Row, measure
from benchmarks.echo_servers import ServerSettings, http_server, until_ready

REPO = Path(__file__).resolve().parent.parent


def openenv_row(python: str, n: int, seconds: float) -> Row:
    done = subprocess.run(
        [python, "-m", "benchmarks.openenv_echo", "run", str(n), str(seconds)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    steps = max(got["steps"], 1)
    return Row(
        "openenv",
        "EnvClient (WebSocket)",
        n,
        steps / got["wall"],
        got["client_cpu"] / steps * 1e6,
        got["server_cpu"] / steps * 1e6,
        got["wall"] * n / steps * 1e6,
        0,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--openenv-python", required=True, help="a Python with openenv-core installed")
    parser.add_argument("--slots", default="8,64", help="comma-separated slot (episode) counts")
    parser.add_argument("--seconds", type=float, default=2.0, help="measured seconds per cell")
    args = parser.parse_args()
    counts = [int(x) for x in args.slots.split(",")]
    rows: list[Row] = []
    with http_server("ours", ServerSettings()) as (url, proc):
        anyio.run(until_ready, url)
        for n in counts:
            rows.append(openenv_row(args.openenv_python, n, args.seconds))
            for kind in ("vector", "vector-slots", "mcp.Client"):
                rows.append(anyio.run(measure, kind, "ours", url, proc.pid, n, args.seconds))
            print(f"  {n} slots measured", file=sys.stderr)
    print(f"Echo step, co-located, {args.seconds:g}s per cell")
    print("| server | client | slots | steps/s | client CPU µs/step | server CPU µs/step |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r.server} | {r.client} | {r.episodes} | {r.steps_per_s:,.0f} "
            f"| {r.client_us:,.0f} | {r.server_us:,.0f} |"
        )
    by = {(r.client, r.episodes): r for r in rows}
    print("\nRatios (this run), client CPU per step:")
    for n in counts:
        sdk, ours, theirs = by[("mcp.Client", n)], by[("vector", n)], by[("EnvClient (WebSocket)", n)]
        print(
            f"  {n:>3} slots: vector / OpenEnv = {ours.client_us / theirs.client_us:.2f} (target < 1); "
            f"vector / mcp.Client = {ours.client_us / sdk.client_us:.2f}; "
            f"OpenEnv / mcp.Client = {theirs.client_us / sdk.client_us:.2f}"
        )


if __name__ == "__main__":
    main()
