"""The `mcpgym` command line, and `mcpgym.run(Env)` behind `python -m mcpgym.servers.NAME`.

Layer: top. Only parses arguments and calls the public API.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import pathlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from mcpgym import _rescore
from mcpgym._check import check_environment
from mcpgym._commands import command_owner, register_all
from mcpgym._connect import connect, load_environment
from mcpgym._environment import Environment
from mcpgym._errors import MCPError
from mcpgym._http import DEFAULT_MAX_BODY_BYTES, WILDCARD, serve_http
from mcpgym._http_guard import DEFAULT_HEADER_TIMEOUT
from mcpgym._server import GymServer
from mcpgym._spec import RunSpec, SpecError, is_spec, load_spec, spec_defaults, spec_target
from mcpgym._target import FORMS
from mcpgym._types import UNKNOWN_TOOL_INFO

_TARGETS = f"""\
TARGET is what to talk to (modules are found from the working directory, as with `python -m`):
{FORMS}
"""

_EPILOG = f"""\
{_TARGETS}
examples:
  mcpgym serve mcpgym.servers.echo:Echo                     # stdio (what Claude Desktop / Claude Code launch)
  mcpgym serve mcpgym.servers.echo:Echo --http --port 8000  # streamable HTTP on http://127.0.0.1:8000/mcp
  mcpgym tools mcpgym.servers.echo:Echo
  mcpgym call "python -m mcpgym.servers.echo" echo_message '{{"message": "hi"}}'
  mcpgym check mcpgym.servers.echo:Echo
  mcpgym serve mcpgym.servers.echo:Echo --http --web        # and a page to play it at http://127.0.0.1:8000/web
  mcpgym view runs/                                         # review --record dirs and rollout --out files
  mcpgym init my-env                                        # a new environment package, tests included
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


def add_client_options(parser: argparse.ArgumentParser) -> None:
    """How a client authenticates to an HTTP target (`tools`, `call`, `rollout`)."""
    parser.add_argument(
        "--token",
        default=os.environ.get("MCPGYM_TOKEN"),
        help="send 'Authorization: Bearer TOKEN' to an HTTP target (default: $MCPGYM_TOKEN, as `serve` reads it)",
    )
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header to send to an HTTP target (e.g. for a proxy); repeatable",
    )


def client_headers(args: argparse.Namespace) -> dict[str, str]:
    """The headers `add_client_options` asked for (`--header` wins over `--token`)."""
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    for line in args.header:
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise SystemExit(f"mcpgym: --header {line!r} is not 'NAME: VALUE'")
        headers[name.strip()] = value.strip()
    return headers


def _serve(env: type[Environment] | functools.partial[Any], args: argparse.Namespace) -> None:
    server = GymServer(
        env,
        max_episodes=args.max_episodes,
        idle_timeout=args.idle_timeout,
        record=args.record,
        call_timeout=args.call_timeout,
        reveal_rewards=not args.hide_rewards,
    )
    if args.web and not args.http:
        sys.exit("mcpgym: --web needs --http (the page is served next to /mcp)")
    if not args.http:
        anyio.run(server.run_stdio)
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

    options = {
        "allowed_hosts": args.allowed_host,
        "token": args.token,
        "max_body_bytes": args.max_body_bytes,
        "web": args.web,
        "stateless_agents": args.stateless_agents,
        "header_timeout": args.header_timeout,
        "max_connections": args.max_connections,
    }
    try:
        stopped_by = anyio.run(lambda: server.serve_http(args.host, args.port, on_ready=ready, **options))
    except OSError as exc:  # the port is taken, or the address is not ours: one line, not a traceback
        sys.exit(f"mcpgym: {exc.strerror or exc}")
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


