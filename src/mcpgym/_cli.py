"""The `mcpgym` command line, and `mcpgym.run(Env)` behind `python -m servers.NAME`.

Layer: top. Only parses arguments and calls the public API.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from mcpgym._check import check_environment
from mcpgym._connect import connect, load_environment
from mcpgym._environment import Environment
from mcpgym._errors import MCPError
from mcpgym._http import DEFAULT_MAX_BODY_BYTES, WILDCARD
from mcpgym._server import GymServer

_TARGETS = """\
TARGET is what to talk to:
  servers.echo:Echo            an Environment class, run in this process (no transport)
  http://127.0.0.1:8000/mcp    a server over streamable HTTP
  "python -m servers.echo"     a command to launch, spoken to over stdio
"""

_EPILOG = f"""\
{_TARGETS}
examples:
  mcpgym serve servers.echo:Echo                    # stdio (what Claude Desktop / Claude Code launch)
  mcpgym serve servers.echo:Echo --http --port 8000 # streamable HTTP on http://127.0.0.1:8000/mcp
  mcpgym tools servers.echo:Echo
  mcpgym call "python -m servers.echo" echo_message '{{"message": "hi"}}'
  mcpgym check servers.echo:Echo
"""


def _add_serve_options(parser: argparse.ArgumentParser) -> None:
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
        "--max-episodes", type=int, default=10_000, help="live episodes before new ones are refused (%(default)s)"
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
        "--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES, help="largest HTTP request body (%(default)s)"
    )


def _serve(env: type[Environment] | functools.partial[Any], args: argparse.Namespace) -> None:
    server = GymServer(
        env,
        max_episodes=args.max_episodes,
        idle_timeout=args.idle_timeout,
        record=args.record,
        call_timeout=args.call_timeout,
        reveal_rewards=not args.hide_rewards,
    )
    if not args.http:
        anyio.run(server.run_stdio)
        return

    if args.host in WILDCARD and not args.allowed_host:
        print(
            f"warning: binding {args.host or 'all interfaces'}, but only loopback Host headers are accepted "
            "(DNS-rebinding protection); add --allowed-host NAME[:PORT] for the names clients use",
            file=sys.stderr,
        )

    def ready(base_url: str) -> None:
        print(f"serving {server.env_cls.__name__} on {base_url}/mcp", file=sys.stderr, flush=True)

    options = {"allowed_hosts": args.allowed_host, "token": args.token, "max_body_bytes": args.max_body_bytes}
    stopped_by = anyio.run(lambda: server.serve_http(args.host, args.port, on_ready=ready, **options))
    if stopped_by is not None:
        sys.exit(128 + stopped_by)  # the conventional status, after a clean exit (atexit handlers run)


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
    _add_serve_options(parser)
    args = parser.parse_args(argv)
    _serve(configure(args) if configure is not None else env, args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcpgym",
        description="Serve, inspect and call mcpgym environments (MCP servers whose tools are actions).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser(
        "serve",
        help="serve an Environment class over stdio or HTTP",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("env", metavar="MODULE:CLASS", help="the Environment class, e.g. servers.echo:Echo")
    _add_serve_options(serve)

    tools = sub.add_parser(
        "tools", help="list a target's tools", epilog=_TARGETS, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    tools.add_argument("target", metavar="TARGET")
    tools.add_argument("--json", action="store_true", help="print the full tools/list entries as JSON")

    call = sub.add_parser(
        "call",
        help="start an episode and call one tool",
        epilog=_TARGETS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    call.add_argument("target", metavar="TARGET")
    call.add_argument("tool", metavar="TOOL")
    call.add_argument("arguments", metavar="JSON", nargs="?", default="{}", help="the tool's arguments object")
    call.add_argument("--seed", type=int, default=None, help="seed for reset()")
    call.add_argument("--options", default=None, metavar="JSON", help="options object for reset()")

    check = sub.add_parser("check", help="validate an Environment class and report what is wrong")
    check.add_argument("env", metavar="MODULE:CLASS")
    _wrap_command(sub)
    _harness_commands(sub)
    return parser


_WRAP_EPILOG = """\
COMMAND starts the MCP server to wrap (stdio); an argument {workspace} becomes each episode's
own directory. Each episode runs a fresh instance under the sandbox. Tasks: one JSON object per
line, {"id", "prompt", "files": {path: text}, "verify": {"files": {path: {"equals"|"contains"|
"excludes"|"matches": ...}}, "absent": [path], "only": [glob]}, "partial", "network", "data"}.

examples:
  mcpgym wrap --tasks tasks.jsonl -- npx @modelcontextprotocol/server-filesystem {workspace}
  mcpgym wrap --tasks tasks.jsonl --http --warm 4 --tools read_text_file,write_file -- node fs.js {workspace}
