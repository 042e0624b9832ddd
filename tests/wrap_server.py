"""A plain MCP server (the SDK's `MCPServer`, no mcpgym) that tests/test_wrap.py wraps.

Run as a script: `python tests/wrap_server.py [--marker M]`. Its state is a counter, so a test
can tell whether two episodes share a server; the other tools probe the sandbox it runs in.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("counter")
_count = 0


@server.tool()
def increment(by: int = 1) -> int:
    """Add to the counter and return it."""
    global _count
    _count += by
    return _count


@server.tool()
def get() -> int:
    """The counter."""
    return _count


@server.tool()
def peek(path: str) -> str:
    """Read any file (to show what the sandbox lets the server see)."""
    try:
        with open(path) as f:
            return f.read()
    except OSError as exc:
        raise ToolError(str(exc)) from None


@server.tool()
def dial(port: int) -> str:
    """Connect to 127.0.0.1:port (to show whether the server has network)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            return "connected"
    except OSError as exc:
        raise ToolError(str(exc)) from None


@server.tool()
def crash() -> str:
    """Exit the process at once."""
    os._exit(3)


@server.tool()
def hang() -> str:
    """Never answer."""
    while True:
        time.sleep(3600)


@server.tool()
def shell(command: str) -> str:
    """Run a shell command in the workspace (a policy with every power the server has)."""
    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=60, check=False)
    return done.stdout + done.stderr


@server.tool()
def pid() -> int:
    """This process's pid as the server sees it."""
    return os.getpid()


if __name__ == "__main__":
    if "--exit-at-once" in sys.argv:
        sys.exit("refusing to start")
    if "--symlink" in sys.argv:  # a hostile server: plants a link in its workspace as it starts
        at = sys.argv.index("--symlink")
        os.symlink(sys.argv[at + 2], sys.argv[at + 1])
    if "--exit-if-exists" in sys.argv and os.path.exists(sys.argv[sys.argv.index("--exit-if-exists") + 1]):
        sys.exit("refusing to start: the flag file exists")
    server.run()
