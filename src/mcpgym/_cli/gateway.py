"""`mcpgym gateway`: an OpenAI-compatible proxy in front of an engine that records token-faithful traces.

Layer: CLI (parses flags, runs `mcpgym.gateway.serve`).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from typing import Any

import anyio

NAME = "gateway"
_EPILOG = """\
example (vLLM on port 8000; point the harness's --base-url at the gateway):
  mcpgym gateway --upstream http://127.0.0.1:8000/v1 --record runs/traces
  mcpgym rollout mcpgym.servers.echo:Echo --model M --base-url http://127.0.0.1:8100/v1

A call joins an episode by its path (/episodes/<id>/v1/...), its Mcpgym-Episode header (mcpgym rollout
sends it), or a per-episode key registered with POST /mcpgym/keys. Read the traces with
mcpgym.read_traces(DIR).
"""

SLOW_PARSER = (
    "mcpgym gateway: {missing} not installed, so each model call costs up to ~0.3 ms more CPU here (pure-Python "
    "HTTP parsing, aiohttp to the engine, standard-library JSON; docs/traces.md, 'Cost'); "
    "pip install 'mcpgym[fast]' (httptools, orjson, uvloop) to avoid it"
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "gateway",
        help="proxy an OpenAI-compatible engine and record the tokens the model generated, per episode",
        description="An OpenAI-compatible reverse proxy (/v1/chat/completions, /v1/messages, /v1/models) that asks "
        "the engine for token ids and logprobs and records every call per episode under --record.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--upstream", required=True, metavar="URL", help="the engine's base URL, e.g. http://127.0.0.1:8000/v1"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (%(default)s; loopback only unless told)")
    p.add_argument("--port", type=int, default=8100, help="port to listen on (%(default)s; 0: a free one)")
    p.add_argument("--record", default=None, metavar="DIR", help="append every call to DIR/<episode>.jsonl")
    p.add_argument(
        "--token", default=None, help="clients must send 'Authorization: Bearer TOKEN' (or a registered key)"
    )
    p.add_argument(
        "--engine",
        choices=("vllm", "sglang", "none"),
        default="vllm",
        help="whose request fields ask for token ids and logprobs (%(default)s; none: ask for nothing)",
    )
    p.add_argument(
        "--upstream-key-env",
        default=None,
        metavar="VAR",
        help="send the engine 'Authorization: Bearer $VAR' (a key is never taken on the command line)",
    )
    p.add_argument(
        "--forward-key", action="store_true", help="send the client's own Authorization header to the engine"
    )
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the engine (%(default)s)")


def dispatch(args: argparse.Namespace) -> None:
    from mcpgym.gateway import GatewayConfig, serve

    upstream_key = None
    if args.upstream_key_env:
        upstream_key = os.environ.get(args.upstream_key_env)
        if not upstream_key:
            sys.exit(f"mcpgym: --upstream-key-env {args.upstream_key_env} is not set")
    config = GatewayConfig(
        upstream=args.upstream,
        engine=args.engine,
        record=args.record,
        token=args.token,
        upstream_key=upstream_key,
        forward_key=args.forward_key,
        timeout=args.timeout,
    )

    def ready(url: str) -> None:
        where = f"; recording under {args.record}" if args.record else ""
        print(f"mcpgym gateway: {url}/v1 -> {args.upstream}{where}", file=sys.stderr, flush=True)
        missing = [name for name in ("httptools", "orjson") if importlib.util.find_spec(name) is None]
        if missing:  # the largest costs we measured (docs/traces.md, "Cost")
            are = " and ".join(missing) + (" are" if len(missing) > 1 else " is")
            print(SLOW_PARSER.format(missing=are), file=sys.stderr, flush=True)

    try:
        # uvloop when installed (the `fast` extra): every model call crosses two sockets here.
        options = {"use_uvloop": True} if importlib.util.find_spec("uvloop") else {}
        signal = anyio.run(lambda: serve(config, args.host, args.port, on_ready=ready), backend_options=options)
    except (OSError, ValueError) as exc:
        sys.exit(f"mcpgym: {exc}")
    sys.exit(128 + signal if signal else 0)
