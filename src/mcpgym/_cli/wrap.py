"""`mcpgym wrap [options] -- COMMAND`: serve any MCP server as an environment.

Layer: CLI, over `mcpgym.wrapping` (imported when the command runs).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mcpgym._cli.options import load_object
from mcpgym._cli.serve import add_serve_options, serve
from mcpgym._episode.environment import Environment

NAME = "wrap"

_WRAP_EPILOG = """\
COMMAND starts the MCP server to wrap (stdio); an argument {workspace} becomes each episode's
own directory. Each episode runs a fresh instance under the sandbox. Tasks: one JSON object per
line, {"id", "prompt", "files": {path: text}, "verify": {"files": {path: {"equals"|"contains"|
"excludes"|"matches": ...}}, "absent": [path], "only": [glob]}, "partial", "network", "data"}.

examples:
  mcpgym wrap --tasks tasks.jsonl -- npx @modelcontextprotocol/server-filesystem {workspace}
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
    add_serve_options(wrap)


def dispatch(args: argparse.Namespace) -> None:
    serve(_wrapped(args), args)


def _wrapped(args: argparse.Namespace) -> type[Environment]:
    from mcpgym.wrapping import TaskFileError, wrap

    try:
        return wrap(
            args.wrapped,
            tasks=args.tasks,
            rubric=load_object(args.rubric) if args.rubric else None,
            tools=[t for t in args.tools.split(",") if t] if args.tools else None,
            warm=args.warm,
            isolation=args.isolation,
            max_steps=args.max_steps,
            call_timeout=args.wrapped_timeout,
            finish_tool=args.finish_tool,
            server_requests=args.server_requests,
        )
    except (TaskFileError, ValueError, RuntimeError) as exc:
        sys.exit(f"mcpgym wrap: {exc}")
