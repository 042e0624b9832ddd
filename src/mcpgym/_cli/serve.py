"""`mcpgym serve`, and `mcpgym.run(Env)` behind `python -m mcpgym.servers.NAME`: the serving flags.

Layer: CLI. Parses flags and calls the server's public API.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from mcpgym._cli.options import EPILOG
from mcpgym._core.extras import MissingExtra
from mcpgym._episode.environment import Environment
from mcpgym._episode.sampler import SamplerConfig
from mcpgym._server.gym_server import GymServer
from mcpgym._server.http import DEFAULT_MAX_BODY_BYTES, WILDCARD
from mcpgym._server.http_guard import DEFAULT_HEADER_TIMEOUT
from mcpgym._targets.connect import load_environment
from mcpgym._targets.spec import RunSpec, spec_target

NAME = "serve"


def register(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve an Environment class over stdio or HTTP",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument(
        "env",
        metavar="ENV",
        help="the Environment: mcpgym.servers.echo:Echo, mcpgym.servers.echo (its one class), path/to/env.py, "
        "or a run spec",
    )
    add_serve_options(serve)


def dispatch(args: argparse.Namespace, spec: RunSpec | None = None) -> None:
    env = spec_environment(args.env, spec) if spec is not None else load(args.env)
    serve(env, args)  # a failure while serving keeps its traceback


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default: %(default)s, loopback only)")
    parser.add_argument("--port", type=int, default=8000, help="HTTP port; 0 picks a free one (default: %(default)s)")
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="Host header to accept besides loopback (DNS-rebinding protection); repeatable",
    )
    parser.add_argument(
        "--max-episodes",
        type=int,
        default=parser.get_default("max_episodes") or 10_000,  # an environment's parser may set its own
        help="live episodes before new ones are refused (%(default)s)",
    )
    parser.add_argument(
        "--idle-timeout", type=float, default=900.0, help="seconds before an idle episode is closed (%(default)s)"
    )
    parser.add_argument(
        "--record", metavar="DIR", default=None, help="record every episode (any client) as JSONL under DIR"
    )
    parser.add_argument(
        "--call-timeout", type=float, default=300.0, help="seconds before a tool call fails as timed out (%(default)s)"
    )
    parser.add_argument(
        "--hide-rewards",
        action="store_true",
        help="leave the reward stamp out of results sent to plain agents (they are still recorded)",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("MCPGYM_TOKEN"),
        help="require 'Authorization: Bearer TOKEN' on HTTP (default: $MCPGYM_TOKEN; unset: no auth)",
    )
    parser.add_argument(
        "--stateless-agents",
        action="store_true",
        help="let agents that never reset use the 2026-07-28 stateless HTTP wire, where each of their tool calls "
        "is an episode of its own (default: they are kept on session-based HTTP, one episode per session)",
    )
    parser.add_argument(
        "--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES, help="largest HTTP request body (%(default)s)"
    )
    parser.add_argument(
        "--web", action="store_true", help="with --http: also serve a page at /web to play episodes in a browser"
    )
    parser.add_argument(
        "--openenv",
        action="store_true",
        help="with --http: also serve OpenEnv's API (/ws, /reset, /step, /state, /health, /schema, /metadata) "
        "so OpenEnv's own clients drive episodes; needs mcpgym[openenv]",
    )
    parser.add_argument(
        "--curriculum",
        choices=["uniform", "learnability"],
        default="uniform",
        help="the task sampler for resets that ask for a drawn task (docs/curriculum.md; %(default)s)",
    )
    parser.add_argument("--explore", type=float, default=0.1, help="learnability: share of uniform draws (%(default)s)")
    parser.add_argument("--decay", type=float, default=0.9, help="learnability: an old outcome's weight (%(default)s)")
    parser.add_argument("--curriculum-seed", type=int, default=None, help="seeds the sampler's draws")
    parser.add_argument(
        "--header-timeout",
        type=float,
        default=DEFAULT_HEADER_TIMEOUT,
        help="seconds a client has to send a request's headers before it is disconnected (%(default)s)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=None,
        help="open HTTP connections at most; past it, ones still sending headers are dropped first "
        "(default: the open-file limit less a reserve)",
    )


def serve(env: type[Environment] | functools.partial[Any], args: argparse.Namespace) -> None:
    server = GymServer(
        env,
        max_episodes=args.max_episodes,
        idle_timeout=args.idle_timeout,
        record=args.record,
        call_timeout=args.call_timeout,
        reveal_rewards=not args.hide_rewards,
        curriculum=_sampler(args),
    )
    if args.web and not args.http:
        sys.exit("mcpgym: --web needs --http (the page is served next to /mcp)")
    if args.openenv and not args.http:
        sys.exit("mcpgym: --openenv needs --http (OpenEnv's API is served next to /mcp)")
    if not args.http:
        _serve_stdio(server)
        return

    if args.host in WILDCARD and not args.allowed_host:
        print(
            f"warning: binding {args.host or 'all interfaces'}, but only loopback Host headers are accepted "
            "(DNS-rebinding protection); add --allowed-host NAME[:PORT] for the names clients use",
            file=sys.stderr,
        )
    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.token:
        print(
            f"warning: serving {args.host or 'all interfaces'} without --token (or MCPGYM_TOKEN): anyone who "
            "can reach the port can drive episodes",
            file=sys.stderr,
        )

    def ready(base_url: str) -> None:
        print(f"serving {server.env_cls.__name__} on {base_url}/mcp", file=sys.stderr, flush=True)
        if args.web:
            print(f"web page on {base_url}/web", file=sys.stderr, flush=True)
        if args.openenv:
            print(
                f"OpenEnv API on {base_url} (WebSocket {base_url.replace('http', 'ws', 1)}/ws)",
                file=sys.stderr,
                flush=True,
            )

    options = {
        "allowed_hosts": args.allowed_host,
        "token": args.token,
        "max_body_bytes": args.max_body_bytes,
        "web": args.web,
        "stateless_agents": args.stateless_agents,
        "openenv": args.openenv,
        "header_timeout": args.header_timeout,
        "max_connections": args.max_connections,
    }
    try:
        stopped_by = anyio.run(lambda: server.serve_http(args.host, args.port, on_ready=ready, **options))
    except OSError as exc:  # the port is taken, or the address is not ours: one line, not a traceback
        sys.exit(f"mcpgym: {exc.strerror or exc}")
    except MissingExtra as exc:  # --openenv without its extra
        sys.exit(f"mcpgym: {exc}")
    if stopped_by is not None:
        sys.exit(128 + stopped_by)  # the conventional status, after a clean exit (atexit handlers run)


def _serve_stdio(server: GymServer) -> None:
    """Serve stdio; on a terminal, first say so (silence there looks like a hang: a person ran
    it, and an MCP client, which pipes stdin, never sees the line)."""
    if not sys.stdin.isatty():
        anyio.run(server.run_stdio)
        return
    name = server.env_cls.__name__
    print(f"serving {name} over stdio: waiting for an MCP client; Ctrl-C to stop", file=sys.stderr, flush=True)
    try:
        anyio.run(server.run_stdio)
    except KeyboardInterrupt:
        sys.exit(130)


def run(
    env: type[Environment],
    argv: Sequence[str] | None = None,
    *,
    parser: argparse.ArgumentParser | None = None,
    configure: Callable[[argparse.Namespace], functools.partial[Any]] | None = None,
) -> None:
    """Serve `env` from a `__main__`: stdio by default, `--http --port N` for streamable HTTP.

    An environment with flags of its own passes a `parser` holding them (the serve flags are
    added to it) and `configure`, which turns the parsed flags into the per-episode factory,
    e.g. `lambda args: functools.partial(Coding, tasks=args.tasks)`.
    """
    if parser is None:
        parser = argparse.ArgumentParser(
            prog=f"python -m {env.__module__}",
            description=f"Serve the {env.__name__} environment as an MCP server (stdio by default).",
        )
    add_serve_options(parser)
    args = parser.parse_args(argv)
    serve(configure(args) if configure is not None else env, args)


def spec_environment(path: str, spec: RunSpec) -> Any:
    try:
        env = spec_target(spec)
    except (ImportError, AttributeError, TypeError) as exc:
        sys.exit(f"mcpgym: {path}: cannot load environment {spec.environment}: {exc}")
    if isinstance(env, str):
        sys.exit(f"mcpgym: {path}: `mcpgym serve` serves an environment class: set environment: MODULE:CLASS")
    return env


def _sampler(args: argparse.Namespace) -> SamplerConfig:
    try:
        return SamplerConfig(sampler=args.curriculum, explore=args.explore, decay=args.decay, seed=args.curriculum_seed)
    except ValueError as exc:
        sys.exit(f"mcpgym: --curriculum: {exc}")


def load(path: str) -> type[Environment]:
    try:
        return load_environment(path)
    except (ImportError, AttributeError, TypeError) as exc:
        sys.exit(f"mcpgym: cannot load {path}: {exc}")
