"""`connect(target)`: one entry point; the door is chosen from the target's form.

Layer: client facade. Parses with `_target` (the one target grammar) and opens the door the
form names; nothing imports it but `__init__`, `_sync` and the CLI.
"""

from __future__ import annotations

from mcpgym._client.api import AsyncEnv
from mcpgym._client.http_door import HTTPDoor
from mcpgym._client.inprocess import InProcessDoor
from mcpgym._client.mcp_door import ClientDoor
from mcpgym._targets.spec import is_spec, open_spec
from mcpgym._targets.target import SupportsConnect, Target, TargetError, command, load_environment, parse

__all__ = ["SupportsConnect", "Target", "TargetError", "command", "connect", "load_environment"]


def connect(
    target: Target,
    *,
    mode: str = "auto",
    read_timeout: float | None = None,
    headers: dict[str, str] | None = None,
) -> AsyncEnv:
    """An environment client for `target`; use it as `async with connect(target) as env:`.

    `target` is one of (the grammar every mcpgym entry point shares, `mcpgym._targets.target`):

    - an object with `__mcpgym_connect__` (e.g. `mcpgym.pool.Pool`: episodes spread over replicas);
    - an `Environment` subclass or `functools.partial(Subclass, **kwargs)` (one fresh instance
      per episode), an instance (shared by its episodes), `"package.module:Class"`,
      `"package.module"` (its one Environment subclass) or `"path/to/file.py[:Class]"`:
      **in-process**, no transport at all;
    - `"http://host:port/mcp"`: MCP streamable HTTP;
    - a command, as a string or argv list (`"python -m mcpgym.servers.echo"`; a leading `python` means
      this interpreter), or `StdioServerParameters`: MCP over the command's stdio;
    - a `GymServer`, or any `mcp.server.Server` / `MCPServer`: MCP over the SDK's in-memory
      transport;
    - a run spec, `"mcpgym.yaml"` (any `.yaml` / `.yml` path): the environment it names, built
      with its `args`.

    A string that fits no form, or two (a bare name that is both a module and a command on
    PATH), raises `TargetError` listing the forms. Module names resolve against `sys.path` as
    it is: `connect` does not add the working directory (the `mcpgym` command does, as
    `python -m` does).

    Any MCP server works, not only mcpgym ones: without the Gym control plane `reset()` starts
    nothing on the server and steps carry no reward, but every tool is still an action.

    `mode` and `read_timeout` apply to the MCP doors (`mode` as in `mcp.Client`), `headers` to
    HTTP (a `ValueError` for any other target: there is nowhere to send them). Every `connect(url)`
    of a process shares one lean connection to the server (rfcs/0019-doors.md).
    """
    if is_spec(target):  # an mcpgym.yaml run spec: what it names, with its token as a header
        target, headers = open_spec(target, headers)
    parsed = parse(target)
    if parsed.form == "connectable":
        opener: SupportsConnect = parsed.value
        return opener.__mcpgym_connect__(mode=mode, read_timeout=read_timeout, headers=headers)
    if parsed.form == "url":
        return AsyncEnv(HTTPDoor(parsed.value, mode=mode, read_timeout=read_timeout, headers=headers))
    if headers:
        raise ValueError(f"headers go with an HTTP URL; {target!r} is a {parsed.form} target, which has no HTTP")
    if parsed.form == "environment":
        return AsyncEnv(InProcessDoor(parsed.value))
    if parsed.form in ("command", "server"):
        return AsyncEnv(ClientDoor(parsed.value, mode=mode, read_timeout=read_timeout))
    raise TargetError(f"Cannot connect to {target!r}.")  # pragma: no cover - parse() knows every form
