"""`connect(target)`: one entry point, three doors, chosen from the target's shape.

Layer: client facade. Imports the doors; nothing imports it but `__init__` and the CLI.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import shlex
import sys
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from mcp import StdioServerParameters
from mcp.server import Server
from mcp.server.mcpserver import MCPServer

from mcpgym._env import AsyncEnv
from mcpgym._environment import Environment
from mcpgym._inprocess import InProcessEnv
from mcpgym._mcp_env import MCPEnv
from mcpgym._server import GymServer
from mcpgym._spec import is_spec, open_spec


@runtime_checkable
class SupportsConnect(Protocol):
    """Anything that knows how to open an environment client for itself (e.g. `mcpgym.pool.Pool`)."""

    def __mcpgym_connect__(
        self, *, mode: str, read_timeout: float | None, headers: dict[str, str] | None
    ) -> AsyncEnv: ...


Target = (
    SupportsConnect
    | type[Environment]
    | Environment
    | functools.partial[Any]
    | GymServer
    | Server[Any]
    | MCPServer
    | StdioServerParameters
    | str
    | Sequence[str]
)

_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def connect(
    target: Target,
    *,
    mode: str = "auto",
    read_timeout: float | None = None,
    headers: dict[str, str] | None = None,
) -> AsyncEnv:
    """An environment client for `target`; use it as `async with connect(target) as env:`.

    `target` is one of:

    - an object with `__mcpgym_connect__` (e.g. `mcpgym.pool.Pool`: episodes spread over replicas);
    - an `Environment` subclass or `functools.partial(Subclass, **kwargs)` (one fresh instance
      per episode), an instance (shared by its episodes), or an import path
      `"package.module:Class"`: **in-process**, no transport at all;
    - `"http://host:port/mcp"`: MCP streamable HTTP;
    - a command, as a string or argv list (`"python -m servers.echo"`; a leading `python` means
      this interpreter), or `StdioServerParameters`: MCP over the command's stdio;
    - a `GymServer`, or any `mcp.server.Server` / `MCPServer`: MCP over the SDK's in-memory
      transport;
    - a run spec, `"mcpgym.yaml"` (any `.yaml` / `.yml` path): the environment it names, built
      with its `args`.

    Any MCP server works, not only mcpgym ones: without the Gym control plane `reset()` starts
    nothing on the server and steps carry no reward, but every tool is still an action.

    `mode`, `read_timeout` and `headers` apply to the MCP doors (`mode` as in `mcp.Client`).
    """
    if is_spec(target):  # an mcpgym.yaml run spec
        target, headers = open_spec(target, headers)
    if isinstance(target, SupportsConnect) and not inspect.isclass(target):
        return target.__mcpgym_connect__(mode=mode, read_timeout=read_timeout, headers=headers)
    if isinstance(target, str) and _IMPORT_PATH.match(target):
        target = load_environment(target)
    if isinstance(target, Environment | functools.partial) or (
        inspect.isclass(target) and issubclass(target, Environment)
    ):
        return InProcessEnv(target)
    if isinstance(target, GymServer):
        target = target.mcp
    if isinstance(target, str) and target.startswith(("http://", "https://")):
        return MCPEnv(target, mode=mode, read_timeout=read_timeout, headers=headers)
    if isinstance(target, str | list | tuple):
        target = command(target)
    if isinstance(target, StdioServerParameters | Server | MCPServer):
        return MCPEnv(target, mode=mode, read_timeout=read_timeout)
    raise TypeError(f"Cannot connect to {target!r}: see mcpgym.connect's docstring for the accepted targets")


def command(argv: str | Sequence[str]) -> StdioServerParameters:
    """Stdio launch parameters for a command line; a leading `python` runs this interpreter."""
    parts = shlex.split(argv) if isinstance(argv, str) else list(argv)
    if not parts:
        raise ValueError("empty command")
    if parts[0] in ("python", "python3"):
        parts[0] = sys.executable
    return StdioServerParameters(command=parts[0], args=parts[1:])


def load_environment(path: str) -> type[Environment]:
    """Import `"package.module:Class"` and check that it is an Environment subclass."""
    module_name, _, attr = path.partition(":")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # like `python -m`: modules in the working directory are importable
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not (inspect.isclass(obj) and issubclass(obj, Environment)):
        raise TypeError(f"{path} is {obj!r}, not an mcpgym.Environment subclass")
    return obj
