"""OpenEnv, both ways: its clients against any mcpgym server, its environments as mcpgym environments.

- Serving: `mcpgym serve ENV --http --openenv` (or `python -m mcpgym.servers.NAME --http
  --openenv`) adds OpenEnv's HTTP and WebSocket API beside `/mcp` (`_serve`), so OpenEnv's own
  `MCPToolClient` and `GenericEnvClient` drive mcpgym episodes unchanged.
- Importing: the target `openenv:URL` (a running OpenEnv server) or `openenv:module:Class` (an
  OpenEnv environment class, started in an interpreter that has `openenv`) is an mcpgym
  environment whose tools are its tools (`_environment`).

The `openenv` package itself never runs in mcpgym's process: it needs the MCP SDK 1.x, mcpgym
2.x. Both directions speak OpenEnv's wire protocol instead (`_wire`). rfcs/0017-bridges.md.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpgym._targets.target import ParsedTarget

__all__ = ["FORMS", "PYTHON_VARIABLE"]  # `target`: the scheme's hook (SCHEMES), not a public name

PYTHON_VARIABLE = "MCPGYM_OPENENV_PYTHON"
"""The interpreter (one with `openenv` installed) that runs OpenEnv environment classes."""

FORMS = """\
  openenv:http://host:port             a running OpenEnv server (http(s):// or ws(s)://)
  openenv:package.module:Class         an OpenEnv environment class, served by OpenEnv's own server
  openenv:path/to/env.py:Class         in an interpreter that has `openenv`: ?python=PATH or $MCPGYM_OPENENV_PYTHON
  options after `?` (or a run spec's args): python, action=module:Class, observation=module:Class,
  max_sessions=N, token=TOKEN (sent as a bearer token to a running server)"""


def target(rest: str, args: dict[str, Any]) -> ParsedTarget:
    """The `openenv:` scheme of the target grammar (`mcpgym._targets.target.SCHEMES`)."""
    from mcpgym._targets.target import ParsedTarget

    spec, _, query = rest.partition("?")
    options = {**dict(part.partition("=")[::2] for part in query.split("&") if part), **args}
    text = f"openenv:{rest}"
    cls = _resolve(spec.strip(), tuple(sorted((k, str(v)) for k, v in options.items())))
    return ParsedTarget("environment", cls, spec=text)


@functools.cache
def _resolve(spec: str, options: tuple[tuple[str, str], ...]) -> type[Any]:
    """One class per target (a server launched for a class is launched once per process)."""
    from mcpgym._targets.target import TargetError
    from mcpgym.bridges.openenv._environment import environment_class

    given = dict(options)
    unknown = set(given) - {"python", "action", "observation", "max_sessions", "token"}
    if unknown:
        raise TargetError(f"openenv:{spec}: unknown option(s) {', '.join(sorted(unknown))}\n{FORMS}", forms=False)
    headers = {"Authorization": f"Bearer {given['token']}"} if "token" in given else None
    if spec.startswith(("http://", "https://", "ws://", "wss://")):
        url = spec
    elif ":" in spec:
        url = _launch(spec, given)
    else:
        raise TargetError(f"openenv:{spec} names neither a server URL nor MODULE:CLASS\n{FORMS}", forms=False)
    try:
        return environment_class(url, headers=headers)
    except RuntimeError as exc:
        raise TargetError(f"openenv:{spec}: {exc}", forms=False) from exc


def _launch(spec: str, given: dict[str, str]) -> str:
    """Serve the OpenEnv class `spec` with OpenEnv's server in the interpreter that has `openenv`;
    stopped when this process exits. Its base URL."""
    from mcpgym._cli.process import ServerProcess
    from mcpgym._targets.target import TargetError

    python = given.get("python") or os.environ.get(PYTHON_VARIABLE)
    if not python:
        raise TargetError(
            f"openenv:{spec} runs in an interpreter that has the openenv package (it cannot share mcpgym's): "
            f"name it, openenv:{spec}?python=/path/to/venv/bin/python, or set ${PYTHON_VARIABLE}",
            forms=False,
        )
    where, _, attr = spec.rpartition(":")
    if where.endswith(".py"):
        where = str(Path(where).resolve())
    argv = [python, str(Path(__file__).with_name("_launch.py")), f"{where}:{attr}"]
    for option in ("action", "observation", "max_sessions"):
        if option in given:
            argv += [f"--{option.replace('_', '-')}", given[option]]
    server = ServerProcess(argv)
    try:
        server.start()
    except (RuntimeError, OSError) as exc:
        raise TargetError(f"openenv:{spec}: the OpenEnv server did not start: {exc}", forms=False) from exc
    atexit.register(server.stop)
    print(f"mcpgym: openenv:{spec} served by OpenEnv at {server.url.removesuffix('/mcp')}", file=sys.stderr)
    return server.url.removesuffix("/mcp")
