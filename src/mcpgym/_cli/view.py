"""`mcpgym view RUNS...`: review recorded runs in a browser.

Layer: CLI, over `mcpgym.web` (imported when the command runs).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import anyio

from mcpgym._server.http import serve_http

NAME = "view"


def register(sub: Any) -> None:
    view = sub.add_parser("view", help="review recorded runs in a browser (--record dirs, rollout --out files)")
    view.add_argument("runs", metavar="RUNS", nargs="+", help="directories and JSONL files to show")
    view.add_argument("--host", default="127.0.0.1", help="bind address (default: %(default)s, loopback only)")
    view.add_argument("--port", type=int, default=8080, help="port; 0 picks a free one (default: %(default)s)")
    view.add_argument("--allowed-host", action="append", default=[], metavar="HOST[:PORT]")
    view.add_argument("--token", default=os.environ.get("MCPGYM_TOKEN"), help="require this bearer token")


def dispatch(args: argparse.Namespace) -> None:
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
