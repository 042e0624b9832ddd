"""Serve one OpenEnv environment class with OpenEnv's own server, on a free loopback port.

Layer: a program of its own. mcpgym runs this file (by path) with an interpreter that has the
`openenv` package, never in mcpgym's process: it imports only the standard library, `openenv`
and `uvicorn` (an OpenEnv dependency), and nothing from mcpgym. Once listening it prints the
banner mcpgym's `ServerProcess` waits for, `serving NAME on http://127.0.0.1:PORT/mcp`.

    python _launch.py package.module:Class | path/to/env.py:Class
        [--action module:Class] [--observation module:Class] [--max-sessions N]

The action and observation models default to what the class declares: `MCPEnvironment`
subclasses take OpenEnv's `CallToolAction`; others name theirs as the type arguments of
`Environment[Action, Observation, State]`.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import os
import socket
import sys
import typing
from pathlib import Path
from typing import Any


def load(spec: str) -> Any:
    """`package.module:Attr` or `path/to/file.py:Attr`."""
    where, _, attr = spec.rpartition(":")
    if not where or not attr:
        raise SystemExit(f"openenv launcher: name a class as MODULE:CLASS or FILE.py:CLASS, not {spec!r}")
    if where.endswith(".py"):
        path = Path(where).resolve()
        sys.path.insert(0, str(path.parent))
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        if module_spec is None or module_spec.loader is None:
            raise SystemExit(f"openenv launcher: cannot load {path}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[path.stem] = module
        module_spec.loader.exec_module(module)
    else:
        sys.path.insert(0, os.getcwd())  # as `python -m` has it (this file's own folder is first otherwise)
        module = importlib.import_module(where)
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def declared_models(env_cls: Any) -> tuple[type, type]:
    """The (action, observation) classes `env_cls` declares."""
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.mcp_environment import MCPEnvironment
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation

    if issubclass(env_cls, MCPEnvironment):
        return CallToolAction, CallToolObservation
    for klass in env_cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            if typing.get_origin(base) is Environment:
                args = [a for a in typing.get_args(base) if inspect.isclass(a)]
                if len(args) >= 2:
                    return args[0], args[1]
    hints = typing.get_type_hints(env_cls.step)
    action, observation = hints.get("action"), hints.get("return")
    if inspect.isclass(action) and inspect.isclass(observation):
        return action, observation
    raise SystemExit(
        f"openenv launcher: {env_cls.__name__} declares no Action and Observation types "
        "(subclass Environment[Action, Observation, State], or pass --action and --observation)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve an OpenEnv environment class (for mcpgym's openenv: target)")
    parser.add_argument("env")
    parser.add_argument("--action")
    parser.add_argument("--observation")
    parser.add_argument("--max-sessions", type=int, default=64)
    args = parser.parse_args()

    import uvicorn
    from openenv.core.env_server.http_server import create_fastapi_app

    env_cls = load(args.env)
    action, observation = declared_models(env_cls)
    action = load(args.action) if args.action else action
    observation = load(args.observation) if args.observation else observation
    # OpenEnv's own rule: only a class that says it is safe gets more than one session at once.
    sessions = args.max_sessions if getattr(env_cls, "SUPPORTS_CONCURRENT_SESSIONS", False) else 1
    app = create_fastapi_app(env_cls, action, observation, max_concurrent_envs=sessions)
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning")
    print(f"serving {env_cls.__name__} on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
