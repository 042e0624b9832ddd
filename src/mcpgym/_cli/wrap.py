"""`mcpgym wrap [options] -- COMMAND`: serve any MCP server as an environment.

Layer: CLI, over `mcpgym.wrapping` (imported when the command runs).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from mcpgym._cli.options import load_object
from mcpgym._cli.serve import add_serve_options, serve
from mcpgym._episode.environment import Environment

NAME = "wrap"

_WRAP_EPILOG = """\
COMMAND starts the MCP server to wrap (stdio); an argument {workspace} becomes each episode's
own directory ({instance}: a name unique to the instance). Each episode runs a fresh instance
under the sandbox, which has no network: install the server first (npm install, a virtualenv),
then run what was installed; its interpreter and packages are found and shown to it read-only.
Tasks: one JSON object per line, {"id", "prompt", "files": {path: text}, "setup": [shell command],
"verify": {"files": {path: {"equals"|"contains"|"excludes"|"matches": ...}}, "absent": [path],
"only": [glob]}, "partial", "network", "data"}; files and set-up commands are in place before
the server starts.

examples:
  npm install @modelcontextprotocol/server-filesystem
  mcpgym wrap --tasks tasks.jsonl -- node_modules/.bin/mcp-server-filesystem {workspace}
  mcpgym wrap --env MEMORY_FILE_PATH={workspace}/memory.jsonl -- node_modules/.bin/mcp-server-memory
  python -m venv git-env && git-env/bin/pip install mcp-server-git
  mcpgym wrap --tasks git.jsonl -- git-env/bin/mcp-server-git --repository {workspace}
  mcpgym wrap --tasks tasks.jsonl --http --warm 4 --tools read_text_file,write_file -- node fs.js {workspace}
"""


def register(sub: Any) -> None:
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
        "--ro-bind",
        action="append",
        default=[],
        metavar="PATH",
        help="a host path the server may read (repeatable; its own installation is found for it)",
    )
    wrap.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an environment variable for the server (repeatable; VALUE may hold {workspace}, {instance})",
    )
    wrap.add_argument(
        "--network", action="store_true", help='let every episode\'s server reach the network (a task: "network")'
    )
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
    wrap.add_argument(
        "--server-requests",
        choices=["forward", "refuse"],
        default="forward",
        help="the server's sampling/elicitation/roots requests: to the driving client, or refused (forward)",
    )
    wrap.add_argument(
        "--verbose",
        action="store_true",
        help="show each wrapped server's stderr (quiet by default: quoted only when a server fails to start)",
    )
    add_serve_options(wrap)


def dispatch(args: argparse.Namespace) -> None:
    serve(_wrapped(args), args)


def _wrapped(args: argparse.Namespace) -> type[Environment]:
    import anyio

    from mcpgym.wrapping import TaskFileError, prepare, wrap

    try:
        sandbox = _sandbox(args)
        env = wrap(
            args.wrapped,
            tasks=args.tasks,
            rubric=load_object(args.rubric) if args.rubric else None,
            tools=[t for t in args.tools.split(",") if t] if args.tools else None,
            warm=args.warm,
            sandbox=sandbox,
            max_steps=args.max_steps,
            call_timeout=args.wrapped_timeout,
            finish_tool=args.finish_tool,
            server_requests=args.server_requests,
            show_stderr=args.verbose,
        )
        anyio.run(prepare, env)  # a server that cannot start is said here, before serving
    except (TaskFileError, ValueError, RuntimeError) as exc:
        sys.exit(f"mcpgym wrap: {exc}")
    return env


def _sandbox(args: argparse.Namespace) -> Any:
    from mcpgym.wrapping import Sandbox

    env: dict[str, str] = {}
    for item in args.env:
        key, eq, value = item.partition("=")
        if not eq or not key or not key.replace("_", "a").isalnum():
            raise ValueError(f"--env {item!r}: expected KEY=VALUE")
        env[key] = value
    paths = []
    for path in args.ro_bind:
        if not os.path.exists(path):
            raise ValueError(f"--ro-bind {path}: no such file or directory")
        paths.append(os.path.abspath(path))
    return Sandbox(isolation=args.isolation, read_only=tuple(paths), env=env, network=args.network)