def _parser(defaults: dict[str, dict[str, Any]] | None = None) -> argparse.ArgumentParser:
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
    serve.add_argument(
        "env",
        metavar="ENV",
        help="the Environment: mcpgym.servers.echo:Echo, mcpgym.servers.echo (its one class), path/to/env.py, "
        "or a run spec",
    )
    _add_serve_options(serve)

    tools = sub.add_parser(
        "tools", help="list a target's tools", epilog=_TARGETS, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    tools.add_argument("target", metavar="TARGET")
    tools.add_argument("--json", action="store_true", help="print the full tools/list entries as JSON")
    add_client_options(tools)

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
    add_client_options(call)

    check = sub.add_parser("check", help="validate an Environment class and report what is wrong")
    check.add_argument("env", metavar="ENV", help="mcpgym.servers.echo:Echo, mcpgym.servers.echo, or path/to/env.py")

    view = sub.add_parser("view", help="review recorded runs in a browser (--record dirs, rollout --out files)")
    view.add_argument("runs", metavar="RUNS", nargs="+", help="directories and JSONL files to show")
    view.add_argument("--host", default="127.0.0.1", help="bind address (default: %(default)s, loopback only)")
    view.add_argument("--port", type=int, default=8080, help="port; 0 picks a free one (default: %(default)s)")
    view.add_argument("--allowed-host", action="append", default=[], metavar="HOST[:PORT]")
    view.add_argument("--token", default=os.environ.get("MCPGYM_TOKEN"), help="require this bearer token")
    init = sub.add_parser(
        "init", help="create a new environment package: module, tests, README, Dockerfile, server.json"
    )
    init.add_argument("name", metavar="NAME", help="e.g. my-env: package my_env, class MyEnv, directory ./my-env")
    init.add_argument(
        "--dir", default=None, help="where to write it (default: ./NAME); existing files are never replaced"
    )
    init.add_argument("--namespace", default="io.github.example", help="MCP registry namespace (%(default)s)")
    _wrap_command(sub)
    _rescore.register(sub)
    register_all(sub)  # rollout, harness, ...: added by the packages built on mcpgym (entry points)
    for command, values in (defaults or {}).items():  # a run spec's settings, under the flags given
        sub.choices[command].set_defaults(**values)
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
    from mcpgym.wrapping import TaskFileError, wrap

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


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"mcpgym: {what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise SystemExit(f"mcpgym: {what} must be a JSON object, got {type(value).__name__}")
    return value


async def _tools(target: str, as_json: bool, headers: dict[str, str]) -> None:
    async with connect(target, headers=headers) as env:
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
    async with connect(args.target, headers=client_headers(args)) as env:
        await env.reset(seed=args.seed, options=options)
        result = await env.call_tool(args.tool, arguments)
    if UNKNOWN_TOOL_INFO in result.info:  # a typo on the command line: one line, not a result dump
        raise SystemExit(f"mcpgym: {result.text}")
    body = result.observation.model_dump(mode="json", by_alias=True, exclude_none=True)
    print(json.dumps(body, indent=2))
    flags = f"done={result.done} terminated={result.terminated} truncated={result.truncated}"
    components = f" components={json.dumps(result.components)}" if result.components else ""
    print(f"reward={result.reward} {flags}{components}", file=sys.stderr)
    return 1 if result.is_error else 0


def main(argv: Sequence[str] | None = None) -> None:
    if "" not in sys.path and "." not in sys.path and os.getcwd() not in sys.path:
        # Once, here, as `python -m` does: a command line names modules in the working directory.
        sys.path.insert(0, "")
    args = _parser().parse_args(argv)
    spec = _spec_of(args)
    if spec is not None:  # parse again with the spec's settings as defaults: flags given still win
        args = _parser({args.command: spec_defaults(args.command, spec)}).parse_args(argv)
    if args.command == "serve":
        env = _spec_environment(args.env, spec) if spec is not None else _load(args.env)
        _serve(env, args)  # outside the handlers below: a failure while serving keeps its traceback
        return
    if args.command == "view":
        _view(args)
        return
    if args.command == "wrap":
        _serve(_wrapped(args), args)
        return
    try:
        if (plugin := command_owner(args.command)) is not None:
            plugin.dispatch(args)
        elif args.command == "tools":
            anyio.run(_tools, args.target, args.json, client_headers(args))
        elif args.command == "call":
            sys.exit(anyio.run(_call, args))
        elif args.command == "init":
            sys.exit(_init(args))
        elif args.command == "rescore":
            sys.exit(_rescore.command(args))
        elif args.command == "check":
            problems = check_environment(_load(args.env), raise_on_error=False)
            for problem in problems:
                print(f"- {problem}")
            print(f"{args.env}: {'OK' if not problems else f'{len(problems)} problem(s)'}")
            sys.exit(1 if problems else 0)
    except MCPError as exc:
        sys.exit(f"mcpgym: {exc.message}")
    except SpecError as exc:
        sys.exit(f"mcpgym: {exc}")
    except (ImportError, AttributeError, TypeError, ValueError) as exc:  # a target that cannot be loaded
        sys.exit(f"mcpgym: {exc}")


def _view(args: argparse.Namespace) -> None:
    from mcpgym.web import VIEW_PATH, view_app

    missing = [p for p in args.runs if not os.path.exists(p)]
    if missing:
        sys.exit(f"mcpgym: no such file or directory: {', '.join(missing)}")
    app = view_app(args.runs, host=args.host, allowed_hosts=args.allowed_host, token=args.token)

    def ready(base_url: str) -> None:
        print(f"viewing {', '.join(args.runs)} on {base_url}{VIEW_PATH}", file=sys.stderr, flush=True)

    stopped_by = anyio.run(lambda: serve_http(app, args.host, args.port, on_ready=ready))
    if stopped_by is not None:
        sys.exit(128 + stopped_by)


def _init(args: argparse.Namespace) -> int:
    from mcpgym._scaffold import ScaffoldError, names, next_steps, scaffold

    root = pathlib.Path(args.dir if args.dir is not None else args.name)
    try:
        scaffold(args.name, root, namespace=args.namespace)
    except ScaffoldError as exc:
        sys.exit(f"mcpgym init: {exc}")
    print(next_steps(root, names(args.name, args.namespace)))
    return 0


def _spec_of(args: argparse.Namespace) -> RunSpec | None:
    target = getattr(args, "env", None) if args.command == "serve" else getattr(args, "target", None)
    if args.command not in ("serve", "rollout") or not is_spec(target):
        return None
    try:
        return load_spec(target)
    except SpecError as exc:
        sys.exit(f"mcpgym: {exc}")


def _spec_environment(path: str, spec: RunSpec) -> Any:
    try:
        env = spec_target(spec)
    except (ImportError, AttributeError, TypeError) as exc:
        sys.exit(f"mcpgym: {path}: cannot load environment {spec.environment}: {exc}")
    if isinstance(env, str):
        sys.exit(f"mcpgym: {path}: `mcpgym serve` serves an environment class: set environment: MODULE:CLASS")
    return env


def _load(path: str) -> type[Environment]:
    try:
        return load_environment(path)
    except (ImportError, AttributeError, TypeError) as exc:
        sys.exit(f"mcpgym: cannot load {path}: {exc}")
