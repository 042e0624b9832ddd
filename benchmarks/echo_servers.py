"""The echo servers the benchmarks measure, each in a process of its own.

    python -m benchmarks.echo_servers ours|bare --fd N [--loop L --http-impl H --response R]
    python -m benchmarks.echo_servers ours           # our server over stdio

`ours` is `mcpgym.GymServer(UnboundedEcho)`, `bare` the SDK's own `MCPServer` with the same tool,
both served by uvicorn with the same settings. `http_server()` starts one on an already listening
`127.0.0.1` socket it hands down (`--fd`): the first request simply waits in the accept backlog
until the server is up (no port race, no polling). Used by `bench_step` and `bench_throughput`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import mcp
from mcp.server.mcpserver import MCPServer

import mcpgym
from mcpgym._cli.process import terminate
from mcpgym.servers.echo import Echo

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


class UnboundedEcho(Echo):
    """Echo without the step limit: a benchmark episode never truncates."""

    max_steps = None  # type: ignore[assignment]  # mypy reads Echo's `max_steps = 8` as plain int


def bare_server() -> MCPServer:
    """The SDK's own server with the same tool (log level WARNING, as `mcpgym` serves: no
    per-request INFO log lines on either side)."""
    server: MCPServer = MCPServer("bare-echo", log_level="WARNING")

    @server.tool()
    async def echo_message(message: str) -> str:
        """Echo the message back."""
        return message

    return server


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


@dataclass(frozen=True)
class ServerSettings:
    """How the subprocess servers run; the same uvicorn settings for ours and the bare one."""

    loop: str = "auto"
    http: str = "auto"
    ours_response: str = "json"
    bare_response: str = "sse"


@contextlib.contextmanager
def http_server(kind: str, settings: ServerSettings) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run this module's `serve(kind)` on a listening 127.0.0.1 socket it inherits; yields (url, process)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    port = sock.getsockname()[1]
    response = settings.ours_response if kind == "ours" else settings.bare_response
    argv = [
        sys.executable,
        "-m",
        "benchmarks.echo_servers",
        kind,
        "--fd",
        str(sock.fileno()),
        "--loop",
        settings.loop,
        "--http-impl",
        settings.http,
        "--response",
        response,
    ]
    stderr = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, cwd=ROOT, pass_fds=[sock.fileno()], stdout=subprocess.DEVNULL, stderr=stderr)
    sock.close()
    try:
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        terminate(proc)
        if proc.returncode not in (0, -15):
            stderr.seek(0)
            print(f"{kind} server exited {proc.returncode}: {stderr.read().decode()[-2000:]}", file=sys.stderr)
        stderr.close()


@contextlib.contextmanager
def spawned(argv: list[str]) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        terminate(proc)


async def until_ready(url: str) -> None:
    """One MCP request; it waits in the accept backlog until the server is up (60 s at most)."""
    with anyio.fail_after(60):
        async with mcp.Client(url) as client:
            await client.list_tools()


def serve(kind: str, argv: Sequence[str]) -> None:
    """Child side of `http_server` (and, without `--fd`, our server over stdio)."""
    import uvicorn

    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.echo_servers {kind}")
    parser.add_argument("--fd", type=int, default=None)
    parser.add_argument("--loop", default="auto")
    parser.add_argument("--http-impl", default="auto")
    parser.add_argument("--response", choices=("json", "sse"), default="json" if kind == "ours" else "sse")
    args = parser.parse_args(argv)
    if args.fd is None:
        mcpgym.run(UnboundedEcho, [])  # stdio, exactly as `python -m mcpgym.servers.echo` runs
        return
    json_response = args.response == "json"
    if kind == "ours":
        app = mcpgym.GymServer(UnboundedEcho).http_app(json_response=json_response)
    else:
        app = bare_server().streamable_http_app(json_response=json_response)
    # The settings of GymServer.serve_http / MCPServer.run (at WARNING), plus the loop choice.
    config = uvicorn.Config(app, log_level="warning", loop=args.loop, http=args.http_impl)
    uvicorn.Server(config).run(sockets=[socket.socket(fileno=args.fd)])


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