"""


def _wrap_command(sub: Any) -> None:
    wrap = sub.add_parser(
        "wrap",
        help="serve any MCP server as an environment: a fresh instance per episode, tasks and rewards",
        usage="mcpgym wrap [options] -- COMMAND [ARGS ...]",
        epilog=_WRAP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    wrap.add_argument("wrapped", nargs="+", metavar="-- COMMAND ARGS", help="the MCP server's command line")
    wrap.add_argument("--tasks", metavar="FILE.jsonl", default=None, help="the tasks episodes draw from")
    wrap.add_argument("--rubric", metavar="MODULE:OBJ", default=None, help="score episodes with this callable")
    wrap.add_argument("--tools", metavar="A,B=C", default=None, help="expose only these tools (B renamed C)")
    wrap.add_argument("--warm", type=int, default=0, metavar="N", help="instances started ahead of resets (0)")
    wrap.add_argument("--isolation", choices=["auto", "bwrap", "none"], default="auto", help="sandbox (auto)")
    wrap.add_argument(
        "--max-steps", type=int, default=32, metavar="N", help="truncate episodes after N calls (%(default)s)"
    )
    wrap.add_argument("--finish-tool", metavar="NAME", default=None, help="a tool that ends and scores the episode")
    wrap.add_argument(
        "--wrapped-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="seconds the wrapped server may take per call (60)",
    )
    _add_serve_options(wrap)


def _wrapped(args: argparse.Namespace) -> type[Environment]:
    from mcpgym._wrap import TaskFileError, wrap

    try:
        return wrap(
            args.wrapped,
            tasks=args.tasks,
            rubric=_load_object(args.rubric) if args.rubric else None,
            tools=[t for t in args.tools.split(",") if t] if args.tools else None,
            warm=args.warm,
            isolation=args.isolation,
            max_steps=args.max_steps,
            call_timeout=args.wrapped_timeout,
            finish_tool=args.finish_tool,
        )
    except (TaskFileError, ValueError, RuntimeError) as exc:
        sys.exit(f"mcpgym wrap: {exc}")


def _load_object(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        sys.exit(f"mcpgym: {spec!r} is not MODULE:OBJECT")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # as for `serve MODULE:CLASS`: modules in the working directory load
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        sys.exit(f"mcpgym: cannot load {spec}: {exc}")


def _harness_commands(sub: Any) -> None:
    """`rollout` and `harness` come from the harness package, imported only when the CLI runs."""
    try:
        from harness import cli as harness_cli
    except ModuleNotFoundError as exc:
        if exc.name != "harness":
            raise
        return  # installed without the harness package: its commands are absent
    harness_cli.register(sub)


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"mcpgym: {what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise SystemExit(f"mcpgym: {what} must be a JSON object, got {type(value).__name__}")
    return value


async def _tools(target: str, as_json: bool) -> None:
    async with connect(target) as env:
        listed = await env.list_tools()
    if as_json:
        print(json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed], indent=2))
        return
    for t in listed:
        params = ", ".join(t.input_schema.get("properties", {}))
        print(f"{t.name}({params})")
        if t.description:
            print(f"    {t.description.splitlines()[0]}")


async def _call(args: argparse.Namespace) -> int:
    arguments = _json_object(args.arguments, "the tool arguments")
    options = _json_object(args.options, "--options") if args.options else None
    async with connect(args.target) as env:
        await env.reset(seed=args.seed, options=options)
        result = await env.call_tool(args.tool, arguments)
    body = result.observation.model_dump(mode="json", by_alias=True, exclude_none=True)
    print(json.dumps(body, indent=2))
    print(f"reward={result.reward} done={result.done} truncated={result.truncated}", file=sys.stderr)
    return 1 if result.is_error else 0


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        _serve(_load(args.env), args)  # outside the handlers below: a failure while serving keeps its traceback
        return
    if args.command == "wrap":
        _serve(_wrapped(args), args)
        return
    try:
        if args.command in ("rollout", "harness"):
            from harness.cli import dispatch

            dispatch(args)
        elif args.command == "tools":
            anyio.run(_tools, args.target, args.json)
        elif args.command == "call":
            sys.exit(anyio.run(_call, args))
        elif args.command == "check":
            problems = check_environment(_load(args.env), raise_on_error=False)
            for problem in problems:
                print(f"- {problem}")
            print(f"{args.env}: {'OK' if not problems else f'{len(problems)} problem(s)'}")
            sys.exit(1 if problems else 0)
    except MCPError as exc:
        sys.exit(f"mcpgym: {exc.message}")
    except (ImportError, AttributeError, TypeError) as exc:  # a target that cannot be loaded
        sys.exit(f"mcpgym: {exc}")


def _load(path: str) -> type[Environment]:
    try:
        return load_environment(path)
    except (ImportError, AttributeError, TypeError) as exc:
        sys.exit(f"mcpgym: cannot load {path}: {exc}")
